package loops_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/serving"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "user", Label: "ad@acme.test"}

// env is the services of one process on a fresh database, with no
// worker: a test takes each step itself.
type env struct {
	pool *pgxpool.Pool
	svc  *app.Services
	org  uuid.UUID
	set  uuid.UUID // a golden set
	fake *openaitest.Server
}

func newEnv(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	fake := openaitest.New(t)
	cfg := config.Defaults()
	cfg.DataDir, cfg.SecretKey, cfg.OutboundAllow = t.TempDir(), "loops-test-secret-key-0123456789abcdef", "127.0.0.0/8"
	cfg.OpenAIAPIKey, cfg.OpenAIBaseURL = "sk-test", fake.URL()
	svc, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Scratch.Close() })
	org, err := svc.Accounts.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	e := env{pool: pool, svc: svc, org: org.ID, fake: fake}
	if _, err := svc.Endpoints.Create(ctx, admin, org.ID, endpoints.NewEndpoint{Name: "judge", BaseURL: "http://127.0.0.1:9/v1", Model: "judge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Serving.Create(ctx, admin, org.ID, serving.NewTarget{Name: "openai-prod", Kind: serving.KindOpenAI}); err != nil {
		t.Fatal(err)
	}
	ids := e.items(t, []feedback.Item{{Query: "Golden?", Response: "Old.", FeedbackType: "correction", Correction: "New."}})
	if _, err := pool.Exec(ctx, "UPDATE feedback SET status = 'corrected' WHERE id = ANY($1)", ids); err != nil {
		t.Fatal(err)
	}
	d, err := svc.Datasets.Create(ctx, admin, org.ID, datasets.NewDataset{Type: datasets.TypeInstructionTuning, Settings: datasets.Settings{Name: "gold"},
		Members: ids})
	if err != nil {
		t.Fatal(err)
	}
	v, err := svc.Datasets.Freeze(ctx, admin, org.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Eval.Mark(ctx, admin, org.ID, v.ID, "gold", []string{}); err != nil {
		t.Fatal(err)
	}
	e.set = v.ID
	return e
}

func (e env) items(t *testing.T, items []feedback.Item) []uuid.UUID {
	t.Helper()
	res, err := e.svc.Feedback.IngestBatch(context.Background(), e.org, "api", items)
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

// spec is a valid policy to vary.
func (e env) spec(name string) loops.Spec {
	n := 4
	return loops.Spec{Name: name, RegisteredModel: "support",
		Trigger:    loops.Trigger{MinNewItems: &n, Filter: loops.Filter{"status": "approved"}},
		Dataset:    loops.DatasetSpec{Name: name + "-data", Generate: loops.Recipe{Methods: nil}},
		Training:   loops.Training{Provider: "openai", Method: "dpo", BaseModel: "gpt-4o-mini-2024-07-18", MaxCostUSD: 20},
		Evaluation: loops.Evaluation{GoldenSetVersionID: e.set, RewardFormula: json.RawMessage(`{"reference_f1": 1}`)},
		Deploy:     loops.Deploy{Target: "openai-prod"}}
}

func withMethods(sp loops.Spec, methods ...string) loops.Spec {
	for _, m := range methods {
		sp.Dataset.Generate.Methods = append(sp.Dataset.Generate.Methods, pairsGeneration(m))
	}
	return sp
}

func fields(err error) string {
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		return fmt.Sprintf("not invalid: %v", err)
	}
	return strings.Join(inv.Fields(), ",")
}

// A policy is checked by the services that will carry it out, each field
// named; a valid one gets its defaults (the candidate alias, production,
// no approval, seed 001's 1,000 new items, a DPO dataset).
func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad := loops.Spec{Name: "Support Weekly", Trigger: loops.Trigger{MinNewItems: ptr(-1), Filter: loops.Filter{"status": "shouting", "colour": "red"}},
		Dataset:    loops.DatasetSpec{Generate: loops.Recipe{Methods: nil}},
		Training:   loops.Training{Provider: "acme-ml", Method: "dpo", MaxCostUSD: 0},
		Evaluation: loops.Evaluation{}, Deploy: loops.Deploy{Target: "nowhere", Alias: "production"}, Approval: "sometimes"}
	_, err := e.svc.Loops.Create(ctx, admin, e.org, bad)
	want := "approval,dataset.generate,dataset.name,deploy.alias,deploy.target,evaluation.golden_set_version_id,evaluation.judge.endpoint,name,registered_model," +
		"training.max_cost_usd,training.provider,trigger.filter.colour,trigger.filter.status,trigger.min_new_items"
	if got := fields(err); got != want {
		t.Errorf("refused fields\n got %s\nwant %s", got, want)
	}
	n := 0
	nothing := e.spec("nothing")
	nothing.Trigger.MinNewItems = &n
	if _, err := e.svc.Loops.Create(ctx, admin, e.org, withMethods(nothing, "same_query")); fields(err) != "trigger.min_new_items" {
		t.Errorf("no trigger at all: %v", err)
	}
	sft := e.spec("sft")
	sft.Training.Method = "supervised"
	sft.Trigger.Filter = loops.Filter{"status": "pending"}
	if _, err := e.svc.Loops.Create(ctx, admin, e.org, withMethods(sft, "same_query")); fields(err) != "dataset.generate,trigger.filter.status" {
		t.Errorf("supervised training on pending items with pairs: %v", err)
	}

	shadowed := withMethods(e.spec("shadowed"), "same_query")
	shadowed.Evaluation.Shadow = &loops.ShadowGate{MinQueries: 0, MaxDrop: 1.5}
	if _, err := e.svc.Loops.Create(ctx, admin, e.org, shadowed); fields(err) != "evaluation.shadow.max_drop,evaluation.shadow.min_queries" {
		t.Errorf("a bad shadow gate: %v", err)
	}
	shadowed.Evaluation.Shadow = &loops.ShadowGate{MinQueries: 50, MaxDrop: 0.02}
	if l, err := e.svc.Loops.Create(ctx, admin, e.org, shadowed); err != nil || l.Evaluation.Shadow == nil || l.Evaluation.Shadow.MinQueries != 50 {
		t.Errorf("a shadow gate: %v", err)
	}

	sp := withMethods(e.spec("support-weekly"), "same_query", "correction")
	sp.Trigger.MinNewItems = nil
	l, err := e.svc.Loops.Create(ctx, admin, e.org, sp)
	if err != nil {
		t.Fatal(err)
	}
	if l.Status != loops.StatusActive || *l.Trigger.MinNewItems != loops.DefaultMinNewItems || l.Deploy.Alias != "candidate" ||
		l.PromoteAlias != "production" || l.Approval != loops.ApproveNone || l.Dataset.Generate.Type != datasets.TypeDPO ||
		l.Deploy.PromoteTarget != "openai-prod" || *l.Dataset.Generate.ValidationPercent != 20 {
		t.Errorf("defaults: %+v", l.Spec)
	}
	if _, err := e.svc.Loops.Create(ctx, admin, e.org, sp); fields(err) != "name" {
		t.Errorf("a second loop of the name: %v", err)
	}
	other, err := e.svc.Accounts.EnsureOrg(ctx, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Loops.Get(ctx, other.ID, l.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation reads the loop: %v", err)
	}
	if _, err := e.svc.Loops.StartNow(ctx, admin, other.ID, l.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation runs the loop: %v", err)
	}
}

// The recipe arrives as a list of methods or as a whole recipe; either
// way it is stored as the recipe.
func TestRecipeForms(t *testing.T) {
	t.Parallel()
	var a, b loops.DatasetSpec
	if err := json.Unmarshal([]byte(`{"name": "d", "generate": ["same_query", {"method": "multi_aspect", "min_gap": 0.5}]}`), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"name": "d", "generate": {"methods": ["correction"], "min_strength": 0.5, "type": "preference_pairs",
		"filter": {"model": "assist-v2"}, "validation_percent": 10}}`), &b); err != nil {
		t.Fatal(err)
	}
	if len(a.Generate.Methods) != 2 || a.Generate.Methods[1].Method != "multi_aspect" || *a.Generate.Methods[1].MinGap != 0.5 {
		t.Errorf("list form %+v", a.Generate)
	}
	if g := b.Generate; len(g.Methods) != 1 || g.MinStrength != 0.5 || g.Type != "preference_pairs" || (*g.Filter)["model"] != "assist-v2" ||
		*g.ValidationPercent != 10 {
		t.Errorf("recipe form %+v", g)
	}
	var c loops.DatasetSpec
	if err := json.Unmarshal([]byte(`{"name": "d", "generate": {"methods": ["correction"], "colour": "red"}}`), &c); err == nil {
		t.Error("an unknown recipe field was taken")
	}
}

// advance takes a run's current step once, as a worker would.
func advance(t *testing.T, e env, run uuid.UUID) loops.Run {
	t.Helper()
	ctx := context.Background()
	r, err := e.svc.Loops.GetRun(ctx, e.org, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Loops.Advance(ctx, run, r.Step); err != nil {
		t.Fatalf("step %s: %v", r.Step, err)
	}
	r, err = e.svc.Loops.GetRun(ctx, e.org, run)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func step(r loops.Run, name string) loops.StepView {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return loops.StepView{}
}

// The collect step flags what hygiene finds and says what it left out
// and why; the dataset takes pairs of clean items only. A run trains no
// content trained before the same way, and no estimate above the cap.
func TestCollectDatasetAndTrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var items []feedback.Item
	for i := range 6 { // three questions, each answered well and badly
		items = append(items, feedback.Item{Query: fmt.Sprintf("Question %d?", i/2), Response: fmt.Sprintf("Answer %d.", i), FeedbackType: "rating",
			Rating: ptr(5 - 4*(i%2)), UserID: fmt.Sprintf("u%d", i)})
	}
	for i := range 3 { // the same comment pasted three times
		items = append(items, feedback.Item{Query: fmt.Sprintf("Question %d?", i), Response: fmt.Sprintf("Spam %d.", i), FeedbackType: "rating",
			Rating: ptr(1), Comment: "Buy cheap followers at spam.example today!"})
	}
	ids := e.items(t, items)
	if _, err := e.pool.Exec(ctx, "UPDATE feedback SET status = 'approved', reviewed_at = now() WHERE id = ANY($1)", ids); err != nil {
		t.Fatal(err)
	}
	l, err := e.svc.Loops.Create(ctx, admin, e.org, withMethods(e.spec("support-weekly"), "same_query"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Loops.StartNow(ctx, admin, e.org, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != loops.RunRunning || r.Step != loops.StepCollect || len(r.Steps) != 9 || r.StartedByLabel != admin.Label {
		t.Fatalf("started %+v", r)
	}
	if _, err := e.svc.Loops.StartNow(ctx, admin, e.org, l.ID); !isConflict(err) {
		t.Errorf("a second run at once: %v", err)
	}
	r = advance(t, e, r.ID)
	c := step(r, loops.StepCollect)
	if c.Status != loops.StepSucceeded || c.Detail != "9 new items match the filter; 6 items may be training data. Left out 3: 3 because its comment is pasted on other items." {
		t.Errorf("collect %s: %q", c.Status, c.Detail)
	}
	r = advance(t, e, r.ID)
	d := step(r, loops.StepDataset)
	if d.Status != loops.StepSucceeded || !strings.HasPrefix(d.Detail, "Generated 3 new pairs (same query 3). Added 3 pairs to support-weekly-data, which holds 3.") {
		t.Errorf("dataset %s: %q", d.Status, d.Detail)
	}
	r = advance(t, e, r.ID)
	if f := step(r, loops.StepFreeze); f.Status != loops.StepSucceeded || r.ContentHash == "" || r.DatasetVersionID == nil {
		t.Fatalf("freeze %+v, run %+v", f, r)
	}

	// Someone trained this content already, the same way: the run skips.
	if _, _, err := e.svc.FineTune.Launch(ctx, audit.System, e.org, finetune.Request{VersionID: *r.DatasetVersionID, Provider: "openai",
		Method: provider.DPO, BaseModel: "gpt-4o-mini-2024-07-18"}); err != nil {
		t.Fatal(err)
	}
	r = advance(t, e, r.ID)
	if r.Status != loops.RunSkipped || !strings.Contains(r.Reason, "was trained before, the same way, by support-weekly-data v1 · ft-1") {
		t.Errorf("a run of trained content %s: %s", r.Status, r.Reason)
	}
	if s := step(r, loops.StepRegister); s.Status != loops.StepSkipped {
		t.Errorf("register %s after a skip", s.Status)
	}

	// A cap below the estimate stops the next run before training.
	cheap := withMethods(e.spec("cheap"), "same_query")
	cheap.Training.MaxCostUSD = 0.001
	cheap.Dataset.Generate.SplitStrategy = datasets.SplitTemporal // other content than the first loop's
	lc, err := e.svc.Loops.Create(ctx, admin, e.org, cheap)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.svc.Loops.StartNow(ctx, admin, e.org, lc.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		r2 = advance(t, e, r2.ID)
	}
	if r2.Status != loops.RunFailed || !strings.Contains(r2.Reason, "is above the loop's cap of $0.0010") {
		t.Errorf("over the cap %s: %s", r2.Status, r2.Reason)
	}
	var alerts int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM alerts WHERE kind = 'loop_run' AND resolved_at IS NULL AND org_id = $1", e.org).Scan(&alerts); err != nil || alerts != 1 {
		t.Errorf("%d open alerts of failed runs (%v)", alerts, err)
	}
}

// A trigger starts a run once enough new items may be training data,
// and not before; a schedule starts one when its time has come, then
// waits its period again.
func TestTriggers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	sp := withMethods(e.spec("by-items"), "same_query")
	sp.Trigger.MinNewItems = ptr(3)
	byItems, err := e.svc.Loops.Create(ctx, admin, e.org, sp)
	if err != nil {
		t.Fatal(err)
	}
	daily := withMethods(e.spec("daily"), "same_query")
	daily.Trigger.MinNewItems, daily.Trigger.Schedule, daily.Trigger.Filter = ptr(0), "daily", loops.Filter{"tag": "never"}
	byDay, err := e.svc.Loops.Create(ctx, admin, e.org, daily)
	if err != nil {
		t.Fatal(err)
	}
	runs := func(id uuid.UUID) []loops.Run {
		t.Helper()
		list, _, err := e.svc.Loops.Runs(ctx, e.org, id, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	approve := func(n int) {
		t.Helper()
		var its []feedback.Item
		for range n {
			its = append(its, feedback.Item{Query: "Q " + uuid.NewString(), Response: "R", FeedbackType: "thumbs_up"})
		}
		if _, err := e.pool.Exec(ctx, "UPDATE feedback SET status = 'approved', reviewed_at = now() WHERE id = ANY($1)", e.items(t, its)); err != nil {
			t.Fatal(err)
		}
	}
	approve(2)
	if err := e.svc.Loops.CheckTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	if len(runs(byItems.ID)) != 0 || len(runs(byDay.ID)) != 0 {
		t.Fatal("a run started before its trigger")
	}
	approve(1)
	if _, err := e.pool.Exec(ctx, "UPDATE loop_policies SET created_at = now() - interval '25 hours' WHERE id = $1", byDay.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Loops.CheckTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	if r := runs(byItems.ID); len(r) != 1 || r[0].StartedBy != loops.ByItems {
		t.Errorf("by items: %+v", r)
	}
	if r := runs(byDay.ID); len(r) != 1 || r[0].StartedBy != loops.BySchedule {
		t.Errorf("by schedule: %+v", r)
	}
	// Under way, and then within the day: no second run.
	for _, id := range []uuid.UUID{byItems.ID, byDay.ID} {
		if _, err := e.svc.Loops.Stop(ctx, admin, e.org, runs(id)[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.Loops.CheckTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	if len(runs(byDay.ID)) != 1 {
		t.Errorf("the daily loop ran twice in a day")
	}
	// The items-triggered loop's stopped run never collected: the same
	// items are still new to it.
	if r := runs(byItems.ID); len(r) != 2 || r[0].StartedBy != loops.ByItems {
		t.Errorf("after a stopped run: %+v", r)
	}
}

// Stopping a run ends its step and skips the rest; an ended run cannot
// be stopped or approved again.
func TestStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	l, err := e.svc.Loops.Create(ctx, admin, e.org, withMethods(e.spec("support"), "same_query"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Loops.StartNow(ctx, admin, e.org, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err = e.svc.Loops.Stop(ctx, admin, e.org, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, s := range r.Steps {
		statuses = append(statuses, s.Status)
	}
	if r.Status != loops.RunStopped || r.Reason != "Stopped by ad@acme.test." || !slices.Equal(statuses,
		[]string{"stopped", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped"}) {
		t.Errorf("stopped run %s %q %v", r.Status, r.Reason, statuses)
	}
	if _, err := e.svc.Loops.Stop(ctx, admin, e.org, r.ID); !isConflict(err) {
		t.Errorf("stopping again: %v", err)
	}
	if _, err := e.svc.Loops.Approve(ctx, admin, e.org, r.ID); !isConflict(err) {
		t.Errorf("approving a stopped run: %v", err)
	}
	// Its job, should it run now, leaves the run as it is.
	if wait, err := e.svc.Loops.Advance(ctx, r.ID, loops.StepCollect); err != nil || wait != 0 {
		t.Errorf("a stopped run's step: %v %v", wait, err)
	}
	if got, _ := e.svc.Loops.GetRun(ctx, e.org, r.ID); got.Status != loops.RunStopped || step(got, loops.StepCollect).Detail != r.Reason {
		t.Errorf("after its job %+v", got)
	}
}

func isConflict(err error) bool {
	var c *errs.Conflict
	return errors.As(err, &c)
}

func ptr[T any](v T) *T { return &v }

func pairsGeneration(method string) pairs.Generation { return pairs.Generation{Method: method} }

// trainingRun starts a run of a loop named name with a $20 cap and takes
// it to its train step, the job launched; it returns the run and the job.
func trainingRun(t *testing.T, e env, name string) (loops.Run, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var items []feedback.Item
	for i := range 6 {
		items = append(items, feedback.Item{Query: fmt.Sprintf("Question %d?", i/2), Response: fmt.Sprintf("Answer %d.", i), FeedbackType: "rating",
			Rating: ptr(5 - 4*(i%2)), UserID: fmt.Sprintf("u%d", i)})
	}
	ids := e.items(t, items)
	if _, err := e.pool.Exec(ctx, "UPDATE feedback SET status = 'approved', reviewed_at = now() WHERE id = ANY($1)", ids); err != nil {
		t.Fatal(err)
	}
	l, err := e.svc.Loops.Create(ctx, admin, e.org, withMethods(e.spec(name), "same_query"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Loops.StartNow(ctx, admin, e.org, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 { // collect, dataset, freeze, train: launched
		r = advance(t, e, r.ID)
	}
	tr := step(r, loops.StepTrain)
	if r.Status != loops.RunRunning || r.Step != loops.StepTrain || tr.Links["fine_tuning_job_id"] == "" {
		t.Fatalf("train not under way: run %s at %s, %+v", r.Status, r.Step, tr)
	}
	return r, uuid.MustParse(tr.Links["fine_tuning_job_id"])
}

// advanceJobUntil takes the fine-tuning job's steps (prepare, upload,
// create, polls) until it has the status.
func advanceJobUntil(t *testing.T, e env, jobID uuid.UUID, status string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		var st string
		if err := e.pool.QueryRow(ctx, "SELECT status::text FROM fine_tuning_jobs WHERE id = $1", jobID).Scan(&st); err != nil {
			t.Fatal(err)
		}
		if st == status {
			return
		}
		if i == 30 {
			t.Fatalf("the job is still %s after 30 steps; want %s", st, status)
		}
		if _, err := e.svc.FineTune.Advance(ctx, jobID); err != nil {
			t.Fatal(err)
		}
	}
}

// The cap holds the bill, not only the estimate: once the provider reports
// trained tokens that cost the loop's max_cost_usd, the job still under
// way is cancelled at the provider, through the fine-tuning service's own
// client, and the run fails saying so.
func TestTrainStopsAtTheCostCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r, jobID := trainingRun(t, e, "capped")
	advanceJobUntil(t, e, jobID, "running")
	// The provider reports the tokens it has trained and billed so far:
	// enough to cost the cap of $20.
	var ppm int64
	var providerJob string
	if err := e.pool.QueryRow(ctx, "SELECT price_per_million, provider_job_id FROM fine_tuning_jobs WHERE id = $1", jobID).Scan(&ppm, &providerJob); err != nil {
		t.Fatal(err)
	}
	tokens := (20*1_000_000*1_000_000 + ppm - 1) / ppm
	if _, err := e.pool.Exec(ctx, "UPDATE fine_tuning_jobs SET trained_tokens = $2 WHERE id = $1", jobID, tokens); err != nil {
		t.Fatal(err)
	}
	r = advance(t, e, r.ID)
	if r.Status != loops.RunFailed || !strings.Contains(r.Reason, "reaching the loop's cap of $20") || !strings.Contains(r.Reason, "cancelled at openai") {
		t.Fatalf("billed up to the cap: run %s: %q; want failed, saying the job is cancelled at the provider", r.Status, r.Reason)
	}
	// The fine-tuning worker's next looks carry the cancel to OpenAI and
	// read the job's end.
	for range 2 {
		if _, err := e.svc.FineTune.Advance(ctx, jobID); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.fake.Hits("POST", "/v1/fine_tuning/jobs/"+providerJob+"/cancel"); n != 1 {
		t.Errorf("%d cancels reached the provider; want 1", n)
	}
	var status string
	if err := e.pool.QueryRow(ctx, "SELECT status::text FROM fine_tuning_jobs WHERE id = $1", jobID).Scan(&status); err != nil || status != "cancelled" {
		t.Errorf("the job is %q (%v); want cancelled", status, err)
	}
}

// A job that finished billed above the cap (the provider charged more than
// the estimate) stops the run before its version is registered.
func TestTrainBilledAboveTheCapStopsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r, jobID := trainingRun(t, e, "overbilled")
	advanceJobUntil(t, e, jobID, "succeeded")
	if _, err := e.pool.Exec(ctx, "UPDATE fine_tuning_jobs SET actual_cost = 21000000 WHERE id = $1", jobID); err != nil {
		t.Fatal(err)
	}
	r = advance(t, e, r.ID)
	if r.Status != loops.RunFailed || !strings.Contains(r.Reason, "was billed $21") || !strings.Contains(r.Reason, "above the loop's cap of $20") {
		t.Fatalf("billed above the cap: run %s: %q; want failed, saying so", r.Status, r.Reason)
	}
	if s := step(r, loops.StepRegister); s.Status == loops.StepSucceeded {
		t.Errorf("the version was registered after all: %+v", s)
	}
}
