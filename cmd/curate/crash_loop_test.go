package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/provider/openaitest"
)

// The real binary is killed with SIGKILL while a loop's run is in its
// evaluate step, the judge holding the calls under way. Started again on
// the same database, the evaluation is queued again by the heartbeat
// sweep and goes on at its next unscored item, the run's evaluate step
// follows the same evaluation (it starts no second one), and the run
// goes on to promote within resumeWithin of the restart; the judge answered each
// golden question once, so nothing was paid for twice, and one model was
// trained.
func TestLoopSurvivesKillDuringEvaluate(t *testing.T) {
	ctx := context.Background()
	openai := openaitest.New(t)
	openai.SetChat(func(model, prompt string) string { return "The tuned answer to: " + prompt })
	w := newCrashWorld(t, "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+openai.URL(), "CURATE_FINETUNE_POLL=50ms",
		"CURATE_LOOP_CHECK_EVERY=200ms", "CURATE_LOOP_POLL=100ms")
	pool := w.pool

	// The organisation and its golden set of twelve questions, made here
	// on the shared database.
	set := goldenSet(t, pool, "acme", 12)
	w.apiKey("acme")

	// The judge answers the first answeredFirst questions, then holds
	// every call until the process that made it is gone.
	const answeredFirst = 5
	judge := newHeldJudge(t, func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.8, "safety_flag": false, "critique": "Fine."}`, PromptTokens: 1000, CompletionTokens: 100}
	}, nil)
	judge.holdAfter = answeredFirst

	w.start()
	first := w.proc
	call := func(method, path string, body any, header ...string) map[string]any {
		t.Helper()
		return w.call(method, path, body, nil, header...)
	}
	call(http.MethodPost, "/api/endpoints", map[string]any{"name": "judge", "base_url": judge.URL + "/v1", "model": "judge-chat", "api_key": "sk-judge",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10})
	call(http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"})
	loop := call(http.MethodPost, "/api/loops", map[string]any{"name": "support-weekly", "registered_model": "support",
		"trigger":  map[string]any{"min_new_items": 20, "filter": map[string]any{"status": "approved", "tag": "crash"}},
		"dataset":  map[string]any{"name": "support-training", "generate": []string{"same_query"}},
		"training": map[string]any{"provider": "openai", "method": "dpo", "base_model": "gpt-4o-mini-2024-07-18", "max_cost_usd": 20},
		"evaluation": map[string]any{"golden_set_version_id": set, "judge": map[string]any{"endpoint": "judge"},
			"reward_formula": map[string]any{"judge": 1}},
		"deploy": map[string]any{"target": "openai-prod"}, "approval": "none"})
	var items []map[string]any
	for i := range 20 {
		items = append(items, map[string]any{"query": fmt.Sprintf("How do refunds work, case %d?", i/2), "response": fmt.Sprintf("Answer %d.", i),
			"feedback_type": "rating", "rating": 5 - 4*(i%2), "tags": []string{"crash"}})
	}
	call(http.MethodPost, "/api/feedback/batch", map[string]any{"items": items})
	list := call(http.MethodGet, "/api/feedback?tag=crash&limit=100", nil)
	for _, it := range list["data"].([]any) {
		call(http.MethodPatch, "/api/feedback/"+it.(map[string]any)["id"].(string), map[string]any{"status": "approved"}, "If-Match", "1")
	}

	// The run starts by itself; it is killed in its evaluate step, once
	// the first answers are stored and judge calls are held.
	var runID, evaluation string
	for deadline := time.Now().Add(underwayWithin); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not reach its evaluation: %q, %q\n%s", runID, evaluation, first.logs())
		}
		if runID == "" {
			runs := call(http.MethodGet, "/api/loops/"+loop["id"].(string)+"/runs", nil)["data"].([]any)
			if len(runs) == 0 {
				continue
			}
			runID = runs[0].(map[string]any)["id"].(string)
		}
		run := call(http.MethodGet, "/api/loop-runs/"+runID, nil)
		if run["status"] != "running" {
			t.Fatalf("the run ended (%s: %s) before it could be killed", run["status"], run["reason"])
		}
		for _, s := range run["steps"].([]any) {
			st := s.(map[string]any)
			if st["name"] == "evaluate" {
				if id, ok := st["links"].(map[string]any)["evaluation_run_id"].(string); ok {
					evaluation = id
				}
			}
		}
		if evaluation == "" {
			continue
		}
		e := call(http.MethodGet, "/api/evaluations/"+evaluation, nil)
		if int(e["progress"].(map[string]any)["done"].(float64)) == answeredFirst && judge.held.Load() >= 1 {
			break
		}
	}
	first.kill()
	judge.release()

	restarted := w.start()
	second := w.proc
	var run map[string]any
	for {
		run = call(http.MethodGet, "/api/loop-runs/"+runID, nil)
		if run["status"] != "running" {
			break
		}
		if time.Since(restarted) > resumeWithin {
			t.Fatalf("the run is still at %s %.0fs after the restart\n%s", run["step"], time.Since(restarted).Seconds(), second.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(restarted)
	second.stop()
	if run["status"] != "succeeded" {
		t.Fatalf("the run ended %s: %s", run["status"], run["reason"])
	}
	t.Logf("the run killed in its evaluate step finished %.1fs after the restart", took.Seconds())

	// One evaluation of the version, every golden question judged once;
	// one training job.
	var evaluations, done int
	if err := pool.QueryRow(ctx, `SELECT count(*), max(done) FROM evaluation_runs WHERE candidate_version_id = $1`, run["model_version_id"]).
		Scan(&evaluations, &done); err != nil {
		t.Fatal(err)
	}
	if evaluations != 1 || done != 12 {
		t.Errorf("%d evaluations of the version, %d items scored; want one of 12", evaluations, done)
	}
	answered, repeated := judge.twice()
	if answered != 12 {
		t.Errorf("the judge answered %d questions, want 12", answered)
	}
	for _, q := range repeated {
		t.Errorf("the judge answered more than once: %.80q", q)
	}
	if openai.JobsCreated() != 1 {
		t.Errorf("%d training jobs at OpenAI", openai.JobsCreated())
	}
}

// goldenSet makes the organisation of slug and a golden set of n
// corrected questions, frozen and marked, and returns the set's version.
func goldenSet(t *testing.T, pool *pgxpool.Pool, slug string, n int) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, slug, slug)
	if err != nil {
		t.Fatal(err)
	}
	var golden []feedback.Item
	for i := range n {
		golden = append(golden, feedback.Item{Query: fmt.Sprintf("Golden question number %d?", i), Response: "Old.", FeedbackType: "correction",
			Correction: fmt.Sprintf("Curated answer %d.", i)})
	}
	res, err := feedback.New(pool).IngestBatch(ctx, org.ID, "api", golden)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE feedback SET status = 'corrected' WHERE id = ANY($1)", res.IDs); err != nil {
		t.Fatal(err)
	}
	ds := datasets.New(pool, nil, nil, nil)
	d, err := ds.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeInstructionTuning, Settings: datasets.Settings{Name: "gold"},
		Members: res.IDs})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ds.Freeze(ctx, audit.System, org.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eval.New(pool, eval.NewGates(pool), nil, nil).Mark(ctx, audit.System, org.ID, set.ID, "gold", []string{}); err != nil {
		t.Fatal(err)
	}
	return set.ID
}
