package web_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/web/webtest"
)

// versionEvalDoc is GET /api/models/:id's evaluation and metrics.
type versionEvalDoc struct {
	ID         string `json:"id"`
	Evaluation *struct {
		RunID         string    `json:"run_id"`
		GoldenSet     string    `json:"golden_set"`
		GoldenSetHash string    `json:"golden_set_hash"`
		MeanReward    *float64  `json:"mean_reward"`
		CI            []float64 `json:"ci"`
		Items         int       `json:"items"`
		Splits        []struct {
			Split      string    `json:"split"`
			Items      int       `json:"items"`
			MeanReward *float64  `json:"mean_reward"`
			CI         []float64 `json:"ci"`
		} `json:"splits"`
		JudgeCalls   int     `json:"judge_calls"`
		JudgeCostUSD float64 `json:"judge_cost_usd"`
		FinishedAt   string  `json:"finished_at"`
	} `json:"evaluation"`
	PerformanceMetrics map[string]any `json:"performance_metrics"`
}

// A version fine-tuned at OpenAI, registered and staged on an openai
// target through the API, is evaluated where the provider serves it (a
// stand-in of OpenAI's chat completions, asked for the ft: model with the
// target's key) by a judge stand-in, with a worker. Until the run
// finishes GET /api/models/:id answers "evaluation": null; then the
// run's mean and interval, each split's mean as the run's items give it,
// the judge's calls and cost and the golden set's hash, and its
// performance metrics carry the score. The version's page shows it.
func TestVersionCarriesEvaluation(t *testing.T) {
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
	set, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	admin := s.APIKey(seeded.OrgID, "ops", "admin")
	viewer := s.APIKey(seeded.OrgID, "dash", "viewer")

	const modelID, key = "ft:gpt-4o-mini-2024-07-18:acme:support:9xK2pQ", "sk-openai-target"
	provider := chattest.New(func(r chattest.Request) chattest.Reply {
		if r.Model != modelID || r.Authorization != "Bearer "+key {
			return chattest.Reply{Status: 401}
		}
		return chattest.Reply{Content: "Fine-tuned: " + r.Last(), PromptTokens: 40, CompletionTokens: 12}
	})
	t.Cleanup(provider.Close)
	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		score := "0.4"
		if strings.Contains(r.Last(), "password") {
			score = "0.9"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "Graded."}`, PromptTokens: 500, CompletionTokens: 50}
	})
	t.Cleanup(judge.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1", "model": "deepseek-chat",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai",
		"base_url": provider.URL + "/v1", "api_key": key}).Must(t, http.StatusCreated)
	var v versionEvalDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": modelID, "base_model": "gpt-4o-mini-2024-07-18"}).
		Must(t, http.StatusCreated).JSON(t, &v)
	get := func() versionEvalDoc {
		t.Helper()
		var out versionEvalDoc
		res := s.API(viewer, http.MethodGet, "/api/models/"+v.ID, nil).Must(t, http.StatusOK)
		if !strings.Contains(res.Body, `"evaluation":`) {
			t.Fatalf("no evaluation field: %s", res.Body)
		}
		res.JSON(t, &out)
		return out
	}
	if got := get(); got.Evaluation != nil || len(got.PerformanceMetrics) != 0 {
		t.Fatalf("before any evaluation: %+v", got)
	}

	var d map[string]any
	s.API(admin, http.MethodPost, "/api/models/"+v.ID+"/deploy", map[string]any{"alias": "candidate", "target": "openai-prod", "reason": "stage"}).
		Must(t, http.StatusAccepted).JSON(t, &d)
	for deadline := time.Now().Add(30 * time.Second); d["status"] != "succeeded"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || d["status"] == "failed" {
			t.Fatalf("deployment %v", d)
		}
		s.API(viewer, http.MethodGet, "/api/deployments/"+d["id"].(string), nil).Must(t, http.StatusOK).JSON(t, &d)
	}
	var run struct {
		evaluationDoc
		Items []struct {
			Split  string  `json:"split"`
			Answer string  `json:"answer"`
			Reward float64 `json:"reward"`
		} `json:"items"`
	}
	s.API(admin, http.MethodPost, "/api/evaluations", map[string]any{
		"golden_set_version_id": set.ID, "candidate": map[string]any{"model_version_id": v.ID},
		"judge": map[string]any{"endpoint": "deepseek"}, "scorers": []string{"judge"}, "reward_formula": map[string]any{"judge": 1.0},
	}).Must(t, http.StatusAccepted).JSON(t, &run)
	for deadline := time.Now().Add(60 * time.Second); run.Status == "queued" || run.Status == "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("evaluation still %s", run.Status)
		}
		// The version carries the run once it finished, not before (the
		// run is read after the version).
		carried := get().Evaluation != nil
		s.API(viewer, http.MethodGet, "/api/evaluations/"+run.ID, nil).Must(t, http.StatusOK).JSON(t, &run)
		if carried && run.Status != "succeeded" {
			t.Fatalf("an evaluation on the version while its run is %s", run.Status)
		}
	}
	if run.Status != "succeeded" || run.Summary.MeanReward == nil || len(run.Items) == 0 {
		t.Fatalf("evaluation %s %+v", run.Status, run.Summary)
	}
	for _, it := range run.Items {
		if !strings.HasPrefix(it.Answer, "Fine-tuned: ") {
			t.Errorf("an answer not from the provider: %q", it.Answer)
		}
	}

	got := get()
	e := got.Evaluation
	if e == nil {
		t.Fatal("no evaluation on the version after its run finished")
	}
	var hash string
	if err := s.Pool.QueryRow(ctx, `SELECT content_hash FROM dataset_versions WHERE id = $1`, set.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if e.RunID != run.ID || e.GoldenSetHash != hash || e.MeanReward == nil || *e.MeanReward != *run.Summary.MeanReward ||
		len(e.CI) != 2 || e.CI[0] != run.Summary.CI[0] || e.CI[1] != run.Summary.CI[1] || e.Items != len(run.Items) ||
		e.JudgeCalls != run.Summary.JudgeCalls || e.JudgeCostUSD != run.Summary.JudgeCostUSD || e.FinishedAt == "" {
		t.Errorf("the version's evaluation %+v, the run's %+v", *e, run.Summary)
	}
	// Each split's mean, from the run's items.
	sums, counts := map[string]float64{}, map[string]int{}
	for _, it := range run.Items {
		sums[it.Split] += it.Reward
		counts[it.Split]++
	}
	if len(e.Splits) != len(counts) {
		t.Errorf("splits %+v, the items have %v", e.Splits, counts)
	}
	for _, sp := range e.Splits {
		if sp.Items != counts[sp.Split] || sp.MeanReward == nil || math.Abs(*sp.MeanReward-sums[sp.Split]/float64(counts[sp.Split])) > 1e-9 {
			t.Errorf("split %s: %+v, want %d items with mean %v", sp.Split, sp, counts[sp.Split], sums[sp.Split]/float64(counts[sp.Split]))
		}
	}
	if got.PerformanceMetrics["eval_score"] != *run.Summary.MeanReward || got.PerformanceMetrics["golden_set_hash"] != hash {
		t.Errorf("performance metrics %v", got.PerformanceMetrics)
	}

	// The version's page shows it.
	b := webtest.Browser(t)
	err = chromedp.Do(b,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, seeded.Email),
		chromedp.SendKeys(`input[name=password]`, seeded.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/models/versions/"+v.ID),
		chromedp.WaitVisible(`#version-evaluation`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if mean, want := text(t, b, `#version-eval-mean`), strconv.FormatFloat(*e.MeanReward, 'f', 3, 64); mean != want {
		t.Errorf("the page's mean reward %q, want %s", mean, want)
	}
	if got := text(t, b, `#version-eval-hash`); !strings.HasPrefix(hash, got) || got == "" {
		t.Errorf("the page's golden set hash %q, want a prefix of %s", got, hash)
	}
	if rows := text(t, b, `#version-eval-splits tbody`); len(strings.Split(rows, "\n")) != len(e.Splits) {
		t.Errorf("the page's splits: %q", rows)
	}
	if href, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('#version-eval-run').getAttribute('href')`)); err != nil ||
		href != "/evaluations/runs/"+run.ID {
		t.Errorf("the page links the run as %q (%v)", href, err)
	}
	webtest.Screenshot(t, b, "version-evaluation")
}
