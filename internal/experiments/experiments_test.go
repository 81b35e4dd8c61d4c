package experiments_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const base = "meta-llama/Llama-3.1-8B-Instruct"

var admin = audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}

type env struct {
	ctx  context.Context
	pool *pgxpool.Pool
	reg  *models.Service
	exp  *experiments.Service
	org  uuid.UUID
}

// newEnv gives a test its own database, with a pool wide enough for many
// callers at once, and the registry and experiments services on it.
func newEnv(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	_, url := pgtest.NewDBURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var org uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO users (id, org_id, email, password_hash, role) VALUES ($1, $2, $3, 'x', 'admin')", admin.ID, org, admin.Label); err != nil {
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
	srv.Attempts, srv.RetryDelay = 2, time.Millisecond
	reg := models.New(pool, jobs, srv, nil)
	return env{ctx: ctx, pool: pool, reg: reg, exp: experiments.New(pool, reg), org: org}
}

func (e env) register(t testing.TB, version, kind, path string) models.Version {
	t.Helper()
	in := models.NewVersion{Name: "support", Version: version, ModelID: path, Kind: kind}
	if kind == models.KindLoRA {
		in.BaseModel = base
	}
	v, err := e.reg.Register(e.ctx, admin, e.org, in)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// recorded is the arm stored for a unit in the experiment's first phase,
// or -1 when none is.
func (e env) recorded(t *testing.T, key, unit string) int {
	t.Helper()
	arm := -1
	err := e.pool.QueryRow(e.ctx, `SELECT coalesce((SELECT x.arm FROM experiment_exposures x JOIN experiments ex ON ex.id = x.experiment_id
		WHERE ex.key = $1 AND x.unit_id = $2 AND x.phase = 1), -1)`, key, unit).Scan(&arm)
	if err != nil {
		t.Fatal(err)
	}
	return arm
}

// unitInside finds a new unit id (one per round) the coverage takes in
// (inside true) or leaves out, by the experiment's own hash.
func unitInside(seed string, coverage float64, inside bool, round int) string {
	for i := 0; ; i++ {
		u := fmt.Sprintf("unit-%d-%d", round, i)
		if (experiments.Choose(experiments.Hash(seed, u), coverage, []float64{0.5, 0.5}) >= 0) == inside {
			return u
		}
	}
}

// Fifty callers ask at once for the first assignment of one new unit: each
// answer is the arm recorded for it, in the experiment, whatever the
// coverage; a unit the coverage leaves out is answered the control by all
// and recorded nowhere. Batches that share units agree with one another
// the same way.
func TestAssignConcurrentFirstExposure(t *testing.T) {
	e := newEnv(t)
	v1 := e.register(t, "1.0.0", models.KindFull, "ft:gpt-4o-mini:acme::a")
	v2 := e.register(t, "1.1.0", models.KindFull, "ft:gpt-4o-mini:acme::b")
	for _, coverage := range []float64{1, 0.6} {
		key := fmt.Sprintf("race-%.0f", 100*coverage)
		if _, err := e.exp.Create(e.ctx, admin, e.org, experiments.NewExperiment{Key: key, ControlModelID: v1.ID, TreatmentModelID: v2.ID,
			Coverage: &coverage}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.exp.SetStatus(e.ctx, admin, e.org, key, experiments.Running, "", ""); err != nil {
			t.Fatal(err)
		}
		for round := range 5 {
			units := []string{unitInside(key, coverage, true, round)}
			if coverage < 1 {
				units = append(units, unitInside(key, coverage, false, round))
			}
			for _, unit := range units {
				answers := assignAtOnce(t, e, key, 50, func(int) []string { return []string{unit} })
				want := e.recorded(t, key, unit)
				for i, as := range answers {
					a := as[0]
					if want < 0 {
						if a.InExperiment || a.Arm != "control" {
							t.Errorf("%s, caller %d: %+v for a unit outside the coverage", unit, i, a)
						}
					} else if !a.InExperiment || a.ArmIndex != want {
						t.Errorf("coverage %v, %s, caller %d: %+v, recorded arm %d", coverage, unit, i, a, want)
					}
				}
				if inside := unit == units[0]; inside != (want >= 0) {
					t.Errorf("coverage %v, %s: recorded arm %d", coverage, unit, want)
				}
			}
		}
		// Batches overlapping in their units, the same unit twice in one.
		answers := assignAtOnce(t, e, key, 20, func(i int) []string {
			ids := []string{fmt.Sprintf("batch-%d", i), fmt.Sprintf("batch-%d", i)}
			for j := range 30 {
				ids = append(ids, fmt.Sprintf("shared-%d", j))
			}
			return ids
		})
		for i, as := range answers {
			for _, a := range as {
				want := e.recorded(t, key, a.UnitID)
				if a.InExperiment != (want >= 0) || want >= 0 && a.ArmIndex != want || want < 0 && a.ArmIndex != 0 {
					t.Errorf("coverage %v, batch %d: %+v, recorded arm %d", coverage, i, a, want)
				}
			}
		}
	}
}

// assignAtOnce has n callers ask for their units' assignments together.
func assignAtOnce(t *testing.T, e env, key string, n int, units func(int) []string) [][]experiments.Assignment {
	t.Helper()
	out := make([][]experiments.Assignment, n)
	failed := make([]error, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ids := units(i)
			ready.Done()
			<-start
			out[i], failed[i] = e.exp.Assign(e.ctx, e.org, key, ids)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for i, err := range failed {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	return out
}

// deploy puts a version under an alias on a target and carries the
// deployment out as the worker would.
func (e env) deploy(t testing.TB, v models.Version, alias, target string) models.Deployment {
	t.Helper()
	d, err := e.reg.Deploy(e.ctx, admin, e.org, v.ID, models.DeployRequest{Alias: alias, Target: target, Reason: "next version"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Advance(e.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	return d
}

func (e env) target(t testing.TB, name, url string) {
	t.Helper()
	if _, err := e.reg.Serving.Create(e.ctx, admin, e.org, serving.NewTarget{Name: name, Kind: serving.KindVLLM, BaseURL: url}); err != nil {
		t.Fatal(err)
	}
}

func (e env) create(t testing.TB, key string, control, treatment models.Version) {
	t.Helper()
	if _, err := e.exp.Create(e.ctx, admin, e.org, experiments.NewExperiment{Key: key, Name: "Support " + key, ControlModelID: control.ID,
		TreatmentModelID: treatment.ID}); err != nil {
		t.Fatal(err)
	}
}

// checkAssignments assigns units and checks every answer names a model the
// stand-in lists at that moment, at its address.
func (e env) checkAssignments(t *testing.T, key string, vllm *vllmtest.Server, units int) map[string]int {
	t.Helper()
	ids := make([]string, units)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-user-%d", key, i)
	}
	as, err := e.exp.Assign(e.ctx, e.org, key, ids)
	if err != nil {
		t.Fatal(err)
	}
	loaded := vllm.Loaded()
	arms := map[string]int{}
	for _, a := range as {
		if !slices.Contains(loaded, a.Model) || a.BaseURL != vllm.URL {
			t.Fatalf("%s is sent to %s at %s; the server lists %v", a.UnitID, a.Model, a.BaseURL, loaded)
		}
		arms[a.Arm]++
	}
	return arms
}

// The scenario: 1.0.0, then 1.1.0, deployed to production on a
// vLLM server, 1.0.0's adapter unloaded after the grace period; an
// experiment 1.0.0 against 1.1.0 starts with both loaded (1.0.0 again,
// recorded in the history under the experiment), and every assignment
// names a model the server lists. While the experiment runs or is paused,
// nothing it calls is unloaded, though production moves on; once it ends,
// what it alone held is unloaded.
func TestStartLoadsWhatArmsNeed(t *testing.T) {
	e := newEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, "gpu-1", vllm.URL)
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	v3 := e.register(t, "1.2.0", models.KindLoRA, "/adapters/support-3")
	d1 := e.deploy(t, v1, "production", "gpu-1")
	d2 := e.deploy(t, v2, "production", "gpu-1")
	if err := e.reg.Unload(e.ctx, d1.ID); err != nil { // the grace period is over
		t.Fatal(err)
	}
	if got := vllm.Loaded(); len(got) != 1 || got[0] != d2.ServedName {
		t.Fatalf("before the experiment the server lists %v", got)
	}

	e.create(t, "support-v3", v1, v2)
	started, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3", experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if started.Status != experiments.Running || started.Arms[1].DeploymentID == nil || *started.Arms[1].DeploymentID != d2.ID {
		t.Fatalf("started %+v", started)
	}
	control, err := e.reg.GetDeployment(e.ctx, e.org, *started.Arms[0].DeploymentID)
	if err != nil {
		t.Fatal(err)
	}
	if control.VersionID != v1.ID || control.Action != "load" || control.Alias != "support-v3" || control.Status != "succeeded" ||
		!strings.Contains(control.Reason, "control arm") || control.AliasMovedAt != nil {
		t.Errorf("the control's load %+v", control)
	}
	if got := vllm.Loaded(); len(got) != 2 || !slices.Contains(got, control.ServedName) || vllm.Loads() != 3 {
		t.Errorf("after the start the server lists %v (%d loads)", got, vllm.Loads())
	}
	var alias, actor, reason string
	if err := e.pool.QueryRow(e.ctx, `SELECT alias, actor_label, reason FROM model_history WHERE deployment_id = $1 AND action = 'loaded'`,
		control.ID).Scan(&alias, &actor, &reason); err != nil || alias != "support-v3" || actor != admin.Label || !strings.Contains(reason, `"Support support-v3"`) {
		t.Errorf("the load's history: %q %q %q (%v)", alias, actor, reason, err)
	}
	// Production still names 1.1.0; the load moved no alias.
	if r, err := e.reg.Resolve(e.ctx, e.org, "support", "production"); err != nil || r.Version != "1.1.0" || r.Model != d2.ServedName {
		t.Errorf("production after the start: %+v, %v", r, err)
	}
	if arms := e.checkAssignments(t, "support-v3", vllm, 400); arms["control"] < 150 || arms["treatment"] < 150 {
		t.Errorf("arms %v", arms)
	}

	// Production moves on to 1.2.0; the unload of 1.1.0's adapter, due
	// after the grace period, leaves it loaded for the treatment.
	e.deploy(t, v3, "production", "gpu-1")
	if err := e.reg.Unload(e.ctx, d2.ID); err != nil {
		t.Fatal(err)
	}
	e.checkAssignments(t, "support-v3", vllm, 400)
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3", experiments.Paused, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Unload(e.ctx, d2.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(vllm.Loaded(), d2.ServedName) {
		t.Fatal("a paused experiment's treatment was unloaded")
	}
	// Resumed: the server is asked again and both are still there.
	loads := vllm.Loads()
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3", experiments.Running, "", ""); err != nil {
		t.Fatal(err)
	}
	if vllm.Loads() != loads {
		t.Errorf("resuming loaded %d adapters", vllm.Loads()-loads)
	}
	e.checkAssignments(t, "support-v3", vllm, 400)

	// The server restarts and forgets the control's adapter. A second
	// experiment on 1.0.0 finds it gone when it starts and loads it again;
	// the first one's assignments are refused, naming the arm, rather than
	// sent to a model the server does not list, until it is started again.
	forget(t, vllm.URL, control.ServedName)
	e.create(t, "support-v3b", v1, v2)
	second, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3b", experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if *second.Arms[0].DeploymentID == control.ID {
		t.Fatal("the second experiment is called at the forgotten adapter")
	}
	_, err = e.exp.Assign(e.ctx, e.org, "support-v3", []string{"support-v3-user-1", "support-v3-user-2", "support-v3-user-3"})
	var conflict *errs.Conflict
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "control arm's version 1.0.0") {
		t.Errorf("assigning while the control is gone: %v", err)
	}
	for _, status := range []string{experiments.Paused, experiments.Running} {
		if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3", status, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	e.checkAssignments(t, "support-v3", vllm, 400)
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3b", experiments.Cancelled, "", ""); err != nil {
		t.Fatal(err)
	}

	// Ended: what the arms were called at is unloaded after the grace
	// period, each by its own job.
	running, err := e.exp.Get(e.ctx, e.org, "support-v3")
	if err != nil {
		t.Fatal(err)
	}
	held := []uuid.UUID{*running.Arms[0].DeploymentID, *running.Arms[1].DeploymentID}
	if held[1] != d2.ID {
		t.Errorf("the treatment is called at %s, want %s", held[1], d2.ID)
	}
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "support-v3", experiments.Completed, "treatment", ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range held {
		if n := count(t, e, `SELECT count(*) FROM river_job WHERE kind = 'model_unload' AND scheduled_at > now() + interval '4 minutes'
			AND args->>'deployment_id' = $1`, id.String()); n == 0 {
			t.Errorf("no unload job for %s after the end", id)
		}
		if err := e.reg.Unload(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := vllm.Loaded(); len(got) != 1 || !strings.HasPrefix(got[0], "support-1.2.0-") {
		t.Errorf("after the end the server lists %v, want 1.2.0's adapter only", got)
	}
}

// An arm that cannot be served where it will be called is refused by name
// (arm and version), and the experiment stays a draft: an adapter the
// server refuses to load (the failed load in the history; what was loaded
// for the other arm goes after the grace period unless a new start uses
// it), and adapters no target that loads adapters has ever served.
func TestStartRefusesArmThatCannotBeServed(t *testing.T) {
	e := newEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, "gpu-1", vllm.URL)
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	v3 := e.register(t, "1.2.0", models.KindLoRA, "/adapters/support-3")
	e.deploy(t, v2, "production", "gpu-1")

	// Both arms are served nowhere; the server loads the control and
	// refuses the treatment.
	e.create(t, "broken", v1, v3)
	vllm.Script("/v1/load_lora_adapter", 200, 400)
	_, err := e.exp.SetStatus(e.ctx, admin, e.org, "broken", experiments.Running, "", "")
	var conflict *errs.Conflict
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "treatment arm") || !strings.Contains(conflict.Message, "1.2.0") ||
		!strings.Contains(conflict.Message, "400 Bad Request") || strings.Contains(conflict.Message, "CUDA") {
		t.Fatalf("a treatment the server refuses: %v", err)
	}
	if got, _ := e.exp.Get(e.ctx, e.org, "broken"); got.Status != experiments.Draft || got.Arms[0].DeploymentID != nil {
		t.Errorf("after the refusal: %+v", got)
	}
	if n := count(t, e, `SELECT count(*) FROM model_history WHERE action = 'deployment_failed' AND alias = 'broken'`); n != 1 {
		t.Errorf("%d failed loads in the history, want 1", n)
	}
	var control uuid.UUID
	if err := e.pool.QueryRow(e.ctx, `SELECT id FROM deployments WHERE action = 'load' AND version_id = $1 AND status = 'succeeded'`, v1.ID).
		Scan(&control); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, `SELECT count(*) FROM river_job WHERE kind = 'model_unload' AND args->>'deployment_id' = $1`, control.String()); n != 1 {
		t.Errorf("%d unload jobs for the control's load, want 1", n)
	}
	// The server takes it the second time; the control's load is used
	// again, so its unload, when due, leaves it.
	loads := vllm.Loads()
	started, err := e.exp.SetStatus(e.ctx, admin, e.org, "broken", experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if *started.Arms[0].DeploymentID != control || vllm.Loads() != loads+1 {
		t.Errorf("the second start: %+v, %d loads", started.Arms, vllm.Loads()-loads)
	}
	if err := e.reg.Unload(e.ctx, control); err != nil {
		t.Fatal(err)
	}
	e.checkAssignments(t, "broken", vllm, 50)

	// Another model whose adapters were never deployed anywhere.
	other := func(version, path string) models.Version {
		v, err := e.reg.Register(e.ctx, admin, e.org, models.NewVersion{Name: "billing", Version: version, ModelID: path, BaseModel: base, Kind: models.KindLoRA})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	b1, b2 := other("1.0.0", "/adapters/billing-1"), other("2.0.0", "/adapters/billing-2")
	e.create(t, "billing", b1, b2)
	_, err = e.exp.SetStatus(e.ctx, admin, e.org, "billing", experiments.Running, "", "")
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "control arm's version 1.0.0") || !strings.Contains(conflict.Message, "deploy the version first") {
		t.Errorf("adapters served nowhere: %v", err)
	}
}

// An unload and a start racing for the same adapter: either the start
// holds it first and it stays loaded, or the unload goes first and the
// start loads the version again or is refused. A running experiment is
// never left calling an adapter the server does not list.
func TestStartRacesUnload(t *testing.T) {
	e := newEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, "gpu-1", vllm.URL)
	a := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	b := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	for i := range 8 {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		left := e.deploy(t, from, "production", "gpu-1")
		e.deploy(t, to, "production", "gpu-1")
		key := fmt.Sprintf("race-%d", i)
		e.create(t, key, from, to)
		var wg sync.WaitGroup
		var startErr, unloadErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, startErr = e.exp.SetStatus(e.ctx, admin, e.org, key, experiments.Running, "", "")
		}()
		go func() {
			defer wg.Done()
			unloadErr = e.reg.Unload(e.ctx, left.ID)
		}()
		wg.Wait()
		if unloadErr != nil {
			t.Fatal(unloadErr)
		}
		var conflict *errs.Conflict
		if startErr != nil && !errors.As(startErr, &conflict) {
			t.Fatal(startErr)
		}
		got, err := e.exp.Get(e.ctx, e.org, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == experiments.Running {
			e.checkAssignments(t, key, vllm, 100)
		} else if startErr == nil {
			t.Errorf("%s: started without error but is %s", key, got.Status)
		}
		if _, err := e.exp.SetStatus(e.ctx, admin, e.org, key, experiments.Cancelled, "", ""); err != nil {
			t.Fatal(err)
		}
	}
}

func count(t *testing.T, e env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// forget makes a vLLM server drop an adapter behind Curate's back, as a
// restart does.
func forget(t *testing.T, baseURL, name string) {
	t.Helper()
	resp, err := http.Post(baseURL+"/v1/unload_lora_adapter", "application/json", strings.NewReader(`{"lora_name":"`+name+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("unloading %s behind Curate's back: %s", name, resp.Status)
	}
}
