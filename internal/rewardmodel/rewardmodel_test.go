package rewardmodel_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "system", Label: "test"}

// bangs is the stand-in reward model: its logit is the number of "!" in
// the answer less one, so "ok!!!" scores 2.
func bangs(conv []vllmtest.Message) float64 {
	return float64(strings.Count(conv[len(conv)-1].Content, "!")) - 1
}

// logistic is 1/(1+e^-x), written out here and not taken from the
// package under test.
func logistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

type env struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	org     uuid.UUID
	models  *models.Service
	svc     *rewardmodel.Service
	pooling *vllmtest.Pooling
}

// newEnv registers a reward model served by a pooling stand-in with an
// API key, deployed under "production".
func newEnv(t testing.TB, tokenLevel bool) env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := outbound.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	srv := serving.New(pool, box, &outbound.Client{Policy: policy}, "", "")
	srv.Attempts, srv.RetryDelay = 3, time.Millisecond
	reg := models.New(pool, jobs, srv, nil)
	p := vllmtest.NewPooling(t, "support-rm", "/runs/7f3a/final", bangs)
	p.SetTokenLevel(tokenLevel)
	if _, err := srv.Create(ctx, admin, org.ID, serving.NewTarget{Name: "rm-1", Kind: serving.KindVLLMPooling, BaseURL: p.URL, APIKey: "sk-rm"}); err != nil {
		t.Fatal(err)
	}
	e := env{ctx: ctx, pool: pool, org: org.ID, models: reg, svc: rewardmodel.New(pool, reg), pooling: p}
	v := e.register(t, "/runs/7f3a/final")
	e.deploy(t, v, "production")
	return e
}

func (e env) register(t testing.TB, path string) uuid.UUID {
	t.Helper()
	v, err := e.models.Register(e.ctx, admin, e.org, models.NewVersion{Name: "support-rm", ModelID: path, Kind: models.KindReward})
	if err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func (e env) deploy(t testing.TB, id uuid.UUID, alias string) {
	t.Helper()
	d, err := e.models.Deploy(e.ctx, admin, e.org, id, models.DeployRequest{Alias: alias, Target: "rm-1", Reason: "scores best-of-N"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.models.Advance(e.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
}

func (e env) resolve(t testing.TB) models.ScoringModel {
	t.Helper()
	m, err := e.svc.Resolve(e.ctx, e.org, rewardmodel.Ref{Name: "support-rm", Alias: "production"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func inputs(answers ...string) []scorers.Input {
	out := make([]scorers.Input, len(answers))
	for i, a := range answers {
		out[i] = scorers.Input{Query: "My router blinks red", Context: []string{"Red means no line signal."}, Answer: a}
	}
	return out
}

// A batch is sent at once, one chat request per distinct answer, through
// the classification API with the model's own output asked for; scores
// are the logistic of the logits, cached by version and conversation.
func TestScoreBatchedAndCached(t *testing.T) {
	e := newEnv(t, false)
	// Each request takes long enough that requests sent one after the
	// other could not overlap.
	e.pooling.SetDelay(300 * time.Millisecond)
	m := e.resolve(t)
	got, err := e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Check the cable!", "Reboot it!!!", "ok", "Reboot it!!!", "Call us!!"))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 2, -1, 2, 1} // logits: "!" count less one
	for i, s := range got {
		if s.Invalid != "" || s.Raw != want[i] || math.Abs(s.Value-logistic(want[i])) > 1e-12 {
			t.Errorf("answer %d: %+v; want raw %v, value %v", i, s, want[i], logistic(want[i]))
		}
	}
	if got[0].Cached || got[1].Cached || !got[3].Cached {
		t.Errorf("cached flags %v %v %v", got[0].Cached, got[1].Cached, got[3].Cached)
	}
	reqs := e.pooling.Requests()
	if len(reqs) != 4 || e.pooling.Peak() != 4 {
		t.Fatalf("%d requests, %d at once; want the 4 distinct answers at once", len(reqs), e.pooling.Peak())
	}
	r := reqs[0]
	if r.Path != "/classify" || r.Model != "support-rm" || r.Activation == nil || *r.Activation || r.Auth != "Bearer sk-rm" {
		t.Errorf("request %+v", r)
	}
	roles := []string{}
	for _, msg := range r.Messages {
		roles = append(roles, msg.Role)
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant"}) || !strings.Contains(r.Messages[0].Content, "[1] Red means no line signal.") ||
		r.Messages[1].Content != "My router blinks red" {
		t.Errorf("conversation %+v", r.Messages)
	}
	if s := got[1].AsScore(m); s.Value != got[1].Value || s.Explanation != "support-rm 1.0.0 scored 2.000 (0.881 on 0–1)" {
		t.Errorf("as a scorer's result: %+v", s)
	}

	// Asked again: from the cache, no request.
	e.pooling.Reset()
	again, err := e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Reboot it!!!", "ok"))
	if err != nil || !again[0].Cached || !again[1].Cached || again[0].Raw != 2 || len(e.pooling.Requests()) != 0 {
		t.Errorf("again: %+v %v, %d requests", again, err, len(e.pooling.Requests()))
	}
	// The same answer to another query is another conversation.
	other := inputs("ok")
	other[0].Query = "My router is silent"
	if s, err := e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, other); err != nil || s[0].Cached || len(e.pooling.Requests()) != 1 {
		t.Errorf("another query: %+v %v", s, err)
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM reward_model_cache WHERE org_id = $1", e.org).Scan(&n); err != nil || n != 5 {
		t.Errorf("%d scores cached, want 5 (%v)", n, err)
	}
	// Each request sent is recorded for the monitors, with how long it
	// took (the stand-in's 300 ms at least) and its score; cached answers
	// sent none.
	rows, err := e.pool.Query(e.ctx, "SELECT purpose, latency_ms, score FROM reward_model_calls WHERE org_id = $1 ORDER BY score", e.org)
	if err != nil {
		t.Fatal(err)
	}
	var scores []float64
	for rows.Next() {
		var purpose string
		var latency, score float64
		if err := rows.Scan(&purpose, &latency, &score); err != nil {
			t.Fatal(err)
		}
		if purpose != "live" || latency < 300 || latency > 60000 {
			t.Errorf("call recorded as %s taking %v ms", purpose, latency)
		}
		scores = append(scores, score)
	}
	wantScores := []float64{logistic(-1), logistic(-1), logistic(0), logistic(1), logistic(2)}
	if len(scores) != len(wantScores) {
		t.Fatalf("%d calls recorded, want the 5 requests sent: %v", len(scores), scores)
	}
	for i := range scores {
		if math.Abs(scores[i]-wantScores[i]) > 1e-12 {
			t.Errorf("recorded scores %v, want %v", scores, wantScores)
			break
		}
	}
}

// A token-level reward model has no classification API: it is asked
// through the pooling API, whose last token carries the reward, and the
// server is asked /classify only once.
func TestScoreThroughPoolingAPI(t *testing.T) {
	e := newEnv(t, true)
	m := e.resolve(t)
	got, err := e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Reboot it!!!"))
	if err != nil || got[0].Invalid != "" || got[0].Raw != 2 {
		t.Fatalf("scores %+v, %v", got, err)
	}
	got, err = e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Check the cable!!"))
	if err != nil || got[0].Raw != 1 {
		t.Fatalf("scores %+v, %v", got, err)
	}
	var paths []string
	for _, r := range e.pooling.Requests() {
		paths = append(paths, r.Path)
	}
	if !slices.Equal(paths, []string{"/pooling", "/pooling"}) {
		t.Errorf("scored through %v", paths)
	}
}

// Every call goes through the outbound client: an address the operator's
// policy does not allow is never called, and the answer says why.
func TestScoreThroughOutboundClient(t *testing.T) {
	e := newEnv(t, false)
	strict := serving.New(e.pool, e.models.Serving.Secrets, &outbound.Client{}, "", "")
	strict.Attempts = 1
	closed := rewardmodel.New(e.pool, models.New(e.pool, nil, strict, nil))
	m, err := closed.Resolve(e.ctx, e.org, rewardmodel.Ref{Name: "support-rm", Alias: "production"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := closed.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Reboot it!!!"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got[0].Invalid, "private or loopback network") || len(e.pooling.Requests()) != 0 {
		t.Errorf("a refused address: %+v, %d requests", got[0], len(e.pooling.Requests()))
	}
}

// A server that fails leaves the answer without a score, with the
// reason, and nothing cached: a later call asks again.
func TestScoreFailureNotCached(t *testing.T) {
	e := newEnv(t, false)
	m := e.resolve(t)
	e.pooling.Script("/classify", http.StatusInternalServerError, http.StatusInternalServerError, http.StatusInternalServerError)
	got, err := e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Reboot it!!!"))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Invalid != "The reward model could not score the answer: The server answered 500 Internal Server Error." {
		t.Errorf("after three 500s: %+v", got[0])
	}
	if s := got[0].AsScore(m); s.Valid() {
		t.Errorf("an invalid score reads as valid: %+v", s)
	}
	got, err = e.svc.Score(e.ctx, e.org, m, rewardmodel.Live, inputs("Reboot it!!!"))
	if err != nil || got[0].Invalid != "" || got[0].Cached || got[0].Raw != 2 {
		t.Errorf("asked again: %+v, %v", got[0], err)
	}
}

// What cannot score is refused in words: nothing by that id or alias,
// another organisation's version, a version of another kind, a reward
// model served nowhere Curate can ask.
func TestResolveRefusals(t *testing.T) {
	e := newEnv(t, false)
	lora, err := e.models.Register(e.ctx, admin, e.org, models.NewVersion{Name: "support", ModelID: "/adapters/a", BaseModel: "base", Kind: models.KindLoRA})
	if err != nil {
		t.Fatal(err)
	}
	idle := e.register(t, "/runs/8b1c/final")
	globex, err := accounts.New(e.pool, accounts.DefaultSessionTTL).EnsureOrg(e.ctx, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	mine := e.resolve(t).VersionID
	for _, tc := range []struct {
		org  uuid.UUID
		ref  rewardmodel.Ref
		want string
	}{
		{e.org, rewardmodel.Ref{VersionID: uuid.New()}, "is not a model version of this organisation"},
		{globex.ID, rewardmodel.Ref{VersionID: mine}, "is not a model version of this organisation"},
		{globex.ID, rewardmodel.Ref{Name: "support-rm", Alias: "production"}, `no registered model "support-rm" has a version under the alias "production"`},
		{e.org, rewardmodel.Ref{Name: "support-rm", Alias: "staging"}, `no registered model "support-rm" has a version under the alias "staging"`},
		{e.org, rewardmodel.Ref{VersionID: lora.ID}, "support 1.0.0 is a LoRA adapter, not a reward model"},
		{e.org, rewardmodel.Ref{VersionID: idle}, "support-rm 1.1.0 is not served where Curate can ask it"},
	} {
		_, err := e.svc.Resolve(e.ctx, tc.org, tc.ref)
		var refused *rewardmodel.Refused
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, tc.want) {
			t.Errorf("%+v: %v; want %q", tc.ref, err, tc.want)
		}
	}
	// Scoring through a reference refuses the same way, asking nothing.
	if _, err := e.svc.ScoreRef(e.ctx, e.org, rewardmodel.Ref{VersionID: idle}, rewardmodel.Live, inputs("x")); err == nil || len(e.pooling.Requests()) != 0 {
		t.Errorf("scored with a reward model served nowhere: %v", err)
	}
}

// A reward model's output is its one value, or for a classifier with two
// labels (bad, good) the log-odds of good: logistic(b−a) is softmax's
// probability of the second label.
func TestRaw(t *testing.T) {
	if x, err := rewardmodel.Raw([]float64{1.5}); err != nil || x != 1.5 {
		t.Errorf("one label: %v %v", x, err)
	}
	// softmax([0.2, 1.4])[1] = e^1.4/(e^0.2+e^1.4) = 1/(1+e^-1.2).
	x, err := rewardmodel.Raw([]float64{0.2, 1.4})
	if err != nil || math.Abs(logistic(x)-math.Exp(1.4)/(math.Exp(0.2)+math.Exp(1.4))) > 1e-12 {
		t.Errorf("two labels: %v %v", x, err)
	}
	var answer *serving.AnswerError
	if _, err := rewardmodel.Raw([]float64{1, 2, 3}); !errors.As(err, &answer) {
		t.Errorf("three labels: %v", err)
	}
}
