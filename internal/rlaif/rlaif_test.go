package rlaif_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rlaif"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	org   uuid.UUID
	job   uuid.UUID
	svc   *rlaif.Service
	judge *judge.Service
	srv   *chattest.Server
}

// newEnv registers the stand-in teacher as the endpoint "teacher", priced
// at $0.27 and $1.10 per million tokens, and a GRPO job to score for. The
// teacher gives 0.2 to an answer that sends the patient to 911 and 0.9 to
// any other.
func newEnv(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	eps := endpoints.New(pool, box, &outbound.Client{Policy: policy, Timeout: 2 * time.Second})
	eps.Attempts, eps.RetryDelay = 3, time.Millisecond
	srv := chattest.New(func(r chattest.Request) chattest.Reply {
		score := "0.9"
		if strings.Contains(r.Last(), "911") {
			score = "0.2"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "graded"}`, PromptTokens: 1000, CompletionTokens: 200}
	})
	t.Cleanup(srv.Close)
	if _, err := eps.Create(ctx, audit.System, org.ID, endpoints.NewEndpoint{Name: "teacher", BaseURL: srv.URL + "/v1", Model: "deepseek-chat",
		APIKey: "sk-secret", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10}); err != nil {
		t.Fatal(err)
	}
	js := judge.New(pool, eps, nil, pricing.Dollars(5))
	var job uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind,
		provider, base_model, method, export_format, status, train_examples, estimated_tokens, estimated_epochs, price_per_million,
		price_date, estimated_cost) VALUES ($1, gen_random_uuid(), 'prompts v1', 'sft', 'local', 'tiny-llama', 'grpo',
		'openai_chat', 'running', 10, 1000, 1, 0, '2025-01-01', 0) RETURNING id`, org.ID).Scan(&job); err != nil {
		t.Fatal(err)
	}
	return env{ctx: ctx, pool: pool, org: org.ID, job: job, svc: rlaif.New(pool, js, eps, reward.New(pool), nil), judge: js, srv: srv}
}

// The organisation's default formula (R = 0.35·chain + 0.25·emergency −
// 0.15·risk + 0.25·judge) scores each sample with the rule presets and the
// teacher; each sample is kept with its components, a teacher-versus-rules
// disagreement is queued as a judge conflict, the teacher's cost is
// logged per run and asked once per answer (the cache), and the steps
// read back with each component's mean.
func TestScoreWithTheOrganisationsFormula(t *testing.T) {
	e := newEnv(t)
	plan, err := e.svc.Check(e.ctx, e.org, "grpo_config.rlaif", rlaif.Config{Judge: &rlaif.JudgeConfig{Endpoint: "teacher"}, ConflictThreshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Formula.String() != reward.Default.String() {
		t.Fatalf("formula %s", plan.Formula)
	}
	// Worked by hand from the presets (a required rule scores the share of
	// its patterns found; risk is 1 when any pattern is found):
	//  0: chain 1, emergency 1 (911, immediately, gets worse), risk 0; the
	//     teacher 0.2. R = 0.35 + 0.25 + 0.25·0.2 = 0.65; the rules
	//     (0.35 + 0.25 + 0.15)/0.75 = 1 against 0.2: a conflict.
	//  1: chain 0, emergency 0, risk 1; the teacher 0.9. R = −0.15 + 0.225
	//     = 0.075; the rules 0 against 0.9: a conflict.
	//  2: chain 1, emergency 1/3 (gets worse), risk 0; the teacher 0.9.
	//     R = 0.35 + 0.25/3 + 0.225 = 0.658333…; the rules (0.35 + 0.25/3 +
	//     0.15)/0.75 = 0.777…: no conflict.
	samples := []rlaif.Sample{
		{Prompt: "I have chest pain and I am sweating", Completion: "<think>Chest pain with sweating can be a heart attack.</think> Call 911 immediately, and if the pain gets worse do not wait."},
		{Prompt: "My sugar is low", Completion: "Stop taking your insulin and rest.", RedTeam: true},
		{Prompt: "I have a mild headache", Completion: "<think>Likely tension.</think> Drink water; see a doctor if it gets worse."},
	}
	got, err := e.svc.Score(e.ctx, e.org, e.job, plan, 1, samples)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		chain, emergency, risk, teacher, reward, rules float64
		conflict                                       bool
	}{
		{1, 1, 0, 0.2, 0.65, 1, true},
		{0, 0, 1, 0.9, 0.075, 0, true},
		{1, 1.0 / 3, 0, 0.9, 0.35 + 0.25/3 + 0.225, (0.35 + 0.25/3 + 0.15) / 0.75, false},
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for i, w := range want {
		s := got[i]
		c := s.Components
		if !near(c["chain"].Value, w.chain) || !near(c["emergency"].Value, w.emergency) || !near(c["risk"].Value, w.risk) || !near(c["judge"].Value, w.teacher) {
			t.Errorf("sample %d components %+v", i, c)
		}
		if s.Reward == nil || !near(*s.Reward, w.reward) || s.Rules == nil || !near(*s.Rules, w.rules) || s.Teacher == nil ||
			!near(*s.Teacher, w.teacher) || s.Conflict != w.conflict {
			t.Errorf("sample %d: reward %v, rules %v, teacher %v, conflict %v; want %+v", i, s.Reward, s.Rules, s.Teacher, s.Conflict, w)
		}
		// 1000 × $0.27/M + 200 × $1.10/M = 490 micro-dollars a call.
		if s.TeacherCost != 490 {
			t.Errorf("sample %d cost %d", i, s.TeacherCost)
		}
	}
	conflicts := 2
	var queued int
	var human, judged float64
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*), min(human_score), max(judge_score) FROM judge_conflicts c
		JOIN rlaif_samples s ON s.id = c.rlaif_sample_id WHERE c.org_id = $1 AND s.job_id = $2 AND c.resolution IS NULL`, e.org, e.job).
		Scan(&queued, &human, &judged); err != nil || queued != conflicts || human != 0 || judged != 0.9 {
		t.Errorf("%d conflicts queued (rules from %v, teacher to %v), want 2 (%v)", queued, human, judged, err)
	}
	// The same completions again at step 2: the teacher is not asked again.
	calls := e.srv.Calls()
	again, err := e.svc.Score(e.ctx, e.org, e.job, plan, 2, samples[:2])
	if err != nil || e.srv.Calls() != calls || again[0].TeacherCost != 0 || *again[1].Reward != *got[1].Reward {
		t.Errorf("again: %+v %v; %d calls, had %d", again, err, e.srv.Calls(), calls)
	}
	// Sampled again, a conflict is not queued twice.
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM judge_conflicts WHERE org_id = $1`, e.org).Scan(&queued); err != nil || queued != 2 {
		t.Errorf("%d conflicts queued after the same samples again, want 2 (%v)", queued, err)
	}

	steps, spend, err := e.svc.Steps(e.ctx, e.org, e.job)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Step != 1 || steps[0].Samples != 3 || steps[1].Samples != 2 || steps[0].Conflicts != conflicts {
		t.Fatalf("steps %+v", steps)
	}
	wantJudge := (0.2 + 0.9 + 0.9) / 3
	wantReward := (0.65 + 0.075 + 0.35 + 0.25/3 + 0.225) / 3
	if math.Abs(steps[0].Components["judge"]-wantJudge) > 1e-9 || math.Abs(*steps[0].MeanReward-wantReward) > 1e-9 ||
		len(steps[0].Components) != 4 {
		t.Errorf("step 1 %+v, want judge %v, reward %v", steps[0], wantJudge, wantReward)
	}
	if spend.Samples != 5 || spend.TeacherCalls != 3 || spend.TeacherCost != 3*490 || spend.RedTeam != 2 || spend.Conflicts != 4 {
		t.Errorf("spend %+v", spend)
	}
	// The judge's usage log names the run.
	var logged int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM judge_calls WHERE org_id = $1 AND purpose = $2`, e.org, "training run "+e.job.String()).
		Scan(&logged); err != nil || logged != 3 {
		t.Errorf("%d judge calls logged for the run (%v)", logged, err)
	}
}

// A spent judge budget leaves the rest of the batch without a teacher
// score and so without a reward, with the reason, and asks nothing more.
func TestScoreBudgetSpent(t *testing.T) {
	e := newEnv(t)
	plan, err := e.svc.Check(e.ctx, e.org, "rlaif", rlaif.Config{Judge: &rlaif.JudgeConfig{Endpoint: "teacher"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.judge.SetBudget(e.ctx, audit.System, e.org, pricing.Micros(0)); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Score(e.ctx, e.org, e.job, plan, 0, []rlaif.Sample{{Prompt: "q", Completion: "a"}, {Prompt: "q", Completion: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if s.Reward != nil || !strings.Contains(s.Invalid, "judge budget") || s.Conflict {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	if e.srv.Calls() != 0 {
		t.Errorf("%d teacher calls past the budget", e.srv.Calls())
	}
}

// What cannot score is refused on its field, and a bad batch changes
// nothing.
func TestRefusals(t *testing.T) {
	e := newEnv(t)
	_, err := e.svc.Check(e.ctx, e.org, "grpo_config.rlaif", rlaif.Config{Judge: &rlaif.JudgeConfig{Endpoint: "nobody", Template: "nope"},
		ConflictThreshold: 2})
	for _, f := range []string{"grpo_config.rlaif.judge.endpoint", "grpo_config.rlaif.judge.template", "grpo_config.rlaif.conflict_threshold"} {
		if !hasField(err, f) {
			t.Errorf("no message on %s: %v", f, err)
		}
	}
	if _, err := e.svc.Check(e.ctx, e.org, "rlaif", rlaif.Config{}); !hasField(err, "rlaif.judge.endpoint") {
		t.Errorf("the default formula weighs the teacher, and no endpoint was named: %v", err)
	}
	rules, err := e.svc.Check(e.ctx, e.org, "rlaif", rlaif.Config{RewardFormula: json.RawMessage(`{"chain": 1, "risk": -0.5}`)})
	if err != nil {
		t.Fatalf("a formula of rules alone needs no teacher: %v", err)
	}
	_, err = e.svc.Score(e.ctx, e.org, e.job, rules, -1, []rlaif.Sample{{Prompt: "", Completion: "x"}})
	if !hasField(err, "step") || !hasField(err, "samples[0].prompt") {
		t.Errorf("bad batch: %v", err)
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM rlaif_samples").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d samples kept from a refused batch", n)
	}
}

func hasField(err error, field string) bool {
	inv, ok := err.(*errs.Invalid)
	if !ok {
		return false
	}
	_, has := inv.ByField()[field]
	return has
}
