package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/scorers"
)

// An evaluation scored by RAG metrics: every answered item gets the
// faithfulness the judge's verdicts give (one of two claims supported:
// 0.5), context recall where the item has a reference answer and the
// reason where it has none, and the judge's calls count in the run's
// summary.
func TestEvaluationRAGMetrics(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.pool.Exec(ctx, `UPDATE feedback SET context = jsonb_set(coalesce(context, '{}'), '{documents}',
		'["Hold the reset button on the back of the router for ten seconds."]') WHERE org_id = $1`, f.org); err != nil {
		t.Fatal(err)
	}
	f.server.Script = func(r chattest.Request) chattest.Reply {
		if r.Model == "cand" {
			return f.stand.script(r)
		}
		p := r.Last()
		switch {
		case !strings.Contains(p, "Hold the reset button") && !strings.Contains(p, "Split the answer"):
			t.Errorf("a verdict asked without the context documents: %q", p)
		}
		switch {
		case strings.Contains(p, "Split the answer"):
			return chattest.Reply{Content: `{"statements": ["The router has a reset button.", "The reset takes a minute."]}`}
		case strings.Contains(p, "For each numbered claim"):
			return chattest.Reply{Content: `{"statements": [{"statement": "The router has a reset button.", "reason": "", "verdict": 1},
				{"statement": "The reset takes a minute.", "reason": "ten seconds", "verdict": 0}]}`}
		case strings.Contains(p, "Split the reference answer"):
			return chattest.Reply{Content: `{"statements": [{"statement": "Reset it.", "reason": "", "verdict": 1}]}`}
		}
		t.Errorf("unexpected judge prompt %q", p)
		return chattest.Reply{Status: 500}
	}
	cfg := f.config()
	cfg.Scorers = []scorers.Config{{Preset: scorers.RAGFaithfulness}, {Preset: scorers.RAGContextRecall}}
	cfg.RewardFormula = json.RawMessage(`{"faithfulness": 1, "context_recall": 0}`)
	run, err := f.svc.Start(ctx, audit.System, f.org, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Advance(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.GetRun(ctx, f.org, run.ID)
	if err != nil || got.Status != "succeeded" {
		t.Fatalf("run %s %v", got.Status, err)
	}
	scored, calls := 0, 0
	for _, it := range got.Items {
		if it.Answer == "" {
			continue // the candidate failed on it
		}
		scored++
		calls += 2
		if s := it.Scores[scorers.RAGFaithfulness]; !s.Valid() || s.Value != 0.5 || !strings.Contains(s.Explanation, "1 of 2 claims") {
			t.Errorf("item %q: faithfulness %+v", it.Query, s)
		}
		recall := it.Scores[scorers.RAGContextRecall]
		switch {
		case it.Reference == "" && (recall.Valid() || !strings.Contains(recall.Invalid, "needs a reference answer")):
			t.Errorf("item %q without a reference: context recall %+v", it.Query, recall)
		case it.Reference != "" && (!recall.Valid() || recall.Value != 1):
			t.Errorf("item %q: context recall %+v", it.Query, recall)
		}
		if it.Reference != "" {
			calls++
		}
	}
	if scored == 0 || got.Summary.JudgeCalls != calls {
		t.Fatalf("%d items scored, %d judge calls in the summary, want %d", scored, got.Summary.JudgeCalls, calls)
	}
}

// A RAG metric needs the judge's endpoint, and answer relevancy an
// embeddings endpoint too: refused by field when either is missing.
func TestEvaluationRAGNeedsEndpoints(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cfg := f.config()
	cfg.Judge = nil
	cfg.Scorers = []scorers.Config{{Preset: scorers.RAGAnswerRelevancy}}
	cfg.RewardFormula = json.RawMessage(`{"answer_relevancy": 1}`)
	_, err := f.svc.Start(ctx, audit.System, f.org, cfg)
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["judge.endpoint"] == "" || inv.ByField()["judge.embeddings_endpoint"] == "" {
		t.Fatalf("no judge and no embeddings endpoint: %v", err)
	}
	cfg.Judge = &eval.JudgeConfig{Endpoint: "deepseek", Embeddings: "nowhere"}
	_, err = f.svc.Start(ctx, audit.System, f.org, cfg)
	if !errors.As(err, &inv) || !strings.Contains(inv.ByField()["judge.embeddings_endpoint"], `no endpoint is named "nowhere"`) {
		t.Fatalf("an unknown embeddings endpoint: %v", err)
	}
}
