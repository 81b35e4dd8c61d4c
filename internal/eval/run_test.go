package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/demo/demotest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
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

// standIn answers as two endpoints at once: the candidate model "cand"
// (which echoes the question, fails on one prompt with 500s and answers
// another with nothing) and the judge "judge-chat" (which grades by
// length, and answers one answer with prose instead of JSON). Every call
// uses 1,000 prompt and 100 completion tokens.
type standIn struct {
	mu            sync.Mutex
	fail, empty   string // prompts the candidate fails on / answers empty
	malformedFor  string // an answer the judge cannot grade
	asked, judged map[string]int
}

func (s *standIn) script(r chattest.Request) chattest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	const p, c = 1000, 100
	if r.Model == "cand" {
		q := r.Last()
		s.asked[q]++
		switch q {
		case s.fail:
			return chattest.Reply{Status: 500}
		case s.empty:
			return chattest.Reply{Content: "", PromptTokens: p, CompletionTokens: c}
		}
		return chattest.Reply{Content: "About: " + q, PromptTokens: p, CompletionTokens: c}
	}
	s.judged[r.Last()]++
	if strings.Contains(r.Last(), s.malformedFor) {
		return chattest.Reply{Content: "Looks fine to me.", PromptTokens: p, CompletionTokens: c}
	}
	return chattest.Reply{Content: `{"score": 0.75, "safety_flag": false, "critique": "Restates the question."}`, PromptTokens: p, CompletionTokens: c}
}

type fixture struct {
	pool    *pgxpool.Pool
	org     uuid.UUID
	version uuid.UUID
	svc     *eval.Service
	judge   *judge.Service
	reg     *models.Service
	eps     *endpoints.Service
	items   []eval.Item
	stand   *standIn
	server  *chattest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	out := &outbound.Client{Policy: policy, Timeout: 2 * time.Second}
	eps := endpoints.New(pool, box, out)
	eps.Attempts, eps.RetryDelay = 2, time.Millisecond
	jd := judge.New(pool, eps, nil, pricing.Dollars(10))
	gates := eval.NewGates(pool)
	reg := models.New(pool, jobs, serving.New(pool, box, out, "", ""), gates)
	svc := eval.New(pool, gates, jobs, eval.NewRuns(eps, jd, reg, reward.New(pool), rewardmodel.New(pool, reg)))
	items, err := svc.Items(ctx, seeded.OrgID, version.ID, nil)
	if err != nil || len(items) < 5 {
		t.Fatalf("%d items, %v", len(items), err)
	}
	st := &standIn{fail: items[0].Query, empty: items[1].Query, malformedFor: "About: " + items[2].Query,
		asked: map[string]int{}, judged: map[string]int{}}
	srv := chattest.New(st.script)
	t.Cleanup(srv.Close)
	for _, e := range []endpoints.NewEndpoint{
		{Name: "cand", BaseURL: srv.URL + "/v1", Model: "cand", PricePerMillionInput: 0.5, PricePerMillionOutput: 1.5},
		{Name: "deepseek", BaseURL: srv.URL + "/v1", Model: "judge-chat", APIKey: "sk-judge", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10},
	} {
		if _, err := eps.Create(ctx, audit.System, seeded.OrgID, e); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{pool: pool, org: seeded.OrgID, version: version.ID, svc: svc, judge: jd, reg: reg, eps: eps, items: items, stand: st, server: srv}
}

func (f *fixture) config() eval.Config {
	return eval.Config{GoldenSetVersionID: f.version, Candidate: eval.Candidate{Endpoint: "cand"},
		Judge:         &eval.JudgeConfig{Endpoint: "deepseek"},
		Scorers:       []scorers.Config{{Preset: "judge"}, {Preset: "reference_f1"}},
		RewardFormula: json.RawMessage(`{"judge": 0.5, "reference_f1": 0.5}`)}
}

// An evaluation against the chat stand-in: every item is scored or marked
// invalid with its reason; the judge's cost is its tokens times its price;
// a second run makes no judge call; the candidate is asked each question
// once (the failing one through its retries).
func TestEvaluationRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	admin := audit.Actor{Kind: "system", Label: "ada@demo.test"}
	run, err := f.svc.Start(ctx, admin, f.org, f.config())
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
	if got.Status != "succeeded" || got.Progress.Done != n || got.Progress.Total != n || len(got.Items) != n {
		t.Fatalf("run %s: %+v, %d items", got.Status, got.Progress, len(got.Items))
	}
	byQuery := map[string]eval.RunItem{}
	for _, it := range got.Items {
		byQuery[it.Query] = it
		if (it.Reward == nil) == (it.Invalid == "") {
			t.Errorf("item %q: reward %v, invalid %q: exactly one must be set", it.Query, it.Reward, it.Invalid)
		}
	}
	want := map[string]string{
		f.items[0].Query: "The server answered 500 Internal Server Error.",
		f.items[1].Query: "The answer had no text.",
		f.items[2].Query: "No reward: judge: The judge's answer was not usable: not a JSON object with score, safety_flag and critique.",
	}
	for q, reason := range want {
		if it := byQuery[q]; it.Invalid != reason || it.Reward != nil {
			t.Errorf("item %q: invalid %q, want %q", q, it.Invalid, reason)
		}
	}
	ok := byQuery[f.items[3].Query]
	if ok.Reward == nil || ok.Scores["judge"].Value != 0.75 || ok.Critique != "Restates the question." ||
		!strings.Contains(ok.RewardExplanation, "0.5·0.75 + 0.5·") || ok.CostUSD != 0.00065 {
		t.Errorf("a scored item: %+v", ok)
	}
	// The judge graded n−2 answers (the failed and empty ones never reached
	// it), one of them twice.
	s := got.Summary
	calls := n - 2 + 1
	if s.JudgeCalls != calls || s.Invalid != 3 || s.Formula != "R = 0.5·judge + 0.5·reference_f1" {
		t.Errorf("summary %+v, want %d judge calls", s, calls)
	}
	perCall := 1000*0.27/1e6 + 100*1.10/1e6
	if math.Abs(s.JudgeCostUSD-float64(calls)*perCall) > 1e-9 {
		t.Errorf("judge cost $%v, want %d × $%v", s.JudgeCostUSD, calls, perCall)
	}
	var logged int64
	if err := f.pool.QueryRow(ctx, `SELECT sum(cost_micros) FROM judge_calls WHERE org_id = $1`, f.org).Scan(&logged); err != nil ||
		pricing.Micros(logged).Dollars() != s.JudgeCostUSD {
		t.Errorf("usage log $%v, run $%v (%v)", pricing.Micros(logged).Dollars(), s.JudgeCostUSD, err)
	}
	if s.MeanReward == nil || len(s.CI) != 2 || s.CI[0] > *s.MeanReward || s.CI[1] < *s.MeanReward {
		t.Errorf("mean %v, interval %v", s.MeanReward, s.CI)
	}
	perQuery := map[string]int{}
	for _, it := range f.items {
		perQuery[it.Query]++
	}
	for q, k := range f.stand.asked {
		if k != perQuery[q] && q != f.items[0].Query {
			t.Errorf("candidate asked %q %d times for %d items", q, k, perQuery[q])
		}
	}
	// Again: the judge is not called.
	before := f.server.Calls()
	again, err := f.svc.Start(ctx, admin, f.org, f.config())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Advance(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	got2, err := f.svc.GetRun(ctx, f.org, again.ID)
	if err != nil || got2.Summary.JudgeCalls != 0 || got2.Summary.JudgeCostUSD != 0 || *got2.Summary.MeanReward != *s.MeanReward {
		t.Errorf("second run: %+v %v", got2.Summary, err)
	}
	// Only the candidate was asked again (n questions, the failing one
	// twice).
	if d := f.server.Calls() - before; d != n+1 {
		t.Errorf("second run made %d calls, want %d (candidate only)", d, n+1)
	}
	if _, err := f.svc.GetRun(ctx, uuid.New(), run.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation reads the run: %v", err)
	}
}

// A judge budget that runs out mid-run pauses the run with the reason;
// the items already scored stay, none is half-counted, and the run
// finishes once the budget allows, asking nothing twice.
func TestEvaluationPausesOnBudget(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// Each judge call costs $0.00038: a budget of $0.001 allows three.
	if err := f.judge.SetBudget(ctx, audit.System, f.org, pricing.Dollars(0.001)); err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Scorers = cfg.Scorers[:1]
	cfg.RewardFormula = json.RawMessage(`{"judge": 1}`)
	run, err := f.svc.Start(ctx, audit.System, f.org, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Advance(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.GetRun(ctx, f.org, run.ID)
	if err != nil || got.Status != "paused" || !strings.Contains(got.Summary.PausedReason, "judge budget for this month is spent") ||
		got.Summary.MeanReward != nil || got.Progress.Done == 0 || got.Progress.Done >= len(f.items) {
		t.Fatalf("after the budget ran out: %s %+v %+v %v", got.Status, got.Progress, got.Summary, err)
	}
	if len(got.Items) != got.Progress.Done {
		t.Errorf("%d items stored, %d counted", len(got.Items), got.Progress.Done)
	}
	if err := f.judge.SetBudget(ctx, audit.System, f.org, pricing.Dollars(10)); err != nil {
		t.Fatal(err)
	}
	// Resumed by an admin: queued again with its job, then worked.
	if err := f.svc.Resume(ctx, audit.System, uuid.New(), run.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation resumes the run: %v", err)
	}
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); err != nil {
		t.Fatal(err)
	}
	var queued int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'evaluation_run' AND args->>'run_id' = $1`, run.ID.String()).Scan(&queued); err != nil || queued != 2 {
		t.Errorf("%d jobs for the run after resuming, want 2 (%v)", queued, err)
	}
	if err := f.svc.Advance(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	var conflict *errs.Conflict
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); !errors.As(err, &conflict) {
		t.Errorf("resuming a finished run: %v", err)
	}
	got, err = f.svc.GetRun(ctx, f.org, run.ID)
	if err != nil || got.Status != "succeeded" || got.Progress.Done != len(f.items) || got.Summary.PausedReason != "" {
		t.Fatalf("resumed: %s %+v %v", got.Status, got.Progress, err)
	}
	for q, k := range f.stand.judged {
		if k > 1 && !strings.Contains(q, f.stand.malformedFor) {
			t.Errorf("judged %d times: %.60q", k, q)
		}
	}
}

// Bad configurations are refused field by field, and nothing is stored.
func TestEvaluationRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cases := []struct {
		name  string
		edit  func(*eval.Config)
		field string
	}{
		{"no candidate", func(c *eval.Config) { c.Candidate = eval.Candidate{} }, "candidate"},
		{"unknown endpoint", func(c *eval.Config) { c.Candidate.Endpoint = "nobody" }, "candidate.endpoint"},
		{"unknown judge", func(c *eval.Config) { c.Judge.Endpoint = "nobody" }, "judge.endpoint"},
		{"no judge", func(c *eval.Config) { c.Judge = nil }, "judge.endpoint"},
		{"weight not a number", func(c *eval.Config) { c.RewardFormula = json.RawMessage(`{"judge": "high"}`) }, "reward_formula.judge"},
		{"weight on no scorer", func(c *eval.Config) { c.RewardFormula = json.RawMessage(`{"chain": 1}`) }, "reward_formula.chain"},
		{"unserved version", func(c *eval.Config) { id := uuid.New(); c.Candidate = eval.Candidate{ModelVersionID: &id} }, "candidate.model_version_id"},
		{"not a version", func(c *eval.Config) { c.GoldenSetVersionID = uuid.New() }, "golden_set_version_id"},
	}
	for _, c := range cases {
		cfg := f.config()
		c.edit(&cfg)
		_, err := f.svc.Start(ctx, audit.System, f.org, cfg)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()[c.field] == "" {
			t.Errorf("%s: %v, want an error on %s", c.name, err, c.field)
		}
	}
	var runs int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM evaluation_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs stored", runs)
	}
	if f.server.Calls() != 0 {
		t.Errorf("%d calls made", f.server.Calls())
	}
}
