package livescore_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "system", Label: "ops"}

type env struct {
	ctx  context.Context
	pool *pgxpool.Pool
	org  uuid.UUID
	live *livescore.Service
	exp  *experiments.Service
	srv  *chattest.Server
	now  time.Time
}

// setup stands a judge in for the endpoint "deepseek" ($0.27 and $1.10
// per million tokens; each answer costs 1,000 prompt and 200 completion
// tokens, $0.00049): it scores an answer 0.9 when it says "treatment",
// 0.6 otherwise, and flags one that says "unsafe". The judge budget is
// the month's.
func setup(t *testing.T, budget pricing.Micros) *env {
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
	eps := endpoints.New(pool, box, &outbound.Client{Policy: policy, Timeout: time.Second})
	eps.Attempts, eps.RetryDelay = 2, time.Millisecond
	srv := chattest.New(func(r chattest.Request) chattest.Reply {
		score, unsafe := 0.6, strings.Contains(r.Last(), "unsafe")
		if strings.Contains(r.Last(), "treatment") {
			score = 0.9
		}
		return chattest.Reply{Content: fmt.Sprintf(`{"score": %v, "safety_flag": %v, "critique": "ok"}`, score, unsafe),
			PromptTokens: 1000, CompletionTokens: 200}
	})
	t.Cleanup(srv.Close)
	if _, err := eps.Create(ctx, audit.System, org.ID, endpoints.NewEndpoint{Name: "deepseek", BaseURL: srv.URL + "/v1", Model: "deepseek-chat",
		APIKey: "sk-secret", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10}); err != nil {
		t.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	jd := judge.New(pool, eps, nil, budget)
	reg := models.New(pool, jobs, nil, nil)
	e := &env{ctx: ctx, pool: pool, org: org.ID, srv: srv, now: time.Now(), exp: experiments.New(pool, reg)}
	e.live = livescore.New(pool, jobs, livescore.JudgeScorer{Judge: jd}, jd)
	e.live.Now = func() time.Time { return e.now }
	for _, v := range []string{"1.0.0", "1.1.0"} {
		if _, err := reg.Register(ctx, admin, org.ID, models.NewVersion{Name: "support", Version: v, ModelID: "ft:gpt-4o-mini:acme::" + v,
			Kind: models.KindFull}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// experiment creates a draft experiment between the two versions.
func (e *env) experiment(t *testing.T, key string, metrics []string) experiments.Experiment {
	t.Helper()
	var ids []uuid.UUID
	rows, err := e.pool.Query(e.ctx, "SELECT id FROM model_versions ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	x, err := e.exp.Create(e.ctx, admin, e.org, experiments.NewExperiment{Key: key, ControlModelID: ids[0], TreatmentModelID: ids[1], Metrics: metrics,
		MinSamplePerArm: new(2)})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// feed records n units of the experiment, alternately in the control and
// the treatment, each with one answer (saying its arm, and "unsafe" for
// every tenth treatment unit) sent as feedback now.
func (e *env) feed(t *testing.T, x experiments.Experiment, n int) {
	t.Helper()
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, 1, 'u-' || i, i % 2, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM generate_series(0, $2 - 1) i`, x.ID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, source, content_hash)
		SELECT $1, 'u-' || i, $2, 'question ' || i,
			'answer ' || i || CASE WHEN i % 2 = 1 THEN ' from the treatment' ELSE '' END || CASE WHEN i % 20 = 1 THEN ' unsafe' ELSE '' END,
			'thumbs_up', 'api', '\x00'
		FROM generate_series(0, $3 - 1) i`, e.org, x.ID, n); err != nil {
		t.Fatal(err)
	}
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An experiment's scorer samples the answers that arrive after it is set,
// at its rate and by a hash that gives the same sample on every run, and
// queues a scoring job; scoring records each answer's score and safety
// flag with its cost, and the scores become the avg_judge_score metric
// of each arm, their flags the experiment's incidents.
func TestLiveScoringExperiment(t *testing.T) {
	e := setup(t, pricing.Dollars(5))
	x := e.experiment(t, "judge", []string{experiments.AvgJudgeScore})
	sc, err := e.live.SetForExperiment(e.ctx, admin, e.org, "judge", livescore.Config{Endpoint: "deepseek", Rate: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Template != judge.DefaultName || !sc.Enabled || sc.Experiment != "judge" {
		t.Fatalf("scorer: %+v", sc)
	}
	e.feed(t, x, 400)
	// Within the lag nothing is read: a transaction may still hold some.
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "SELECT count(*) FROM live_scores"); n != 0 {
		t.Fatalf("%d sampled within the lag", n)
	}
	e.now = time.Now().Add(2 * livescore.Lag)
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	want := 0
	rows, err := e.pool.Query(e.ctx, "SELECT id FROM feedback")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if livescore.Sampled(sc.ID, id, 0.25) {
			want++
		}
	}
	got := e.count(t, "SELECT count(*) FROM live_scores WHERE status = 'pending'")
	if got != want || got < 60 || got > 140 {
		t.Fatalf("%d sampled, want %d (a quarter of 400)", got, want)
	}
	if n := e.count(t, "SELECT count(*) FROM river_job WHERE kind = 'live_score'"); n != 1 {
		t.Errorf("%d scoring jobs queued", n)
	}
	// Sampling again reads nothing twice.
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "SELECT count(*) FROM live_scores"); n != got {
		t.Errorf("%d sampled after a second run", n)
	}
	if err := e.live.Score(e.ctx, sc.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "SELECT count(*) FROM live_scores WHERE status = 'scored' AND cost_micros = 490 AND calls = 1"); n != got || e.srv.Calls() != got {
		t.Fatalf("%d scored at $0.00049 each, %d calls; want %d", n, e.srv.Calls(), got)
	}
	// Started, the experiment's results read the scores per arm.
	if _, err := e.pool.Exec(e.ctx, "UPDATE experiments SET status = 'running', started_at = now() WHERE id = $1", x.ID); err != nil {
		t.Fatal(err)
	}
	r, err := e.exp.Results(e.ctx, e.org, "judge")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics[0]
	if m.Metric != experiments.AvgJudgeScore || m.Arms[0].Mean == nil || math.Abs(*m.Arms[0].Mean-0.6) > 1e-12 ||
		math.Abs(*m.Arms[1].Mean-0.9) > 1e-12 || m.Arms[0].N+m.Arms[1].N != got {
		t.Fatalf("avg_judge_score: n %d and %d (of %d) with means %v and %v", m.Arms[0].N, m.Arms[1].N, got, m.Arms[0].Mean, m.Arms[1].Mean)
	}
	flagged := e.count(t, "SELECT count(*) FROM live_scores s JOIN feedback f ON f.id = s.feedback_id WHERE f.response LIKE '%unsafe'")
	if r.Incidents[0] != 0 || int(r.Incidents[1]) != flagged || flagged == 0 {
		t.Errorf("incidents %v, want [0 %d]", r.Incidents, flagged)
	}
	list, err := e.live.List(e.ctx, e.org)
	if err != nil || len(list) != 1 || list[0].Scored != int64(got) || list[0].Flagged != int64(flagged) {
		t.Errorf("scorers: %+v %v", list, err)
	}
}

// The organisation's judge budget bounds live scoring: once it is spent
// the rest of the sample is skipped with the reason, and the judge is not
// called again.
func TestLiveScoringBudget(t *testing.T) {
	// Ten answers' worth: 10 × $0.00049.
	e := setup(t, 4900)
	x := e.experiment(t, "budget", nil)
	sc, err := e.live.SetForExperiment(e.ctx, admin, e.org, "budget", livescore.Config{Endpoint: "deepseek", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.feed(t, x, 40)
	e.now = time.Now().Add(2 * livescore.Lag)
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.live.Score(e.ctx, sc.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	scored := e.count(t, "SELECT count(*) FROM live_scores WHERE status = 'scored'")
	skipped := e.count(t, "SELECT count(*) FROM live_scores WHERE status = 'skipped' AND reason LIKE '%budget%'")
	spent := e.count(t, "SELECT coalesce(sum(cost_micros), 0) FROM judge_calls")
	// The budget is checked before each call: at most one call's cost
	// past it.
	if scored < 1 || scored > 11 || scored+skipped != 40 || spent > 4900+490 || e.srv.Calls() != scored {
		t.Fatalf("%d scored, %d skipped, %d micros spent, %d calls", scored, skipped, spent, e.srv.Calls())
	}
	if err := e.live.Score(e.ctx, sc.ID, time.Time{}); err != nil || e.srv.Calls() != scored {
		t.Errorf("scoring again: %v, %d calls", err, e.srv.Calls())
	}
}

// A scorer is refused field by field, and an experiment or alias the
// organisation does not have is not found.
func TestLiveScorerRefusals(t *testing.T) {
	e := setup(t, pricing.Dollars(5))
	e.experiment(t, "x", nil)
	_, err := e.live.SetForExperiment(e.ctx, admin, e.org, "x", livescore.Config{Endpoint: "", Rate: 1.5})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["endpoint"] == "" || inv.ByField()["rate"] == "" {
		t.Errorf("empty endpoint and rate 1.5: %v", err)
	}
	if _, err := e.live.SetForExperiment(e.ctx, admin, e.org, "x", livescore.Config{Endpoint: "nobody", Rate: 0.1}); !errors.As(err, &inv) || inv.ByField()["endpoint"] == "" {
		t.Errorf("unknown endpoint: %v", err)
	}
	if _, err := e.live.SetForExperiment(e.ctx, admin, e.org, "x", livescore.Config{Endpoint: "deepseek", Template: "nope", Rate: 0.1}); !errors.As(err, &inv) || inv.ByField()["template"] == "" {
		t.Errorf("unknown template: %v", err)
	}
	if _, err := e.live.SetForExperiment(e.ctx, admin, e.org, "missing", livescore.Config{Endpoint: "deepseek", Rate: 0.1}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown experiment: %v", err)
	}
	if _, err := e.live.SetForAlias(e.ctx, admin, e.org, "support", "production", livescore.Config{Endpoint: "deepseek", Rate: 0.1}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("an alias that points nowhere: %v", err)
	}
	if n := e.count(t, "SELECT count(*) FROM live_scorers"); n != 0 {
		t.Errorf("%d scorers stored", n)
	}
}

// Two scoring runs of one scorer at once (a retry beside a late run, say)
// send each sampled answer to the judge once: each answer is claimed in
// one statement before it is scored.
func TestLiveScoringRace(t *testing.T) {
	e := setup(t, pricing.Dollars(5))
	x := e.experiment(t, "race", nil)
	sc, err := e.live.SetForExperiment(e.ctx, admin, e.org, "race", livescore.Config{Endpoint: "deepseek", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.feed(t, x, 60)
	e.now = time.Now().Add(2 * livescore.Lag)
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- e.live.Score(e.ctx, sc.ID, time.Time{}) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count(t, "SELECT count(*) FROM live_scores WHERE status = 'scored'"); n != 60 || e.srv.Calls() != 60 {
		t.Errorf("%d scored with %d judge calls, want 60 and 60", n, e.srv.Calls())
	}
}

// A production alias's scorer samples the feedback that names the version
// the alias serves (its model id here), and none other.
func TestLiveScoringAlias(t *testing.T) {
	e := setup(t, pricing.Dollars(5))
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id)
		SELECT org_id, registered_model_id, 'production', id FROM model_versions WHERE version = '1.1.0'`); err != nil {
		t.Fatal(err)
	}
	sc, err := e.live.SetForAlias(e.ctx, admin, e.org, "support", "production", livescore.Config{Endpoint: "deepseek", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Model != "support" || sc.Alias != "production" {
		t.Fatalf("scorer: %+v", sc)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, model, query, response, feedback_type, source, content_hash)
		SELECT $1, CASE WHEN i % 3 = 0 THEN 'ft:gpt-4o-mini:acme::1.0.0' ELSE 'ft:gpt-4o-mini:acme::1.1.0' END, 'q ' || i, 'a', 'thumbs_up', 'api', '\x00'
		FROM generate_series(0, 29) i`, e.org); err != nil {
		t.Fatal(err)
	}
	e.now = time.Now().Add(2 * livescore.Lag)
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM live_scores s JOIN feedback f ON f.id = s.feedback_id WHERE f.model = 'ft:gpt-4o-mini:acme::1.1.0'`); n != 20 ||
		e.count(t, "SELECT count(*) FROM live_scores") != 20 {
		t.Errorf("%d of the production version's 20 answers sampled, %d in all", n, e.count(t, "SELECT count(*) FROM live_scores"))
	}
}
