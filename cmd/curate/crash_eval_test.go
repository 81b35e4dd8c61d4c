package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/internal/demo/demotest"
)

// The real binary is killed with SIGKILL in the middle of an evaluation,
// while four judge calls are under way (the judge stand-in holds them).
// The run stays "running"; once the binary is started again on the same
// database, the heartbeat sweep queues the run's job again and it
// finishes within resumeWithin of the restart, going on at the next
// unscored item: every
// item is scored, and the judge answered each question once, so nothing
// is paid for twice (the calls the killed process had under way were
// never answered). Their reservations are left holding money until they
// expire, ten minutes on.
func TestEvaluationSurvivesKill(t *testing.T) {
	ctx := context.Background()
	w := newCrashWorld(t)
	pool := w.pool
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	set, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	key := w.apiKey(demo.OrgSlug)

	// The candidate answers at once. The judge answers the first
	// answeredFirst questions, then holds every call until the process
	// that made it is gone; once released it answers again.
	const answeredFirst = 8
	stand := newHeldJudge(t, func(r chattest.Request) chattest.Reply {
		if r.Model == "cand" {
			return chattest.Reply{Content: "About: " + r.Last(), PromptTokens: 100, CompletionTokens: 20}
		}
		return chattest.Reply{Content: `{"score": 0.7, "safety_flag": false, "critique": "Fine."}`, PromptTokens: 1000, CompletionTokens: 100}
	}, func(r chattest.Request) bool { return r.Model == "cand" })
	stand.holdAfter = answeredFirst

	w.start()
	first := w.proc
	api := &apiClient{t: t, key: key, base: first.url}
	post := w.post
	post("/api/endpoints", map[string]any{"name": "cand", "base_url": stand.URL + "/v1", "model": "cand"})
	post("/api/endpoints", map[string]any{"name": "deepseek", "base_url": stand.URL + "/v1", "model": "judge-chat", "api_key": "sk-judge",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10})
	run := post("/api/evaluations", map[string]any{"golden_set_version_id": set.ID, "candidate": map[string]any{"endpoint": "cand"},
		"judge": map[string]any{"endpoint": "deepseek"}, "scorers": []string{"judge"}, "reward_formula": map[string]any{"judge": 1}})
	runID := run["id"].(string)
	type progress struct {
		Status   string `json:"status"`
		Progress struct {
			Done  int `json:"done"`
			Total int `json:"total"`
		} `json:"progress"`
		Summary struct {
			Invalid      int     `json:"invalid"`
			JudgeCalls   int     `json:"judge_calls"`
			JudgeCostUSD float64 `json:"judge_cost_usd"`
		} `json:"summary"`
	}
	get := func() progress {
		t.Helper()
		resp := api.do(http.MethodGet, "/api/evaluations/"+runID, nil)
		defer resp.Body.Close()
		var p progress
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("evaluation %s: %d %v", runID, resp.StatusCode, err)
		}
		return p
	}

	// Killed once the first answers are stored and four judge calls are
	// under way.
	for deadline := time.Now().Add(underwayWithin); ; time.Sleep(50 * time.Millisecond) {
		p := get()
		if p.Status == "succeeded" || p.Status == "failed" || p.Status == "paused" {
			t.Fatalf("the evaluation ended (%s) before it could be killed", p.Status)
		}
		if p.Progress.Done == answeredFirst && stand.held.Load() >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the evaluation did not get under way: %+v, %d judge calls held\n%s", p, stand.held.Load(), first.logs())
		}
	}
	first.kill()
	var status string
	if err := pool.QueryRow(ctx, "SELECT status::text FROM evaluation_runs WHERE id = $1", runID).Scan(&status); err != nil || status != "running" {
		t.Fatalf("after the kill the evaluation is %q (%v), want running", status, err)
	}
	stand.release()

	restarted := w.start()
	second := w.proc
	api.base = second.url
	var p progress
	for {
		p = get()
		if p.Status != "queued" && p.Status != "running" {
			break
		}
		if time.Since(restarted) > resumeWithin {
			t.Fatalf("the killed evaluation is still %s (%d of %d) %.0fs after the restart\n%s", p.Status, p.Progress.Done, p.Progress.Total,
				time.Since(restarted).Seconds(), second.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(restarted)
	second.stop()
	if p.Status != "succeeded" || p.Progress.Done != p.Progress.Total || p.Summary.Invalid != 0 {
		t.Fatalf("the killed evaluation ended %s, %d of %d scored, %d invalid", p.Status, p.Progress.Done, p.Progress.Total, p.Summary.Invalid)
	}
	var rescued string
	var retried time.Time
	if err := pool.QueryRow(ctx, `SELECT errors[1]->>'error', attempted_at FROM river_job WHERE kind = 'evaluation_run' AND args->>'run_id' = $1`,
		runID).Scan(&rescued, &retried); err != nil || !strings.Contains(rescued, "heartbeats") {
		t.Errorf("the killed attempt's recorded error: %q (%v), want the heartbeat sweep's", rescued, err)
	}
	t.Logf("the killed evaluation of %d items finished %.1fs after the restart: retried after %.1fs",
		p.Progress.Total, took.Seconds(), retried.Sub(restarted).Seconds())

	// No second charge: the judge answered each question once, and the
	// run counts and the usage log hold those answers and no others.
	answered, repeated := stand.twice()
	for _, q := range repeated {
		t.Errorf("the judge answered more than once: %.80q", q)
	}
	var logged int
	var cost int64
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost_micros), 0) FROM judge_calls WHERE outcome = 'ok'`).Scan(&logged, &cost); err != nil {
		t.Fatal(err)
	}
	if logged != answered || p.Summary.JudgeCalls != answered || fmt.Sprintf("%.6f", p.Summary.JudgeCostUSD) != fmt.Sprintf("%.6f", float64(cost)/1e6) {
		t.Errorf("%d questions answered by the judge; %d calls logged ($%.6f), the run counts %d ($%.6f)",
			answered, logged, float64(cost)/1e6, p.Summary.JudgeCalls, p.Summary.JudgeCostUSD)
	}
	// The four calls the killed process had under way still hold their
	// reservations, which expire (and are given back) within ten minutes.
	var open int
	var reserved, heldMicros, expirySeconds int64
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(micros), 0), coalesce(extract(epoch FROM max(expires_at) - now()), 0)::bigint
		FROM judge_reservations`).Scan(&open, &heldMicros, &expirySeconds); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(reserved_micros), 0) FROM judge_spending`).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if open != 4 || reserved != heldMicros || expirySeconds <= 0 || expirySeconds > 600 {
		t.Errorf("%d reservations left holding %d micros (the month says %d), expiring in %ds", open, heldMicros, reserved, expirySeconds)
	}
}
