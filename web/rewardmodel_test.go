package web_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// rmLogit is the stand-in reward model: the number of "!" in the answer
// less one, so "Reset the router!!!" scores 2.
func rmLogit(answer string) float64 { return float64(strings.Count(answer, "!")) - 1 }

// sigmoid is 1/(1+e^-x), written out here, not taken from Curate.
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// A reward model registered by hand and served by a vLLM pooling
// stand-in scores best-of-N candidates, by name and alias or by version,
// picking the one it scores highest and reporting that score as
// reward_score; an evaluation with it as a scorer stores its score per
// item and uses it in the reward formula. What cannot score is refused on
// the field that named it.
func TestRewardModelScorer(t *testing.T) {
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
	golden, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	admin := s.APIKey(seeded.OrgID, "ops", "admin")
	assistant := s.APIKey(seeded.OrgID, "assistant", "curator")
	viewer := s.APIKey(seeded.OrgID, "dash", "viewer")

	rm := vllmtest.NewPooling(t, "support-rm", "/runs/7f3a/final", func(conv []vllmtest.Message) float64 {
		return rmLogit(conv[len(conv)-1].Content)
	})
	gen := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	// The candidate answers with one to three "!", by the question's length.
	gen.Answer = func(_, prompt string) string { return "Try this" + strings.Repeat("!", 1+len(prompt)%3) }
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "rm-1", "kind": "vllm_pooling", "base_url": rm.URL}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": gen.URL}).Must(t, http.StatusCreated)
	var rmv, idle, lora modelDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support-rm", "model_id": "/runs/7f3a/final", "kind": "reward"}).
		Must(t, http.StatusCreated).JSON(t, &rmv)
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support-rm", "model_id": "/runs/8b1c/final", "kind": "reward"}).
		Must(t, http.StatusCreated).JSON(t, &idle)
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-1",
		"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, &lora)
	if rmv.Kind != "reward" {
		t.Fatalf("registered %+v", rmv)
	}
	deploy := func(id, target string) map[string]any {
		t.Helper()
		var raw map[string]any
		s.API(admin, http.MethodPost, "/api/models/"+id+"/deploy", map[string]any{"alias": "production", "target": target, "reason": "test"}).
			Must(t, http.StatusAccepted).JSON(t, &raw)
		for deadline := time.Now().Add(30 * time.Second); raw["status"] == "queued" || raw["status"] == "running"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("deployment never finished")
			}
			s.API(viewer, http.MethodGet, "/api/deployments/"+raw["id"].(string), nil).Must(t, http.StatusOK).JSON(t, &raw)
		}
		return raw
	}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/models/"+rmv.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "x"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "target" || !strings.Contains(p.Errors[0].Message, "is a reward model") {
		t.Errorf("a reward model on a LoRA server: %+v", p)
	}
	if d := deploy(rmv.ID, "rm-1"); d["status"] != "succeeded" || d["served_name"] != "support-rm" {
		t.Fatalf("reward model deployment %v", d)
	}
	if d := deploy(lora.ID, "gpu-1"); d["status"] != "succeeded" {
		t.Fatalf("adapter deployment %v", d)
	}

	// Best-of-N by the registered model's production alias; each request
	// takes the model a while, so requests sent one after another would
	// not overlap.
	rm.SetDelay(200 * time.Millisecond)
	cands := []string{"Reset it!", "Reset the router!!!", "Check the cable!!", "ok"}
	var out bestOfNDoc
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "My internet is down",
		"context":    map[string]any{"documents": []any{"Red light: no line signal.", map[string]any{"text": "Check the cable first."}}},
		"candidates": cands, "scorer": map[string]any{"reward_model": "support-rm", "alias": "production"}}).Must(t, http.StatusOK).JSON(t, &out)
	if out.Response != "Reset the router!!!" || out.Selected != 1 || math.Abs(out.RewardScore-sigmoid(2)) > 1e-12 || out.CandidatesCount != 4 {
		t.Fatalf("best of four by the reward model: %+v", out)
	}
	for i, c := range cands {
		if math.Abs(out.Scores[i].Score-sigmoid(rmLogit(c))) > 1e-12 || out.Scores[i].Invalid != "" {
			t.Errorf("candidate %d scored %+v, want %v", i, out.Scores[i], sigmoid(rmLogit(c)))
		}
	}
	reqs := rm.Requests()
	if len(reqs) != 4 || rm.Peak() < 2 || !strings.Contains(reqs[0].Messages[0].Content, "[2] Check the cable first.") {
		t.Errorf("%d requests, %d at once, first %+v", len(reqs), rm.Peak(), reqs[0])
	}
	var logged struct {
		Scorer map[string]any `json:"scorer"`
	}
	s.API(viewer, http.MethodGet, "/api/best-of-n/"+out.ResponseID, nil).Must(t, http.StatusOK).JSON(t, &logged)
	if logged.Scorer["scored_by"] != rmv.ID || logged.Scorer["alias"] != "production" {
		t.Errorf("logged scorer %v", logged.Scorer)
	}
	// By the version's id, the alias left out: the same scores, from the
	// cache.
	rm.Reset()
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "My internet is down",
		"context":    map[string]any{"documents": []any{"Red light: no line signal.", map[string]any{"text": "Check the cable first."}}},
		"candidates": cands, "scorer": map[string]any{"reward_model_version_id": rmv.ID}, "selection": "threshold", "threshold": 0.7}).
		Must(t, http.StatusOK).JSON(t, &out)
	// The first at or above 0.7 is "Reset the router!!!" (sigmoid(2) =
	// 0.881); "Check the cable!!" (sigmoid(1) = 0.731) comes after it.
	if out.Selected != 1 || len(rm.Requests()) != 0 {
		t.Errorf("by version: %+v, %d requests", out, len(rm.Requests()))
	}
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "q", "candidates": []string{"a!", "b"},
		"scorer": map[string]any{"reward_model": "support-rm"}}).Must(t, http.StatusOK).JSON(t, &out)
	if out.Selected != 0 {
		t.Errorf("the alias left out is production: %+v", out)
	}

	// Refusals, each on its field.
	for _, tc := range []struct {
		body  map[string]any
		field string
		words string
	}{
		{map[string]any{"reward_model": "support-rm", "alias": "staging"}, "scorer.reward_model", `no registered model "support-rm" has a version under the alias "staging"`},
		{map[string]any{"reward_model_version_id": lora.ID}, "scorer.reward_model_version_id", "is a LoRA adapter, not a reward model"},
		{map[string]any{"reward_model_version_id": idle.ID}, "scorer.reward_model_version_id", "is not served where Curate can ask it"},
		{map[string]any{"alias": "production", "rules": []string{"refusal"}}, "scorer.alias", "goes with reward_model"},
		{map[string]any{"reward_model": "support-rm", "judge": "deepseek"}, "scorer", "exactly one"},
		{map[string]any{"rules": []any{map[string]any{"name": "rm", "kind": "reward_model", "model_version_id": rmv.ID}}}, "scorer.rules", "rule scorers only"},
	} {
		s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "q", "candidates": []string{"a", "b"}, "scorer": tc.body}).
			Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != tc.field || !strings.Contains(p.Errors[0].Message, tc.words) {
			t.Errorf("%v: %+v; want %s: %s", tc.body, p, tc.field, tc.words)
		}
	}
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "q", "model_version_id": rmv.ID, "n": 2,
		"scorer": map[string]any{"rules": []string{"refusal"}}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "model_version_id" || !strings.Contains(p.Errors[0].Message, "is a reward model") {
		t.Errorf("a reward model asked for answers: %+v", p)
	}

	// An evaluation scored by the reward model, with a rule beside it.
	rm.Reset()
	rm.SetDelay(0)
	var run struct {
		evaluationDoc
		Items []struct {
			Query  string  `json:"query"`
			Answer string  `json:"answer"`
			Reward float64 `json:"reward"`
			Scores map[string]struct {
				Value       float64 `json:"value"`
				Explanation string  `json:"explanation"`
				Invalid     string  `json:"invalid"`
			} `json:"scores"`
		} `json:"items"`
	}
	s.API(admin, http.MethodPost, "/api/evaluations", map[string]any{
		"golden_set_version_id": golden.ID, "candidate": map[string]any{"model_version_id": lora.ID},
		"scorers":        []any{map[string]any{"name": "rm", "kind": "reward_model", "model_version_id": rmv.ID}, "refusal"},
		"reward_formula": map[string]any{"rm": 1.0},
	}).Must(t, http.StatusAccepted).JSON(t, &run)
	for deadline := time.Now().Add(60 * time.Second); run.Status == "queued" || run.Status == "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("evaluation still %s", run.Status)
		}
		s.API(viewer, http.MethodGet, "/api/evaluations/"+run.ID, nil).Must(t, http.StatusOK).JSON(t, &run)
	}
	if run.Status != "succeeded" || len(run.Items) == 0 || run.Summary.Invalid != 0 || run.Summary.Formula != "R = 1·rm" {
		t.Fatalf("evaluation %s %+v", run.Status, run.Summary)
	}
	distinct, asked := map[string]bool{}, map[string]bool{}
	for i, it := range run.Items {
		want := sigmoid(rmLogit(it.Answer))
		sc := it.Scores["rm"]
		if math.Abs(sc.Value-want) > 1e-12 || math.Abs(it.Reward-want) > 1e-12 || !strings.HasPrefix(sc.Explanation, "support-rm 1.0.0 scored ") {
			t.Errorf("item %d, %q: rm %+v, reward %v; want %v", i, it.Answer, sc, it.Reward, want)
		}
		if _, ok := it.Scores["refusal"]; !ok {
			t.Errorf("item %d has no refusal score", i)
		}
		distinct[it.Answer] = true
		asked[it.Query+"\x00"+it.Answer] = true
	}
	// Each conversation was asked once; items asking the same question
	// and answered alike were scored from the cache.
	if n := len(rm.Requests()); n != len(asked) {
		t.Errorf("%d requests for %d items, %d distinct conversations", n, len(run.Items), len(asked))
	}
	if len(distinct) < 2 {
		t.Errorf("the candidate's answers did not vary: %v", distinct)
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
		words string
	}{
		{map[string]any{"candidate": map[string]any{"model_version_id": lora.ID},
			"scorers": []any{map[string]any{"name": "rm", "kind": "reward_model", "model_version_id": lora.ID}}, "reward_formula": map[string]any{"rm": 1}},
			"scorers[0].model_version_id", "is a LoRA adapter, not a reward model"},
		{map[string]any{"candidate": map[string]any{"model_version_id": lora.ID},
			"scorers": []any{map[string]any{"name": "rm", "kind": "reward_model", "model_version_id": idle.ID}}, "reward_formula": map[string]any{"rm": 1}},
			"scorers[0].model_version_id", "is not served where Curate can ask it"},
		{map[string]any{"candidate": map[string]any{"model_version_id": lora.ID}, "scorers": []string{"reward_model"}, "reward_formula": map[string]any{"reward_model": 1}},
			"scorers[0]", "names its version"},
		{map[string]any{"candidate": map[string]any{"model_version_id": rmv.ID}, "scorers": []string{"refusal"}, "reward_formula": map[string]any{"refusal": 1}},
			"candidate.model_version_id", "is a reward model"},
	} {
		tc.body["golden_set_version_id"] = golden.ID
		s.API(admin, http.MethodPost, "/api/evaluations", tc.body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != tc.field || !strings.Contains(p.Errors[0].Message, tc.words) {
			t.Errorf("%v: %+v; want %s: %s", tc.body, p, tc.field, tc.words)
		}
	}

	// In production the reward model has its own monitors: its latency
	// over every request sent it (best-of-N's six and the evaluation's),
	// its score drift over the live ones only (best-of-N's).
	var mons struct {
		Data []struct {
			VersionID string `json:"version_id"`
			Kind      string `json:"kind"`
			Monitors  []struct {
				Kind    string `json:"kind"`
				Samples int    `json:"samples"`
			} `json:"monitors"`
		} `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/monitors", nil).Must(t, http.StatusOK).JSON(t, &mons)
	found := false
	for _, v := range mons.Data {
		if v.VersionID != rmv.ID {
			continue
		}
		found = true
		if v.Kind != "reward" || len(v.Monitors) != 2 || v.Monitors[0].Kind != "monitor_reward_latency" || v.Monitors[0].Samples != 6+len(asked) ||
			v.Monitors[1].Kind != "monitor_reward_drift" || v.Monitors[1].Samples != 6 {
			t.Errorf("the reward model's monitors %+v; want %d requests, 6 live", v, 6+len(asked))
		}
	}
	if !found {
		t.Errorf("the reward model in production is not monitored: %+v", mons.Data)
	}
	s.User(seeded.OrgID, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/monitors?version="+rmv.ID).Must(t, http.StatusOK)
	for _, want := range []string{`<span class="badge">Reward model</span>`, `data-monitor="monitor_reward_latency"`, "Reward model latency p95",
		`data-monitor="monitor_reward_drift"`, "The reward model&#39;s first week is not over", "latency p95 above 100 ms"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the monitors page lacks %q", want)
		}
	}
}
