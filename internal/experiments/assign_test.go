package experiments_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// statements counts the statements a pool sends.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// server is another process on e's database: its own pool, whose
// statements are counted, and its own experiments service.
func (e env) server(t *testing.T) (*experiments.Service, *statements) {
	t.Helper()
	cfg := e.pool.Config().Copy()
	counter := &statements{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &experiments.Service{Pool: pool, Models: e.reg}, counter
}

// assignOne assigns one unit through svc and answers the assignment and
// the statements it took.
func assignOne(t *testing.T, e env, svc *experiments.Service, counter *statements, key, unit string) (experiments.Assignment, int64) {
	t.Helper()
	before := counter.n.Load()
	as, err := svc.Assign(e.ctx, e.org, key, []string{unit})
	if err != nil {
		t.Fatalf("assigning %s: %v", unit, err)
	}
	return as[0], counter.n.Load() - before
}

// A server that has read an experiment's configuration assigns a new unit
// in one statement and answers a known one in one statement, and still
// follows every change another server makes: weights, coverage, a reseed,
// a pause, the arms' targets and versions changed underneath, each found
// by the count of changes the database keeps, in the statement that
// would have recorded the exposure (which then records nothing).
func TestAssignFollowsChangesMadeElsewhere(t *testing.T) {
	e := newEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, "gpu-1", vllm.URL)
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	e.deploy(t, v1, "staging", "gpu-1")
	e.deploy(t, v2, "production", "gpu-1")
	e.create(t, "cached", v1, v2)
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "cached", experiments.Running, "", ""); err != nil {
		t.Fatal(err)
	}
	a, counter := e.server(t) // assigns
	b := e.exp                // changes

	first, n := assignOne(t, e, a, counter, "cached", "first")
	if n != 2 || !first.InExperiment {
		t.Errorf("the first assignment took %d statements (want 2: the configuration, then the exposure): %+v", n, first)
	}
	if again, n := assignOne(t, e, a, counter, "cached", "first"); n != 1 || again != first {
		t.Errorf("a known unit took %d statements, answered %+v after %+v", n, again, first)
	}
	if fresh, n := assignOne(t, e, a, counter, "cached", "second"); n != 1 || !fresh.InExperiment || e.recorded(t, "cached", "second") != fresh.ArmIndex {
		t.Errorf("a new unit took %d statements: %+v, recorded %d", n, fresh, e.recorded(t, "cached", "second"))
	}

	// Another server sends every new unit to the treatment.
	if _, err := b.SetTraffic(e.ctx, admin, e.org, "cached", experiments.Traffic{Weights: []float64{0, 1}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		u := fmt.Sprintf("after-weights-%d", i)
		got, n := assignOne(t, e, a, counter, "cached", u)
		if got.Arm != "treatment" || e.recorded(t, "cached", u) != 1 {
			t.Fatalf("%s after the weights changed: %+v", u, got)
		}
		if want := int64(1); i == 0 {
			want = 3 // the stale statement, the configuration, the statement again
			if n != want {
				t.Errorf("the first assignment after a change took %d statements, want %d", n, want)
			}
		} else if n != want {
			t.Errorf("%s took %d statements, want %d", u, n, want)
		}
	}
	// The first units keep their arms.
	if again, _ := assignOne(t, e, a, counter, "cached", "first"); again != first {
		t.Errorf("a unit exposed before the change: %+v, first %+v", again, first)
	}

	// Coverage: a unit outside it is answered the control and not recorded.
	cov := 0.5
	if _, err := b.SetTraffic(e.ctx, admin, e.org, "cached", experiments.Traffic{Coverage: &cov}); err != nil {
		t.Fatal(err)
	}
	out := unitInside("cached", cov, false, 99)
	if got, _ := assignOne(t, e, a, counter, "cached", out); got.InExperiment || got.Arm != "control" || e.recorded(t, "cached", out) != -1 {
		t.Errorf("a unit outside the new coverage: %+v", got)
	}

	// A reseed: a new phase, where the first unit is assigned afresh.
	full := 1.0
	if _, err := b.SetTraffic(e.ctx, admin, e.org, "cached", experiments.Traffic{Coverage: &full, Reseed: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := assignOne(t, e, a, counter, "cached", "first"); got.Arm != "treatment" {
		t.Errorf("after the reseed, with every new unit sent to the treatment: %+v", got)
	}
	if n := count(t, e, `SELECT count(*) FROM experiment_exposures x JOIN experiments ex ON ex.id = x.experiment_id
		WHERE ex.key = 'cached' AND x.unit_id = 'first' AND x.phase = 2`); n != 1 {
		t.Errorf("after the reseed %d exposures of the first unit in phase 2, want 1", n)
	}

	// Paused elsewhere: refused here, and nothing recorded.
	if _, err := b.SetStatus(e.ctx, admin, e.org, "cached", experiments.Paused, "", ""); err != nil {
		t.Fatal(err)
	}
	_, err := a.Assign(e.ctx, e.org, "cached", []string{"while-paused"})
	var conflict *errs.Conflict
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "paused") {
		t.Errorf("assigning while paused elsewhere: %v", err)
	}
	if n := count(t, e, `SELECT count(*) FROM experiment_exposures WHERE unit_id = 'while-paused'`); n != 0 {
		t.Errorf("%d exposures recorded while paused", n)
	}
	if _, err := b.SetStatus(e.ctx, admin, e.org, "cached", experiments.Running, "", ""); err != nil {
		t.Fatal(err)
	}

	// What the arms call changes underneath: the target's address and the
	// served name of the treatment's deployment.
	if _, err := e.pool.Exec(e.ctx, `UPDATE serving_targets SET base_url = base_url || '/moved'`); err != nil {
		t.Fatal(err)
	}
	if got, _ := assignOne(t, e, a, counter, "cached", "first"); got.BaseURL != vllm.URL+"/moved" {
		t.Errorf("after the target moved: %+v", got)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE deployments d SET served_name = 'renamed' FROM experiment_arms a
		JOIN experiments x ON x.id = a.experiment_id WHERE x.key = 'cached' AND a.idx = 1 AND a.deployment_id = d.id`); err != nil {
		t.Fatal(err)
	}
	if got, _ := assignOne(t, e, a, counter, "cached", "first"); got.Model != "renamed" {
		t.Errorf("after the deployment was renamed: %+v", got)
	}
	// The treatment's deployment recorded unloaded (as the serving check
	// records an adapter its target dropped): its units call the
	// control's model, flagged, and the config says so.
	if _, err := e.pool.Exec(e.ctx, `UPDATE deployments d SET unloaded_at = now() FROM experiment_arms a
		JOIN experiments x ON x.id = a.experiment_id WHERE x.key = 'cached' AND a.idx = 1 AND a.deployment_id = d.id`); err != nil {
		t.Fatal(err)
	}
	cfg, err := a.Config(e.ctx, e.org, "cached")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NotServed) != 1 || cfg.NotServed[0] != "treatment" || cfg.Arms[1].Served || !strings.Contains(cfg.Arms[1].NotServed, "1.1.0") {
		t.Errorf("the config with the treatment unloaded: %+v", cfg)
	}
	got, err := a.Assign(e.ctx, e.org, "cached", []string{"first"})
	if err != nil || len(got) != 1 || !got[0].Fallback || got[0].Arm != "treatment" || got[0].Model != cfg.Arms[0].Model ||
		got[0].Version != cfg.Arms[0].Version || !strings.Contains(got[0].NotServed, "treatment arm's version 1.1.0") {
		t.Errorf("assigning to an unloaded treatment: %+v, %v", got, err)
	}
	// With the control unloaded too, there is nothing to send: refused
	// by name.
	if _, err := e.pool.Exec(e.ctx, `UPDATE deployments d SET unloaded_at = now() FROM experiment_arms a
		JOIN experiments x ON x.id = a.experiment_id WHERE x.key = 'cached' AND a.idx = 0 AND a.deployment_id = d.id`); err != nil {
		t.Fatal(err)
	}
	_, err = a.Assign(e.ctx, e.org, "cached", []string{"first"})
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "treatment arm's version 1.1.0") {
		t.Errorf("assigning with both arms unloaded: %v", err)
	}
}

// Assignments going on while another server changes the weights and
// re-randomises: each answer is the arm recorded for the unit in the phase
// it was recorded in, and no assignment fails.
func TestAssignWhileConfigurationChanges(t *testing.T) {
	e := newEnv(t)
	e.running(t, experiments.NewExperiment{Key: "moving"})
	a, _ := e.server(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w := float64(i%9+1) / 10
			tr := experiments.Traffic{Weights: []float64{1 - w, w}, Reseed: i%3 == 0}
			if _, err := e.exp.SetTraffic(e.ctx, admin, e.org, "moving", tr); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	type answer struct {
		unit string
		arm  int
	}
	answers := make(chan answer, 4000)
	var callers sync.WaitGroup
	for c := range 8 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for i := range 50 {
				units := []string{fmt.Sprintf("u-%d-%d", c, i), fmt.Sprintf("shared-%d", i%7)}
				as, err := a.Assign(e.ctx, e.org, "moving", units)
				if err != nil {
					t.Error(err)
					return
				}
				for _, x := range as {
					answers <- answer{x.UnitID, x.ArmIndex}
				}
			}
		}()
	}
	callers.Wait()
	close(stop)
	wg.Wait()
	close(answers)
	seen := 0
	for x := range answers {
		seen++
		if n := count(t, e, `SELECT count(*) FROM experiment_exposures WHERE unit_id = $1 AND arm = $2`, x.unit, x.arm); n == 0 {
			t.Errorf("%s was answered arm %d, recorded in no phase", x.unit, x.arm)
		}
	}
	if seen != 8*50*2 {
		t.Errorf("%d answers", seen)
	}
}

// Exposures a client assigned itself: recorded once per unit and phase
// (the earliest reported), re-sent without effect, a unit reported in the
// other arm counted once as seen in two arms however often it is so
// reported, exposures from before the phase left out, and a malformed
// batch refused whole.
func TestRecordExposures(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "local"})
	clock := x.StartedAt.Add(time.Minute)
	e.exp.Now = func() time.Time { return clock }
	at := func(d time.Duration) *time.Time { t := clock.Add(d); return &t }
	arm := func(i int) *int { return &i }
	batch := []experiments.Exposure{
		{UnitID: "u1", ArmIndex: arm(0), At: at(-time.Second)},
		{UnitID: "u2", ArmIndex: arm(1), At: at(-2 * time.Second)},
		{UnitID: "u2", ArmIndex: arm(1), At: at(-time.Second)},
		{UnitID: "u3", ArmIndex: arm(1), At: at(time.Minute)}, // a client clock a minute ahead
	}
	got, err := e.exp.RecordExposures(e.ctx, e.org, "local", batch)
	if want := (experiments.Recorded{Inserted: 3, Duplicates: 1}); err != nil || got != want {
		t.Fatalf("first report: %+v, %v; want %+v", got, err, want)
	}
	if again, err := e.exp.RecordExposures(e.ctx, e.org, "local", batch); err != nil || again != (experiments.Recorded{Duplicates: 4}) {
		t.Errorf("the same report again: %+v, %v", again, err)
	}
	var firstSeen time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT first_seen FROM experiment_exposures WHERE unit_id = 'u2'`).Scan(&firstSeen); err != nil ||
		!firstSeen.Equal(batch[1].At.Truncate(time.Microsecond)) {
		t.Errorf("u2 first seen %v (%v), want its earliest report %v", firstSeen, err, batch[1].At)
	}
	if err := e.pool.QueryRow(e.ctx, `SELECT first_seen FROM experiment_exposures WHERE unit_id = 'u3'`).Scan(&firstSeen); err != nil ||
		!firstSeen.Equal(clock.Truncate(time.Microsecond)) {
		t.Errorf("u3 first seen %v (%v), want now", firstSeen, err)
	}
	// u1 reported in the treatment, twice and then again: one conflict;
	// u4, new, reported in both arms at once: recorded in the earlier one
	// and counted.
	other := []experiments.Exposure{
		{UnitID: "u1", ArmIndex: arm(1), At: at(0)},
		{UnitID: "u1", ArmIndex: arm(1), At: at(0)},
		{UnitID: "u4", ArmIndex: arm(1), At: at(-time.Second)},
		{UnitID: "u4", ArmIndex: arm(0), At: at(0)},
	}
	if got, err := e.exp.RecordExposures(e.ctx, e.org, "local", other); err != nil || got != (experiments.Recorded{Inserted: 1, Duplicates: 3, Conflicts: 2}) {
		t.Errorf("reports in other arms: %+v, %v", got, err)
	}
	if got, err := e.exp.RecordExposures(e.ctx, e.org, "local", other[:1]); err != nil || got != (experiments.Recorded{Duplicates: 1}) {
		t.Errorf("u1 in the other arm once more: %+v, %v", got, err)
	}
	if e.recorded(t, "local", "u1") != 0 || e.recorded(t, "local", "u4") != 1 {
		t.Errorf("recorded arms u1 %d, u4 %d", e.recorded(t, "local", "u1"), e.recorded(t, "local", "u4"))
	}
	if g, _ := e.exp.Get(e.ctx, e.org, "local"); g.Conflicts != 2 {
		t.Errorf("the experiment counts %d conflicts, want 2", g.Conflicts)
	}
	// Assign agrees with what was recorded.
	if as, err := e.exp.Assign(e.ctx, e.org, "local", []string{"u1", "u4"}); err != nil || as[0].ArmIndex != 0 || as[1].ArmIndex != 1 {
		t.Errorf("assign after the reports: %+v, %v", as, err)
	}

	// Before the phase began: not recorded.
	if got, err := e.exp.RecordExposures(e.ctx, e.org, "local", []experiments.Exposure{
		{UnitID: "early", ArmIndex: arm(0), At: at(-time.Hour)},
	}); err != nil || got != (experiments.Recorded{EarlierPhase: 1}) || e.recorded(t, "local", "early") != -1 {
		t.Errorf("an exposure before the start: %+v, %v", got, err)
	}

	// Refused whole, each bad field named.
	_, err = e.exp.RecordExposures(e.ctx, e.org, "local", []experiments.Exposure{
		{UnitID: "fine", ArmIndex: arm(0), At: at(0)},
		{UnitID: "", ArmIndex: arm(0), At: at(0)},
		{UnitID: "nul\x00", ArmIndex: arm(0), At: at(0)},
		{UnitID: "u9", At: at(0)},
		{UnitID: "u9", ArmIndex: arm(0)},
		{UnitID: "u9", ArmIndex: arm(0), At: at(time.Hour)},
	})
	var invalid *errs.Invalid
	if !errors.As(err, &invalid) {
		t.Fatalf("a malformed batch: %v", err)
	}
	for _, f := range []string{"exposures[1].unit_id", "exposures[2].unit_id", "exposures[3].arm_index", "exposures[4].at", "exposures[5].at"} {
		if invalid.ByField()[f] == "" {
			t.Errorf("no message for %s: %v", f, invalid.ByField())
		}
	}
	_, err = e.exp.RecordExposures(e.ctx, e.org, "local", []experiments.Exposure{
		{UnitID: "fine", ArmIndex: arm(0), At: at(0)}, {UnitID: "u9", ArmIndex: arm(2), At: at(0)}})
	if !errors.As(err, &invalid) || invalid.ByField()["exposures[1].arm_index"] == "" {
		t.Errorf("an arm the experiment lacks: %v", err)
	}
	if e.recorded(t, "local", "fine") != -1 {
		t.Error("a refused batch recorded an exposure")
	}
	if _, err := e.exp.RecordExposures(e.ctx, e.org, "local", nil); !errors.As(err, &invalid) {
		t.Errorf("an empty batch: %v", err)
	}

	// Another organisation's key is not found; an ended experiment refuses.
	if _, err := e.exp.RecordExposures(e.ctx, uuid.New(), "local", batch); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation: %v", err)
	}
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "local", experiments.Completed, "inconclusive", ""); err != nil {
		t.Fatal(err)
	}
	var conflict *errs.Conflict
	if _, err := e.exp.RecordExposures(e.ctx, e.org, "local", batch); !errors.As(err, &conflict) {
		t.Errorf("an ended experiment: %v", err)
	}
}

// The configuration a client assigns from: the arms with what to call,
// and a count of changes that moves with every change and not otherwise.
func TestConfig(t *testing.T) {
	e := newEnv(t)
	e.running(t, experiments.NewExperiment{Key: "conf"})
	c, err := e.exp.Config(e.ctx, e.org, "conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != experiments.Running || c.Seed != "conf" || c.Phase != 1 || c.Coverage != 1 || len(c.Arms) != 2 ||
		c.Weights[0] != 0.5 || c.Arms[1].Model != "ft:gpt-4o-mini:acme::b" || c.Arms[1].Version != "1.1.0" || !c.Arms[1].Served ||
		c.PhaseStartedAt == nil {
		t.Errorf("config %+v", c)
	}
	// Feedback, results and a conflict count do not change it.
	if _, err := e.pool.Exec(e.ctx, `UPDATE experiments SET conflicts = conflicts + 1, updated_at = now()`); err != nil {
		t.Fatal(err)
	}
	if again, err := e.exp.Config(e.ctx, e.org, "conf"); err != nil || again.ConfigVersion != c.ConfigVersion {
		t.Errorf("after a conflict was counted: %d, was %d (%v)", again.ConfigVersion, c.ConfigVersion, err)
	}
	if _, err := e.exp.SetTraffic(e.ctx, admin, e.org, "conf", experiments.Traffic{Weights: []float64{0.25, 0.75}}); err != nil {
		t.Fatal(err)
	}
	after, err := e.exp.Config(e.ctx, e.org, "conf")
	if err != nil || after.ConfigVersion <= c.ConfigVersion || after.Weights[1] != 0.75 {
		t.Errorf("after the weights changed: %+v (%v)", after, err)
	}
	if _, err := e.exp.Config(e.ctx, uuid.New(), "conf"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation: %v", err)
	}
}
