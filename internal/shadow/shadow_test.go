package shadow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/shadow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// runner stands in for the evaluation runner: its answerer and scorer
// count their calls, and can be told to stop mid-call as a killed worker
// does (the call is made, its answer never returned).
type runner struct {
	asked, scored atomic.Int32
	// contexts are the context documents each scored item carried.
	contexts  sync.Map // query → []string
	killAsk   atomic.Bool
	killScore atomic.Bool
	// kill ends the run's context, as a killed process's work ends.
	kill context.CancelFunc
}

func (r *runner) Check(_ context.Context, _ uuid.UUID, cfg eval.Config) (eval.Config, error) {
	return cfg, nil
}

func (r *runner) Prepare(context.Context, uuid.UUID, eval.Config, []eval.Item) (eval.Plan, error) {
	return eval.Plan{Answerer: answerer{r}, Scorer: scorer{r}}, nil
}

type answerer struct{ r *runner }

func (a answerer) Answer(ctx context.Context, it eval.Item) (eval.Answer, error) {
	a.r.asked.Add(1)
	if a.r.killAsk.Load() {
		a.r.kill()
		return eval.Answer{}, ctx.Err()
	}
	return eval.Answer{Text: "Candidate: " + it.Query}, nil
}

type scorer struct{ r *runner }

func (s scorer) Score(ctx context.Context, it eval.Item, answer string) (eval.Scored, error) {
	s.r.scored.Add(1)
	s.r.contexts.Store(it.Query, it.Context)
	if s.r.killScore.Load() {
		s.r.kill()
		return eval.Scored{}, ctx.Err()
	}
	x := 0.5
	if strings.HasPrefix(answer, "Candidate") {
		x = 0.8
	}
	return eval.Scored{Components: map[string]scorers.Score{"judge": {Value: x}}, Reward: &x}, nil
}

type env struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	org    uuid.UUID
	svc    *shadow.Service
	run    *runner
	shadow uuid.UUID
}

// setup shadows a candidate with three sampled queries, pending.
func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	reg := models.New(pool, nil, nil, nil)
	var cand models.Version
	for _, v := range []string{"1.0.0", "1.1.0"} {
		if cand, err = reg.Register(ctx, audit.System, org.ID, models.NewVersion{Name: "support", Version: v, ModelID: "support-" + v}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uuid.UUID
	fb := feedback.New(pool)
	for i := range 3 {
		f, _, err := fb.Ingest(ctx, org.ID, "api", feedback.Item{Query: fmt.Sprintf("Question %d?", i), Response: "Production answer.",
			Model: "support-1.0.0", FeedbackType: "thumbs_up"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	e := &env{ctx: ctx, pool: pool, org: org.ID, run: &runner{}}
	e.svc = shadow.New(pool, nil, eval.New(pool, eval.NewGates(pool), nil, e.run))
	cfg, _ := json.Marshal(eval.Config{Scorers: []scorers.Config{{Preset: "judge"}}})
	if err := pool.QueryRow(ctx, `INSERT INTO shadows (org_id, registered_model_id, alias, candidate_version_id, sample, config)
		SELECT $1, registered_model_id, 'production', id, 1, $3 FROM model_versions WHERE id = $2 RETURNING id`, org.ID, cand.ID, cfg).Scan(&e.shadow); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO shadow_queries (shadow_id, feedback_id, org_id) SELECT $1, unnest($2::uuid[]), $3`, e.shadow, ids, org.ID); err != nil {
		t.Fatal(err)
	}
	return e
}

// staleClaims ages every claim past ten minutes, as a worker that died
// leaves it.
func (e *env) staleClaims(t *testing.T) {
	t.Helper()
	if _, err := e.pool.Exec(e.ctx, `UPDATE shadow_queries SET claimed_at = now() - interval '11 minutes' WHERE claimed_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
}

func (e *env) statuses(t *testing.T) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT status || coalesce(': ' || nullif(reason, ''), ''), count(*) FROM shadow_queries GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// A worker killed while the candidate answers a query, and one killed
// while the scorers score the next, leave those queries begun: the run
// that takes them over fails them with the reason instead of asking the
// candidate or the judge again, and scores the third once. A run after
// that asks nothing.
func TestShadowRunNeverAsksTwice(t *testing.T) {
	e := setup(t)

	killable := func() context.Context {
		ctx, cancel := context.WithCancel(e.ctx)
		t.Cleanup(cancel)
		e.run.kill = cancel
		return ctx
	}
	// Killed in the candidate's call on the first query.
	e.run.killAsk.Store(true)
	if err := e.svc.Run(killable(), e.shadow); err == nil {
		t.Fatal("the killed run ended without an error")
	}
	e.run.killAsk.Store(false)
	e.staleClaims(t)
	// Killed in the scorers' call on the second query (the first is
	// failed without a call).
	e.run.killScore.Store(true)
	if err := e.svc.Run(killable(), e.shadow); err == nil {
		t.Fatal("the killed run ended without an error")
	}
	e.run.killScore.Store(false)
	if got := e.run.asked.Load(); got != 2 {
		t.Errorf("the candidate was asked %d times, want 2 (once per query begun)", got)
	}
	e.staleClaims(t)
	if err := e.svc.Run(e.ctx, e.shadow); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Run(e.ctx, e.shadow); err != nil {
		t.Fatal(err)
	}
	// The second query's candidate answer was stored before scoring: it
	// is not asked again, and the third is asked once.
	if got := e.run.asked.Load(); got != 3 {
		t.Errorf("the candidate was asked %d times, want 3: once per query", got)
	}
	// One scoring call was killed; the third query's two answers are
	// scored once each.
	if got := e.run.scored.Load(); got != 3 {
		t.Errorf("the scorers were asked %d times, want 3", got)
	}
	want := map[string]int{
		"scored": 1,
		"failed: The worker stopped while the candidate was answering and its answer was lost: a query is never sent to the candidate twice.": 1,
		"failed: The worker stopped while the answers were being scored and the scores were lost: a query is never sent to the judge twice.":  1,
	}
	got := e.statuses(t)
	if len(got) != len(want) {
		t.Fatalf("statuses %v", got)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("statuses %v, want %v", got, want)
			break
		}
	}
	d, err := e.svc.Detail(e.ctx, e.org, e.shadow, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Scored != 1 || d.Failed != 2 || d.Comparison.Difference.N != 1 || *d.Comparison.Difference.Mean < 0.3-1e-9 {
		t.Errorf("detail %+v %+v", d.Shadow, d.Comparison.Difference)
	}
}

// The RAG metrics read a query's context documents: the feedback's own,
// or those of the best-of-N call the feedback names by trace_id when it
// carries none. Both reach the scorers with the query.
func TestShadowScoresWithTheQueryContext(t *testing.T) {
	e := setup(t)
	var selection string
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO best_of_n_responses (org_id, query, context, scorer, selection, generation_method, candidates, selected, reward_score)
		VALUES ($1, 'Question 1?', '{"documents": ["From the best-of-N call."]}', '{}', 'max', 'provided', '[]', 0, 0.5) RETURNING id::text`, e.org).Scan(&selection); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE feedback SET context = '{"documents": ["From the feedback."]}' WHERE query = 'Question 0?'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE feedback SET trace_id = $1 WHERE query = 'Question 1?'`, selection); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE feedback SET trace_id = 'not-a-uuid' WHERE query = 'Question 2?'`); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Run(e.ctx, e.shadow); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"Question 0?": "From the feedback.", "Question 1?": "From the best-of-N call.", "Question 2?": ""} {
		got, _ := e.run.contexts.Load(q)
		docs, _ := got.([]string)
		if strings.Join(docs, "|") != want {
			t.Errorf("%s was scored with the documents %q, want %q", q, docs, want)
		}
	}
}

// A shadow samples the queries answered under its alias (the feedback
// naming a name the alias's version is served by), past its cursor and a
// minute behind now, at its share by the same hash on every run, once
// each; its own candidate's and other models' feedback is left out. A
// shadow past its until stops, with the reason.
func TestShadowSamplesTheAliasQueries(t *testing.T) {
	e := setup(t)
	ctx := e.ctx
	var prod, cand, model uuid.UUID
	if err := e.pool.QueryRow(ctx, `SELECT p.id, c.id, p.registered_model_id FROM model_versions p, model_versions c
		WHERE p.version = '1.0.0' AND c.version = '1.1.0'`).Scan(&prod, &cand, &model); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id) VALUES ($1, $2, 'production', $3)`,
		e.org, model, prod); err != nil {
		t.Fatal(err)
	}
	var id uuid.UUID
	if err := e.pool.QueryRow(ctx, `INSERT INTO shadows (org_id, registered_model_id, alias, candidate_version_id, sample, config, cursor_at)
		VALUES ($1, $2, 'production', $3, 0.5, '{}', now() - interval '2 hours') RETURNING id`, e.org, model, cand).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO feedback (org_id, query, response, model, feedback_type, source, content_hash, created_at)
		SELECT $1, 'q ' || i, 'a ' || i, CASE WHEN i < 200 THEN 'support-1.0.0' WHEN i < 220 THEN 'support-1.1.0' ELSE 'other' END,
		       'thumbs_up', 'api', '\x00', now() - interval '1 hour' + i * interval '1 second'
		FROM generate_series(0, 239) i`, e.org); err != nil {
		t.Fatal(err)
	}
	want := 0
	rows, err := e.pool.Query(ctx, `SELECT id FROM feedback WHERE model = 'support-1.0.0' AND query LIKE 'q %'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var f uuid.UUID
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		if shadow.Sampled(id, f, 0.5) {
			want++
		}
	}
	for range 2 {
		if err := e.svc.SampleAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got, wrong int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE f.model <> 'support-1.0.0' OR q.production_version_id <> $2)
		FROM shadow_queries q JOIN feedback f ON f.id = q.feedback_id WHERE q.shadow_id = $1`, id, prod).Scan(&got, &wrong); err != nil {
		t.Fatal(err)
	}
	// setup's three items arrived just now, within the minute's lag.
	if got != want || got < 70 || got > 130 || wrong != 0 {
		t.Errorf("%d sampled (%d of other models or versions), want %d: half of the 200 answered under production", got, wrong, want)
	}

	if _, err := e.pool.Exec(ctx, `UPDATE shadows SET until = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SampleAll(ctx); err != nil {
		t.Fatal(err)
	}
	sh, err := e.svc.Get(ctx, e.org, id)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Status != shadow.StatusStopped || !strings.HasPrefix(sh.StoppedReason, "Its time ran out at ") {
		t.Errorf("past its until: %s %q", sh.Status, sh.StoppedReason)
	}
}
