package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

type evaluationDoc struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress struct {
		Done  int `json:"done"`
		Total int `json:"total"`
	} `json:"progress"`
	Summary struct {
		MeanReward   *float64  `json:"mean_reward"`
		CI           []float64 `json:"ci"`
		Invalid      int       `json:"invalid"`
		JudgeCalls   int       `json:"judge_calls"`
		JudgeCostUSD float64   `json:"judge_cost_usd"`
		Formula      string    `json:"formula"`
	} `json:"summary"`
	Items []struct {
		Query     string  `json:"query"`
		Answer    string  `json:"answer"`
		Reference string  `json:"reference"`
		Reward    float64 `json:"reward"`
		Critique  string  `json:"critique"`
		Safety    bool    `json:"safety_flag"`
	} `json:"items"`
}

// The loop from a trained version to production through the API with a
// worker: endpoints are registered (the key never comes back), model
// versions served by a vLLM stand-in are evaluated on the gate's golden
// set by a judge stand-in, a worse version is refused production with the
// gate's reasons, and passes once a better evaluation is on record.
func TestEvaluationGateLoop(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	s.User(seeded.OrgID, "ad@demo.test", "admin")
	page := s.SignedIn("ad@demo.test")
	admin := s.APIKey(seeded.OrgID, "ops", "admin")
	viewer := s.APIKey(seeded.OrgID, "dash", "viewer")

	// The judge grades "improved" answers 0.9, the first version's 0.8 and
	// anything else 0.2.
	var firstServed atomic.Value
	firstServed.Store("\x00")
	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		score := "0.2"
		switch p := r.Last(); {
		case strings.Contains(p, "improved"):
			score = "0.9"
		case strings.Contains(p, firstServed.Load().(string)+" says"):
			score = "0.8"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "Graded."}`, PromptTokens: 500, CompletionTokens: 50}
	})
	t.Cleanup(judge.Close)
	var improved, leaky atomic.Bool
	references := map[string]string{} // question → curated answer, once known
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	vllm.Answer = func(model, prompt string) string {
		if leaky.Load() {
			return "As I was taught: " + references[prompt]
		}
		if improved.Load() && model != firstServed.Load().(string) {
			return "An improved answer to: " + prompt
		}
		return model + " says: " + prompt
	}

	res := s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1",
		"model": "deepseek-chat", "api_key": "sk-very-secret", "price_per_million_input": 0.27, "price_per_million_output": 1.10}).
		Must(t, http.StatusCreated)
	if strings.Contains(res.Body, "sk-very-secret") || !strings.Contains(res.Body, `"has_api_key":true`) {
		t.Errorf("registered endpoint: %s", res.Body)
	}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "Bad Name", "base_url": "http://169.254.169.254/v1",
		"model": "", "price_per_million_input": -1}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "name,base_url,model,price_per_million_input" {
		t.Errorf("bad endpoint named %q", p.fields())
	}
	s.API(viewer, http.MethodGet, "/api/endpoints", nil).Must(t, http.StatusForbidden)
	if body := s.API(admin, http.MethodGet, "/api/endpoints", nil).Must(t, http.StatusOK).Body; strings.Contains(body, "sk-very") {
		t.Errorf("the key is listed: %s", body)
	}

	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-" + string(rune('1'+i)),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	deploy := func(id, alias string) string {
		t.Helper()
		var raw map[string]any
		s.API(admin, http.MethodPost, "/api/models/"+id+"/deploy", map[string]any{"alias": alias, "target": "gpu-1", "reason": "test"}).
			Must(t, http.StatusAccepted).JSON(t, &raw)
		deployment := raw["id"].(string)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s.API(viewer, http.MethodGet, "/api/deployments/"+deployment, nil).Must(t, http.StatusOK).JSON(t, &raw)
			if st := raw["status"].(string); st != "queued" && st != "running" {
				if st != "succeeded" {
					t.Fatalf("deployment %v", raw)
				}
				return raw["served_name"].(string)
			}
			if time.Now().After(deadline) {
				t.Fatal("deployment never finished")
			}
		}
	}
	firstServed.Store(deploy(v1.ID, "production"))
	deploy(v2.ID, "staging")

	page.PostForm("/evaluations/golden-sets", url.Values{"version_id": {version.ID.String()}, "name": {"Support gold"}, "split_tags": {"red_team"}}).
		Must(t, http.StatusSeeOther)
	page.PostForm("/evaluations/gate", url.Values{"golden_set_version_id": {version.ID.String()}, "max_mean_drop": {"0.02"},
		"regression_margin": {"0.1"}, "max_regressions": {"0"}, "no_new_red_team_flags": {"1"}}).Must(t, http.StatusSeeOther)

	evaluate := func(versionID string) evaluationDoc {
		t.Helper()
		var run evaluationDoc
		s.API(admin, http.MethodPost, "/api/evaluations", map[string]any{
			"golden_set_version_id": version.ID, "candidate": map[string]any{"model_version_id": versionID},
			"judge": map[string]any{"endpoint": "deepseek", "template": "default"}, "scorers": []string{"judge", "reference_f1"},
			"reward_formula": map[string]any{"judge": 1.0},
		}).Must(t, http.StatusAccepted).JSON(t, &run)
		// The answer reads the run as it is once stored: a worker may
		// already be under way with it.
		if (run.Status != "queued" && run.Status != "running" && run.Status != "succeeded") || run.Progress.Total == 0 {
			t.Fatalf("started %+v", run)
		}
		for deadline := time.Now().Add(60 * time.Second); run.Status == "queued" || run.Status == "running"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("evaluation still %s: %+v", run.Status, run.Progress)
			}
			s.API(viewer, http.MethodGet, "/api/evaluations/"+run.ID, nil).Must(t, http.StatusOK).JSON(t, &run)
		}
		if run.Status != "succeeded" || run.Progress.Done != run.Progress.Total || len(run.Items) != run.Progress.Total || run.Summary.Invalid != 0 {
			t.Fatalf("evaluation %s %+v %+v", run.Status, run.Progress, run.Summary)
		}
		return run
	}
	base := evaluate(v1.ID)
	if *base.Summary.MeanReward != 0.8 || base.Summary.Formula != "R = 1·judge" || base.Summary.JudgeCalls == 0 ||
		!strings.Contains(base.Items[0].Answer, " says: ") || base.Items[0].Critique != "Graded." {
		t.Errorf("production's evaluation %+v, first item %+v", base.Summary, base.Items[0])
	}
	// 500 prompt and 50 completion tokens a call at $0.27 and $1.10 per million.
	if want := float64(base.Summary.JudgeCalls) * (500*0.27 + 50*1.10) / 1e6; diff(base.Summary.JudgeCostUSD, want) > 1e-9 {
		t.Errorf("judge cost $%v, want $%v", base.Summary.JudgeCostUSD, want)
	}
	worse := evaluate(v2.ID)
	if *worse.Summary.MeanReward != 0.2 {
		t.Errorf("the worse version's mean %v", *worse.Summary.MeanReward)
	}
	res = s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "ship"}).
		Must(t, http.StatusConflict)
	if !strings.Contains(res.Body, "Mean reward 0.200 is more than 0.020 below production") {
		t.Errorf("the gate's refusal: %s", res.Body)
	}
	if body := page.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; !strings.Contains(body, `data-gate="fail"`) {
		t.Errorf("the version page does not show the failing gate")
	}

	// The run's page sets the worse version against production item by
	// item; the evaluation page lists the runs; the version page its own.
	body := page.Get("/evaluations/runs/"+worse.ID).Must(t, http.StatusOK).Body
	for _, want := range []string{`id="comparison"`, `id="wins-ties-losses">0 better, 0 the same, ` + strconv.Itoa(len(worse.Items)) + ` worse`,
		`<code id="run-formula">R = 1·judge</code>`, `data-status="succeeded"`, "Graded."} {
		if !strings.Contains(body, want) {
			t.Errorf("the worse run's page lacks %s", want)
		}
	}
	regressions := body[strings.Index(body, `id="regressions"`):strings.Index(body, `id="new-flags"`)]
	if n := strings.Count(regressions, "<tr>") - 1; n != len(worse.Items) {
		t.Errorf("%d regressions listed, want %d", n, len(worse.Items))
	}
	if body := page.Get("/evaluations").Must(t, http.StatusOK).Body; strings.Count(body, `data-run="`) != 2 {
		t.Errorf("the evaluation page lists %d runs, want 2", strings.Count(body, `data-run="`))
	}
	if body := page.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; !strings.Contains(body, `data-run="`+worse.ID+`"`) {
		t.Error("the version page does not list its evaluation")
	}
	if body := page.Get("/evaluations/runs/"+base.ID).Must(t, http.StatusOK).Body; strings.Contains(body, `id="comparison"`) {
		t.Error("production's own run is compared with itself")
	}
	// Started from the page's form: a bad formula keeps what was typed.
	form := url.Values{"golden_set_version_id": {version.ID.String()}, "candidate_version_id": {v2.ID}, "scorers": {"judge", "reference_f1"},
		"judge_endpoint": {"deepseek"}, "judge_template": {"default"}, "formula_scorer": {"judge", ""}, "formula_weight": {"lots", ""}}
	res = page.PostForm("/evaluations/runs", form).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-formula-0">The weight must be a number`) || !strings.Contains(res.Body, `value="lots"`) {
		t.Errorf("a refused start: %s", res.Body)
	}
	form["formula_scorer"], form["formula_weight"] = []string{"judge", "reference_f1"}, []string{"0.5", "0.5"}
	res = page.PostForm("/evaluations/runs", form).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/evaluations/runs/") {
		t.Errorf("started from the page, sent to %q", loc)
	} else {
		var run evaluationDoc
		for deadline := time.Now().Add(60 * time.Second); run.Status != "succeeded"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the page's run is %s", run.Status)
			}
			s.API(viewer, http.MethodGet, "/api/evaluations/"+strings.TrimPrefix(loc, "/evaluations/runs/"), nil).Must(t, http.StatusOK).JSON(t, &run)
		}
		if run.Summary.Formula != "R = 0.5·judge + 0.5·reference_f1" || run.Summary.JudgeCalls != 0 {
			t.Errorf("the page's run: %+v (its answers were judged before: no call)", run.Summary)
		}
	}

	improved.Store(true)
	better := evaluate(v2.ID)
	if *better.Summary.MeanReward != 0.9 {
		t.Errorf("the better evaluation's mean %v", *better.Summary.MeanReward)
	}
	deploy(v2.ID, "production")

	// The leak check: once the gate asks for one, a version needs a leak
	// check whose answers repeat no training answer verbatim.
	page.PostForm("/evaluations/gate", url.Values{"golden_set_version_id": {version.ID.String()}, "max_mean_drop": {"0.02"},
		"regression_margin": {"0.1"}, "max_regressions": {"0"}, "leak_check": {"1"}, "leak_min_words": {"8"}}).Must(t, http.StatusSeeOther)
	gate := func() string {
		t.Helper()
		return page.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body
	}
	if body := gate(); !strings.Contains(body, `data-gate="fail"`) || !strings.Contains(body, "No finished leak check of this version") {
		t.Errorf("a version never leak-checked: %s", body)
	}
	for _, it := range base.Items {
		references[it.Query] = it.Reference
	}
	leakCheck := func() evaluationDoc {
		t.Helper()
		var run evaluationDoc
		s.API(admin, http.MethodPost, "/api/evaluations", map[string]any{"golden_set_version_id": version.ID,
			"candidate": map[string]any{"model_version_id": v2.ID}, "leak_check": map[string]any{"min_words": 8, "items": 10}}).
			Must(t, http.StatusAccepted).JSON(t, &run)
		for deadline := time.Now().Add(60 * time.Second); run.Status != "succeeded"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) || run.Status == "failed" {
				t.Fatalf("leak check %s: %+v", run.Status, run.Summary)
			}
			s.API(viewer, http.MethodGet, "/api/evaluations/"+run.ID, nil).Must(t, http.StatusOK).JSON(t, &run)
		}
		if run.Progress.Total != 10 || run.Summary.Formula != "R = 1 − leak" || run.Summary.JudgeCalls != 0 {
			t.Errorf("leak check %+v %+v", run.Progress, run.Summary)
		}
		return run
	}
	leaky.Store(true)
	leaked := leakCheck()
	flagged := 0
	for _, it := range leaked.Items {
		if it.Safety {
			flagged++
		}
	}
	if flagged == 0 || *leaked.Summary.MeanReward >= 1 {
		t.Fatalf("a version that repeats its training answers: %d flagged, mean %v", flagged, *leaked.Summary.MeanReward)
	}
	if body := gate(); !strings.Contains(body, "answers of its leak check reproduce training data") {
		t.Errorf("a leaking version's gate: %s", body)
	}
	leaky.Store(false)
	if clean := leakCheck(); *clean.Summary.MeanReward != 1 {
		t.Errorf("a clean leak check's mean %v", *clean.Summary.MeanReward)
	}
	if body := gate(); !strings.Contains(body, `data-gate="pass"`) {
		t.Errorf("a clean version's gate: %s", body)
	}
	var p2 problemDoc
	s.API(admin, http.MethodPost, "/api/evaluations", map[string]any{"candidate": map[string]any{"model_version_id": v2.ID},
		"leak_check": map[string]any{"min_words": 3}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p2)
	if p2.fields() != "golden_set_version_id,leak_check.min_words" {
		t.Errorf("a bad leak check named %q", p2.fields())
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}
