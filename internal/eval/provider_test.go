package eval_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/bestofn"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/serving"
)

// A version fine-tuned at OpenAI and deployed to an openai serving target
// is evaluated through the provider's chat completions (a stand-in of
// OpenAI's API): each golden question is asked of the fine-tuned model id
// with the target's key, and the judge scores the answers as for any
// candidate. Best-of-N samples the same version the same way.
func TestEvaluateProviderServedVersion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const modelID, key = "ft:gpt-4o-mini-2024-07-18:acme::9xK2pQ", "sk-provider-secret"
	var mu sync.Mutex
	var seen []chattest.Request
	openai := chattest.New(func(r chattest.Request) chattest.Reply {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if r.Model != modelID || r.Authorization != "Bearer "+key {
			return chattest.Reply{Status: 401}
		}
		return chattest.Reply{Content: "From the fine-tuned model: " + r.Last(), PromptTokens: 50, CompletionTokens: 20}
	})
	t.Cleanup(openai.Close)

	if _, err := f.reg.Serving.Create(ctx, audit.System, f.org, serving.NewTarget{Name: "openai-prod", Kind: serving.KindOpenAI,
		BaseURL: openai.URL + "/v1", APIKey: key}); err != nil {
		t.Fatal(err)
	}
	v, err := f.reg.Register(ctx, audit.System, f.org, models.NewVersion{Name: "support", ModelID: modelID, BaseModel: "gpt-4o-mini-2024-07-18"})
	if err != nil {
		t.Fatal(err)
	}
	// Not deployed anywhere yet: refused, naming the field.
	cfg := f.config()
	cfg.Candidate = eval.Candidate{ModelVersionID: &v.ID}
	if _, err := f.svc.Start(ctx, audit.System, f.org, cfg); err == nil || !strings.Contains(err.Error(), "not deployed") {
		t.Fatalf("an undeployed version started: %v", err)
	}
	d, err := f.reg.Deploy(ctx, audit.System, f.org, v.ID, models.DeployRequest{Alias: "candidate", Target: "openai-prod", Reason: "to be evaluated"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Advance(ctx, d.ID); err != nil {
		t.Fatal(err)
	}

	run, err := f.svc.Start(ctx, audit.System, f.org, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Advance(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.GetRun(ctx, f.org, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.items)
	if got.Status != "succeeded" || got.Progress.Done != n || got.Summary.MeanReward == nil {
		t.Fatalf("run %s %+v %+v", got.Status, got.Progress, got.Summary)
	}
	answered := 0
	for _, it := range got.Items {
		if strings.HasPrefix(it.Answer, "From the fine-tuned model: ") {
			answered++
		}
	}
	if answered != n {
		t.Errorf("%d of %d answers came from the fine-tuned model", answered, n)
	}
	mu.Lock()
	asked := append([]chattest.Request(nil), seen...)
	mu.Unlock()
	if len(asked) != n {
		t.Errorf("the provider was asked %d times for %d items", len(asked), n)
	}
	for _, r := range asked {
		if r.Model != modelID || r.Authorization != "Bearer "+key {
			t.Errorf("the provider was asked for %q with %q", r.Model, r.Authorization)
		}
	}

	// The version carries its evaluation: the run's mean and interval,
	// each split's mean as its items give it, the judge's cost and the
	// golden set's hash; its performance metrics hold the score.
	version, err := f.reg.Get(ctx, f.org, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	e := version.Evaluation
	if e == nil {
		t.Fatal("the version carries no evaluation")
	}
	var hash string
	if err := f.pool.QueryRow(ctx, `SELECT content_hash FROM dataset_versions WHERE id = $1`, f.version).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	s := got.Summary
	if e.RunID != run.ID || e.GoldenSetVersionID != f.version || e.GoldenSetHash != hash || e.MeanReward == nil || *e.MeanReward != *s.MeanReward ||
		!slices.Equal(e.CI, s.CI) || e.Items != n || e.Invalid != s.Invalid || e.JudgeCalls != s.JudgeCalls || e.JudgeCostUSD != s.JudgeCostUSD ||
		e.Formula != s.Formula || e.FinishedAt.IsZero() || e.MeanLatencyMS == nil {
		t.Errorf("the version's evaluation %+v, the run's summary %+v", *e, s)
	}
	sums, counts := map[string]float64{}, map[string]int{}
	for _, it := range got.Items {
		counts[it.Split]++
		if it.Reward != nil {
			sums[it.Split] += *it.Reward
		}
	}
	if len(e.Splits) != len(counts) {
		t.Errorf("%d splits, the items have %d", len(e.Splits), len(counts))
	}
	for _, sp := range e.Splits {
		var rewarded int
		for _, it := range got.Items {
			if it.Split == sp.Split && it.Reward != nil {
				rewarded++
			}
		}
		if sp.Items != counts[sp.Split] || sp.MeanReward == nil || math.Abs(*sp.MeanReward-sums[sp.Split]/float64(rewarded)) > 1e-12 ||
			(rewarded > 1) != (len(sp.CI) == 2) {
			t.Errorf("split %s: %+v, want %d items, mean %v", sp.Split, sp, counts[sp.Split], sums[sp.Split]/float64(rewarded))
		}
	}
	var metrics map[string]any
	if err := json.Unmarshal(version.PerformanceMetrics, &metrics); err != nil || metrics["eval_score"] != *s.MeanReward || metrics["golden_set_hash"] != hash {
		t.Errorf("performance metrics %s (%v)", version.PerformanceMetrics, err)
	}

	// Best-of-N samples the version at the provider too.
	bon := bestofn.New(f.pool, f.judge, f.eps, f.reg, nil)
	resp, err := bon.Select(ctx, audit.System, f.org, bestofn.Request{Query: "How do I reset my password?", ModelVersionID: &v.ID, N: 3,
		Scorer: bestofn.Scorer{Rules: []scorers.Config{{Preset: "concise"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GenerationMethod != bestofn.GenerationSampled || resp.CandidatesCount != 3 || !strings.HasPrefix(resp.Response, "From the fine-tuned model: ") {
		t.Errorf("best-of-N: %+v", resp)
	}
	mu.Lock()
	sampled := seen[len(asked):]
	mu.Unlock()
	if len(sampled) != 3 {
		t.Errorf("best-of-N asked the provider %d times, want 3", len(sampled))
	}
	for _, r := range sampled {
		if r.Model != modelID || r.Authorization != "Bearer "+key || r.Temperature == nil {
			t.Errorf("best-of-N asked for %q with %q", r.Model, r.Authorization)
		}
	}
}
