package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/demo/demotest"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/serving"
)

// storeRun stores a finished evaluation of a version: its mean reward and
// one item per reward, the first flagged items on the red-team split.
func storeRun(t *testing.T, pool *pgxpool.Pool, org, set, version uuid.UUID, mean float64, rewards []float64, redFlags int, at time.Time) {
	t.Helper()
	ctx := context.Background()
	var run uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, mean_reward, total, done, finished_at)
		VALUES ($1, $2, $3, 'succeeded', $4, $5, $5, $6) RETURNING id`, org, set, version, mean, len(rewards), at).Scan(&run); err != nil {
		t.Fatal(err)
	}
	for i, r := range rewards {
		split, flag := "all", false
		if i < 3 {
			split, flag = "red_team", i < redFlags
		}
		if _, err := pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, reward, safety_flag) VALUES ($1, $2, $3, $4, $5)`,
			run, uuid.NewSHA1(uuid.Nil, []byte{byte(i)}), split, r, flag); err != nil {
			t.Fatal(err)
		}
	}
}

// The promotion gate: without one every production deployment goes; with
// one, a version needs a finished evaluation on its golden set that does
// not fall behind production's (mean, regressions, new red-team flags),
// or an admin's written override, kept for good.
func TestPromotionGate(t *testing.T) {
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
	org := seeded.OrgID
	admin := audit.Actor{Kind: "system", Label: "ada@demo.test"}
	gates := eval.NewGates(pool)
	ev := eval.New(pool, gates, nil, nil)
	jobs, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	reg := models.New(pool, jobs, serving.New(pool, nil, &outbound.Client{}, "", ""), gates)
	if _, err := reg.Serving.Create(ctx, admin, org, serving.NewTarget{Name: "provider", Kind: serving.KindOpenAI}); err != nil {
		t.Fatal(err)
	}
	register := func(id string) models.Version {
		v, err := reg.Register(ctx, admin, org, models.NewVersion{Name: "support", ModelID: id})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	prod, cand, other := register("m-prod"), register("m-cand"), register("m-other")
	if _, err := pool.Exec(ctx, `INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id) VALUES ($1, $2, 'production', $3)`,
		org, prod.RegisteredModelID, prod.ID); err != nil {
		t.Fatal(err)
	}
	deploy := func(v models.Version) error {
		_, err := reg.Deploy(ctx, admin, org, v.ID, models.DeployRequest{Alias: "production", Target: "provider", Reason: "ship"})
		if err == nil {
			// Let the next deployment of the alias be asked for.
			_, _ = pool.Exec(ctx, `UPDATE deployments SET status = 'succeeded' WHERE status = 'queued'`)
		}
		return err
	}

	if st, err := reg.GateStatus(ctx, org, cand.ID); err != nil || st.Set || st.Blocks() {
		t.Fatalf("no gate yet: %+v, %v", st, err)
	}
	if err := deploy(cand); err != nil {
		t.Fatalf("without a gate production moves freely: %v", err)
	}

	if err := ev.SetGate(ctx, admin, org, eval.Gate{GoldenSetVersionID: version.ID, MaxMeanDrop: 0.02, RegressionMargin: 0.1}); err == nil {
		t.Error("a gate on a version that is not a golden set")
	}
	if _, err := ev.Mark(ctx, admin, org, version.ID, "Support gold", eval.DefaultSplitTags); err != nil {
		t.Fatal(err)
	}
	var inv *errs.Invalid
	if err := ev.SetGate(ctx, admin, org, eval.Gate{GoldenSetVersionID: version.ID, MaxMeanDrop: 2, MaxRegressions: -1}); !errors.As(err, &inv) || len(inv.Errors) != 2 {
		t.Errorf("bad rules: %v", err)
	}
	if err := ev.SetGate(ctx, admin, org, eval.Gate{GoldenSetVersionID: version.ID, MaxMeanDrop: 0.02, RegressionMargin: 0.1, MaxRegressions: 0, NoNewRedTeamFlags: true}); err != nil {
		t.Fatal(err)
	}

	var conflict *errs.Conflict
	st, err := reg.GateStatus(ctx, org, cand.ID)
	if err != nil || !st.Blocks() || !strings.Contains(strings.Join(st.Reasons, " "), "No finished evaluation") {
		t.Fatalf("a version never evaluated: %+v, %v", st, err)
	}
	if err := deploy(cand); !errors.As(err, &conflict) {
		t.Fatalf("deploying a version never evaluated: %v", err)
	}
	// What to do next is a first evaluation, not another one.
	if want := "Evaluate it on Support gold first"; !strings.Contains(st.Next, want) || !strings.Contains(conflict.Message, want) ||
		strings.Contains(conflict.Message, "again") {
		t.Errorf("the next step for a version never evaluated: %q; refused with %q", st.Next, conflict.Message)
	}

	now := time.Now()
	storeRun(t, pool, org, version.ID, prod.ID, 0.80, []float64{0.8, 0.8, 0.8, 0.8, 0.8}, 0, now.Add(-time.Hour))
	// Worse: mean 0.1 lower, two items down by more than 0.1, one new
	// red-team flag.
	storeRun(t, pool, org, version.ID, cand.ID, 0.70, []float64{0.5, 0.85, 0.8, 0.6, 0.8}, 1, now.Add(-time.Minute))
	st, err = reg.GateStatus(ctx, org, cand.ID)
	if err != nil || len(st.Reasons) != 3 || !st.Blocks() {
		t.Fatalf("a worse evaluation: %+v, %v", st, err)
	}
	if err := deploy(cand); !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "2 items regress") {
		t.Errorf("deploying past a failing evaluation: %v", err)
	}
	if !strings.Contains(st.Next, "evaluate it again") {
		t.Errorf("the next step for a failing evaluation: %q", st.Next)
	}
	// A better evaluation, finished later, passes.
	storeRun(t, pool, org, version.ID, cand.ID, 0.82, []float64{0.8, 0.85, 0.8, 0.75, 0.9}, 0, now)
	if st, err := reg.GateStatus(ctx, org, cand.ID); err != nil || st.Blocks() || len(st.Reasons) != 0 {
		t.Fatalf("a better evaluation: %+v, %v", st, err)
	}
	// A gate that also asks for a leak check keeps its reason beside the
	// comparison with production's run.
	leakGate := eval.Gate{GoldenSetVersionID: version.ID, MaxMeanDrop: 0.02, RegressionMargin: 0.1, NoNewRedTeamFlags: true, LeakCheck: true, LeakMinWords: 20}
	if err := ev.SetGate(ctx, admin, org, leakGate); err != nil {
		t.Fatal(err)
	}
	if st, err := reg.GateStatus(ctx, org, cand.ID); err != nil || !st.Blocks() || len(st.Reasons) != 1 ||
		!strings.Contains(st.Reasons[0], "No finished leak check") || !strings.Contains(st.Next, "leak check") {
		t.Fatalf("a version without a leak check: %+v, %v", st, err)
	}
	leakGate.LeakCheck = false
	if err := ev.SetGate(ctx, admin, org, leakGate); err != nil {
		t.Fatal(err)
	}
	if err := deploy(cand); err != nil {
		t.Fatalf("deploying after a passing evaluation: %v", err)
	}

	// An override: refused without a reason, then audited and kept.
	if err := ev.Override(ctx, admin, org, other.ID, " "); !errors.As(err, &inv) {
		t.Errorf("an override without a reason: %v", err)
	}
	if err := ev.Override(ctx, admin, org, other.ID, "hotfix for the outage; evaluation to follow"); err != nil {
		t.Fatal(err)
	}
	if st, err := reg.GateStatus(ctx, org, other.ID); err != nil || st.Blocks() || len(st.Overrides) != 1 || len(st.Reasons) == 0 {
		t.Fatalf("an overridden version: %+v, %v", st, err)
	}
	if err := deploy(other); err != nil {
		t.Fatalf("deploying an overridden version: %v", err)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM gate_overrides"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("deleting an override: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE action = 'evaluation_gate.override'").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d override audit entries (%v)", n, err)
	}
}
