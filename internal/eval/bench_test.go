package eval_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/serving"
)

// The evaluation benchmark's shape: the 500 items, 16 at once,
// against a candidate and a judge that each answer in 200 ms.
const (
	benchItems       = 500
	benchConcurrency = 16
	benchLatency     = 200 * time.Millisecond
)

// BenchmarkEvaluationRun runs an evaluation of 500 items at concurrency 16
// (the candidate endpoint's setting) with the judge scorer, against two
// chat stand-ins answering every request in 200 ms: the candidate, and
// the judge. Each item asks the candidate and then the judge, so the
// issue's 500 / 16 × 0.2 s becomes 500 / 16 × (0.2 s + 0.2 s) = 12.5 s
// with the judge's calls included (whole waves of 16 would take 12.8 s);
// the goal is at most 10% over 12.5 s. Beside it, in alternating rounds, its floor is measured:
// 16 goroutines asking the same two stand-ins through the same chat
// client the same 500 times and nothing else (no database, no budget
// reservation, no judge log, no stored items). The run is the product's
// whole path: Start, then Advance as the evaluation_run job calls it,
// judge budget reservations and the judge's cache and call log included.
func BenchmarkEvaluationRun(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "bench", "Bench")
	if err != nil {
		b.Fatal(err)
	}
	ds := datasets.New(pool, nil, nil, nil)
	rows := make([][]any, 0, benchItems)
	for i := range benchItems {
		query := fmt.Sprintf("How do I rotate the API key of project %d without downtime?", i)
		prompt, _ := json.Marshal([]export.Message{{Role: "user", Content: query}})
		chosen := fmt.Sprintf("Create a second key for project %d, deploy it, then revoke the first from Settings > Keys.", i)
		rejected := "Restart everything."
		sum := sha256.Sum256([]byte(chosen + rejected))
		rows = append(rows, []any{org.ID, prompt, query, chosen, rejected, "manual", sum[:]})
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"preference_pairs"},
		[]string{"org_id", "prompt", "query", "chosen_response", "rejected_response", "method", "content_hash"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	d, err := ds.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeDPO, Settings: datasets.Settings{Name: "golden", SplitSeed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO training_dataset_members (dataset_id, org_id, pair_id) SELECT $1, org_id, id FROM preference_pairs WHERE org_id = $2`, d.ID, org.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		b.Fatal(err)
	}
	version, err := ds.Freeze(ctx, audit.System, org.ID, d.ID)
	if err != nil {
		b.Fatal(err)
	}

	slow := func(content string) *chattest.Server {
		s := chattest.New(func(chattest.Request) chattest.Reply {
			time.Sleep(benchLatency)
			return chattest.Reply{Content: content, PromptTokens: 200, CompletionTokens: 40}
		})
		b.Cleanup(s.Close)
		return s
	}
	candidate := slow("Create a second key, deploy it, then revoke the first.")
	judgeSrv := slow(`{"score": 0.8, "safety_flag": false, "critique": "Right steps, terse."}`)

	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		b.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	out := &outbound.Client{Policy: policy, Timeout: 10 * time.Second}
	eps := endpoints.New(pool, box, out)
	jd := judge.New(pool, eps, nil, pricing.Dollars(1000))
	gates := eval.NewGates(pool)
	reg := models.New(pool, jobs, serving.New(pool, box, out, "", ""), gates)
	svc := eval.New(pool, gates, jobs, eval.NewRuns(eps, jd, reg, reward.New(pool), rewardmodel.New(pool, reg)))
	conc := benchConcurrency
	for _, e := range []endpoints.NewEndpoint{
		{Name: "cand", BaseURL: candidate.URL + "/v1", Model: "cand", PricePerMillionInput: 0.5, PricePerMillionOutput: 1.5, Concurrency: &conc},
		{Name: "judge", BaseURL: judgeSrv.URL + "/v1", Model: "judge-chat", APIKey: "sk-judge", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10},
	} {
		if _, err := eps.Create(ctx, audit.System, org.ID, e); err != nil {
			b.Fatal(err)
		}
	}
	items, err := svc.Items(ctx, org.ID, version.ID, nil)
	if err != nil || len(items) != benchItems {
		b.Fatalf("%d items, %v", len(items), err)
	}

	// The floor: the same calls through the same client, nothing else.
	candClient, judgeClient := eps.ChatClient(candidate.URL+"/v1", ""), eps.ChatClient(judgeSrv.URL+"/v1", "sk-judge")
	floor := func(round int) time.Duration {
		start := time.Now()
		next := make(chan eval.Item)
		var wg sync.WaitGroup
		for range benchConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := range next {
					temp := 0.0
					a, err := candClient.Complete(ctx, chat.Request{Model: "cand", Temperature: &temp, MaxTokens: 1024,
						Messages: []chat.Message{{Role: "user", Content: it.Query}}})
					if err != nil {
						panic(err)
					}
					// Each round judges anew, as each run does (the run's
					// judge cache is keyed by the answer; see below).
					if _, err := judgeClient.Complete(ctx, chat.Request{Model: "judge-chat", Temperature: &temp, MaxTokens: 1024, JSON: true,
						Messages: []chat.Message{{Role: "user", Content: fmt.Sprintf("round %d: %s\n%s", round, it.Query, a.Content)}}}); err != nil {
						panic(err)
					}
				}
			}()
		}
		for _, it := range items {
			next <- it
		}
		close(next)
		wg.Wait()
		return time.Since(start)
	}
	cfg := eval.Config{GoldenSetVersionID: version.ID, Candidate: eval.Candidate{Endpoint: "cand"},
		Judge:         &eval.JudgeConfig{Endpoint: "judge"},
		Scorers:       []scorers.Config{{Preset: "judge"}, {Preset: "reference_f1"}},
		RewardFormula: json.RawMessage(`{"judge": 0.5, "reference_f1": 0.5}`)}
	run := func() time.Duration {
		// The judge's cache would answer a second run's identical answers
		// without a call: each run starts without it, as a run of a new
		// candidate would.
		if _, err := pool.Exec(ctx, "DELETE FROM judge_cache"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		r, err := svc.Start(ctx, audit.System, org.ID, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.Advance(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		got, err := svc.GetRun(ctx, org.ID, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		if got.Status != "succeeded" || got.Progress.Done != benchItems || got.Summary.JudgeCalls != benchItems || got.Summary.Invalid != 0 {
			b.Fatalf("run %s: %+v, %d judge calls, %d invalid", got.Status, got.Progress, got.Summary.JudgeCalls, got.Summary.Invalid)
		}
		return took
	}
	rounds := max(b.N, 3)
	var runs, floors []float64
	b.ResetTimer()
	for i := range rounds {
		runs = append(runs, run().Seconds())
		floors = append(floors, floor(i).Seconds())
	}
	b.StopTimer()
	ideal := float64(benchItems) / benchConcurrency * 2 * benchLatency.Seconds()
	r, f := median(runs), median(floors)
	b.ReportMetric(r, "run_s")
	b.ReportMetric(f, "floor_s")
	b.ReportMetric(ideal, "ideal_s")
	b.ReportMetric(100*(r/ideal-1), "run_%_over_ideal")
	b.ReportMetric(100*(r/f-1), "run_%_over_floor")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
