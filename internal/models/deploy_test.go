package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/internal/webhook"
)

const base = "meta-llama/Llama-3.1-8B-Instruct"

type deployEnv struct {
	ctx  context.Context
	pool *pgxpool.Pool
	svc  *models.Service
	org  uuid.UUID
}

func newDeployEnv(t *testing.T) deployEnv {
	t.Helper()
	ctx, pool, _, org, _ := setup(t)
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
	return deployEnv{ctx: ctx, pool: pool, svc: models.New(pool, jobs, srv, nil), org: org}
}

func (e deployEnv) register(t *testing.T, version, kind, path string) models.Version {
	t.Helper()
	v, err := e.svc.Register(e.ctx, admin, e.org, models.NewVersion{Name: "support", Version: version, ModelID: path, BaseModel: base, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e deployEnv) target(t *testing.T, in serving.NewTarget) {
	t.Helper()
	if _, err := e.svc.Serving.Create(e.ctx, admin, e.org, in); err != nil {
		t.Fatal(err)
	}
}

func (e deployEnv) deployment(t *testing.T, id uuid.UUID) models.Deployment {
	t.Helper()
	d, err := e.svc.GetDeployment(e.ctx, e.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (e deployEnv) resolve(t *testing.T) models.Resolved {
	t.Helper()
	r, err := e.svc.Resolve(e.ctx, e.org, "support", "production")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A deployment to vLLM loads the adapter exactly once however often its
// worker is killed, moves the alias only once the server lists it, unloads
// the old adapter later, and a rollback puts the earlier one back under a
// new name.
func TestDeployToVLLM(t *testing.T) {
	e := newDeployEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: vllm.URL})
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")

	d1, err := e.svc.Deploy(e.ctx, admin, e.org, v1.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "first adapter"})
	if err != nil {
		t.Fatal(err)
	}
	if d1.Status != "queued" || !strings.HasPrefix(d1.ServedName, "support-1.0.0-") {
		t.Fatalf("deployment %+v", d1)
	}
	// The worker dies after the server loaded the adapter and before the
	// step was stored; the next attempt finds it listed and does not load
	// it again.
	killed, kill := context.WithCancel(e.ctx)
	vllm.AfterLoad = func(string) { kill() }
	if err := e.svc.Advance(killed, d1.ID); err == nil {
		t.Fatal("the killed attempt went through")
	}
	vllm.AfterLoad = nil
	if d := e.deployment(t, d1.ID); d.Status != "running" || d.LoadedAt != nil {
		t.Fatalf("after the kill: %+v", d)
	}
	// The next attempt dies while checking the server lists the adapter
	// (the server does not answer until the worker is gone).
	vllm.Script("/v1/models", 200, 0)
	// Room for the steps before it on a loaded machine: the first listing
	// and the load are each stored.
	verifying, stop := context.WithTimeout(e.ctx, 2*time.Second)
	err = e.svc.Advance(verifying, d1.ID)
	stop()
	if d := e.deployment(t, d1.ID); err == nil || d.LoadedAt == nil || d.VerifiedAt != nil {
		t.Fatalf("after the kill while verifying (%v): %+v", err, d)
	}
	if _, err := e.svc.Resolve(e.ctx, e.org, "support", "production"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("the alias exists before the deployment finished: %v", err)
	}
	for range 2 { // once to finish, once more to show an ended one stays
		if err := e.svc.Advance(e.ctx, d1.ID); err != nil {
			t.Fatal(err)
		}
	}
	if vllm.Loads() != 1 {
		t.Errorf("%d loads, want 1", vllm.Loads())
	}
	if d := e.deployment(t, d1.ID); d.Status != "succeeded" || d.LoadedAt == nil || d.VerifiedAt == nil || d.AliasMovedAt == nil {
		t.Errorf("deployment %+v", d)
	}
	if r := e.resolve(t); r.Version != "1.0.0" || r.Model != d1.ServedName || r.BaseURL != vllm.URL || r.Target != "gpu-1" || r.ModelID != "/adapters/support-1" {
		t.Errorf("resolved %+v", r)
	}

	// Two deployments of one alias at once: the second is refused.
	d2, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "better on billing questions"})
	if err != nil {
		t.Fatal(err)
	}
	var conflict *errs.Conflict
	if _, err := e.svc.Deploy(e.ctx, admin, e.org, v1.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "again"}); !errors.As(err, &conflict) {
		t.Errorf("a second deployment of production while one runs: %v", err)
	}
	// The worker dies after the load again, and the server's list lags
	// behind: the next attempt asks to load, vLLM answers 400 "already
	// loaded", and the list, asked again, agrees. Still one load.
	loadsBefore := vllm.Loads()
	killed, kill = context.WithCancel(e.ctx)
	vllm.AfterLoad = func(string) { kill() }
	if err := e.svc.Advance(killed, d2.ID); err == nil {
		t.Fatal("the killed attempt went through")
	}
	vllm.AfterLoad = nil
	vllm.HideAdapters(1)
	// The server fails twice, then answers: retried with backoff.
	vllm.Script("/v1/load_lora_adapter", http.StatusInternalServerError, http.StatusServiceUnavailable)
	if err := e.svc.Advance(e.ctx, d2.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); r.Version != "1.1.0" || r.Model != d2.ServedName {
		t.Errorf("resolved after the second deployment %+v", r)
	}
	if n := vllm.Loads() - loadsBefore; n != 1 {
		t.Errorf("the second deployment loaded %d times, want 1", n)
	}
	var result string
	if err := e.pool.QueryRow(e.ctx, "SELECT result FROM model_history WHERE deployment_id = $1 AND action = 'loaded'", d2.ID).Scan(&result); err != nil ||
		result != "already loaded as "+d2.ServedName {
		t.Errorf("the second load's result %q (%v)", result, err)
	}
	if v, _ := e.svc.Get(e.ctx, e.org, v1.ID); v.Status != models.StatusDeprecated {
		t.Errorf("the version production left is %s", v.Status)
	}
	var unloads int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = 'model_unload' AND scheduled_at > now() + interval '4 minutes'
		AND args->>'deployment_id' = $1`, d1.ID.String()).Scan(&unloads); err != nil || unloads != 1 {
		t.Errorf("unload of the first adapter after the grace period: %d jobs (%v)", unloads, err)
	}
	// The unload job runs; run again, the server's 404 means already gone.
	for range 2 {
		if err := e.svc.Unload(e.ctx, d1.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := vllm.Loaded(); len(got) != 1 || got[0] != d2.ServedName || vllm.Unloads() != 1 {
		t.Errorf("served after the unload: %v (%d unloads)", got, vllm.Unloads())
	}

	// Rollback: the version production held before, under a new name.
	back, err := e.svc.Rollback(e.ctx, admin, e.org, v2.ID, models.RollbackRequest{Alias: "production", Reason: "complaints about tone"})
	if err != nil {
		t.Fatal(err)
	}
	if back.VersionID != v1.ID || back.Action != "rollback" || back.ServedName == d1.ServedName {
		t.Errorf("rollback %+v", back)
	}
	if err := e.svc.Advance(e.ctx, back.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); r.Version != "1.0.0" || r.Model != back.ServedName {
		t.Errorf("resolved after rollback %+v", r)
	}
	if vllm.Loads() != 3 {
		t.Errorf("%d loads after the rollback, want 3", vllm.Loads())
	}

	h, _, err := e.svc.History(e.ctx, e.org, v1.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var moves []string
	for _, x := range h {
		if x.Action == "alias_moved" {
			moves = append(moves, x.FromVersion+"→"+x.ToVersion+" "+x.Reason)
		}
	}
	if want := "1.1.0→1.0.0 complaints about tone, 1.0.0→1.1.0 better on billing questions, →1.0.0 first adapter"; strings.Join(moves, ", ") != want {
		t.Errorf("alias moves %q\nwant %q", strings.Join(moves, ", "), want)
	}
}

// Refusals: an archived version, a full model on a LoRA server, a target
// that refuses the adapter (with its text kept out of the message), and a
// rollback with nothing before it. The alias stays where it was.
func TestDeployRefusals(t *testing.T) {
	e := newDeployEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: vllm.URL})
	full := e.register(t, "1.0.0", models.KindFull, "tandem-assist-v2")
	lora := e.register(t, "1.1.0", models.KindLoRA, "/adapters/missing")

	_, err := e.svc.Deploy(e.ctx, admin, e.org, full.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "x"})
	if f := fields(err); !strings.Contains(f["target"], "full model") {
		t.Errorf("a full model on vLLM: %v", err)
	}
	_, err = e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "Prod!", Target: "nowhere", Reason: ""})
	if f := fields(err); f["alias"] == "" || f["reason"] == "" {
		t.Errorf("bad alias and no reason: %v", err)
	}
	_, err = e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "production", Target: "nowhere", Reason: "x"})
	if f := fields(err); !strings.Contains(f["target"], "no serving target") {
		t.Errorf("an unknown target: %v", err)
	}
	_, err = e.svc.Rollback(e.ctx, admin, e.org, lora.ID, models.RollbackRequest{Alias: "production", Reason: "x"})
	if f := fields(err); !strings.Contains(f["alias"], "nothing to roll back") {
		t.Errorf("a rollback with no deployment: %v", err)
	}

	// vLLM cannot read the adapter: a 400 that retrying will not change.
	vllm.Script("/v1/load_lora_adapter", http.StatusBadRequest)
	d, err := e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "try it"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.svc.Advance(e.ctx, d.ID)
	if err == nil || !models.Permanent(err) {
		t.Fatalf("a refused load: %v (permanent %v)", err, models.Permanent(err))
	}
	if err := e.svc.Fail(e.ctx, d.ID, err); err != nil {
		t.Fatal(err)
	}
	got := e.deployment(t, d.ID)
	if got.Status != "failed" || got.Error != "The server answered 400 Bad Request." {
		t.Errorf("failed deployment %+v", got)
	}
	if _, err := e.svc.Resolve(e.ctx, e.org, "support", "production"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("a failed deployment moved the alias: %v", err)
	}

	// A server that is not there: retried, then failed with a sentence.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	e.target(t, serving.NewTarget{Name: "gone", Kind: serving.KindVLLM, BaseURL: gone.URL})
	d, err = e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "candidate", Target: "gone", Reason: "try the spare"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.svc.Advance(e.ctx, d.ID)
	if err == nil || models.Permanent(err) {
		t.Fatalf("an unreachable server: %v (permanent %v), want an error worth retrying", err, models.Permanent(err))
	}
	if err := e.svc.Fail(e.ctx, d.ID, err); err != nil {
		t.Fatal(err)
	}
	if got := e.deployment(t, d.ID); got.Status != "failed" || got.Error != "The server refused the connection." {
		t.Errorf("unreachable target: %+v", got)
	}

	archived := models.StatusArchived
	if _, err := e.svc.Update(e.ctx, admin, e.org, lora.ID, models.Patch{Status: &archived}); err != nil {
		t.Fatal(err)
	}
	var conflict *errs.Conflict
	if _, err := e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "x"}); !errors.As(err, &conflict) {
		t.Errorf("an archived version: %v", err)
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM deployments").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d deployments stored, want the two that failed (%v)", n, err)
	}
}

// A webhook target gets one signed message per deployment; its 2xx is the
// deployment done, anything else fails it visibly.
func TestDeployToWebhook(t *testing.T) {
	e := newDeployEnv(t)
	secret := webhook.NewSecret()
	var mu sync.Mutex
	var got []map[string]any
	status := http.StatusNoContent
	pipeline := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var msg map[string]any
		_ = json.Unmarshal(body, &msg)
		mu.Lock()
		got = append(got, msg)
		code := status
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer pipeline.Close()
	e.target(t, serving.NewTarget{Name: "cd", Kind: serving.KindWebhook, BaseURL: pipeline.URL, APIKey: secret})
	v1 := e.register(t, "1.0.0", models.KindFull, "ft:gpt-4o-mini:acme::a")
	v2 := e.register(t, "1.1.0", models.KindFull, "ft:gpt-4o-mini:acme::b")

	d, err := e.svc.Deploy(e.ctx, admin, e.org, v1.ID, models.DeployRequest{Alias: "production", Target: "cd", Reason: "ship"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); r.Model != "ft:gpt-4o-mini:acme::a" || r.Target != "cd" {
		t.Errorf("resolved %+v", r)
	}
	mu.Lock()
	status = http.StatusForbidden
	mu.Unlock()
	d2, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, models.DeployRequest{Alias: "production", Target: "cd", Reason: "next"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.svc.Advance(e.ctx, d2.ID)
	if !models.Permanent(err) {
		t.Fatalf("a pipeline's 403: %v", err)
	}
	if err := e.svc.Fail(e.ctx, d2.ID, err); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); r.Version != "1.0.0" {
		t.Errorf("a refused deployment moved production to %s", r.Version)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0]["version"] != "1.0.0" || got[0]["previous_version"] != nil || got[1]["previous_version"] != "1.0.0" || got[1]["alias"] != "production" {
		t.Errorf("messages %v", got)
	}
}

// A deploy of the version an alias already holds on the same target is a
// no-op that answers the deployment that put it there; identical deploys
// asked for at once, or 30 ms apart, are one deployment and one load. A
// target that lost the adapter since (restarted) gets it again.
func TestRedeployLoadsOnce(t *testing.T) {
	e := newDeployEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: vllm.URL})
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	req := models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "ship it"}
	first, err := e.svc.Deploy(e.ctx, admin, e.org, v1.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, first.ID); err != nil {
		t.Fatal(err)
	}

	// Twenty identical requests at once for a version the alias does not
	// hold yet: one deployment, which all of them answer.
	answers := deployAtOnce(t, e, 20, v2.ID, req)
	for i, d := range answers {
		if d.ID != answers[0].ID || d.VersionID != v2.ID {
			t.Errorf("request %d answered %+v, want deployment %s", i, d, answers[0].ID)
		}
	}
	if n := e.count(t, "SELECT count(*) FROM deployments WHERE version_id = $1", v2.ID); n != 1 {
		t.Errorf("%d deployments of 1.1.0, want 1", n)
	}
	if err := e.svc.Advance(e.ctx, answers[0].ID); err != nil {
		t.Fatal(err)
	}
	// Again, now that the alias holds it: nothing new, nothing loaded.
	for i, d := range deployAtOnce(t, e, 20, v2.ID, req) {
		if d.ID != answers[0].ID || !d.Unchanged || d.Status != "succeeded" {
			t.Errorf("re-deploy %d answered %+v", i, d)
		}
	}
	// Two re-deploys 30 ms apart, each carried out as a worker would.
	for range 2 {
		d, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Advance(e.ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if d.ID != answers[0].ID || !d.Unchanged {
			t.Errorf("a re-deploy 30 ms after another: %+v", d)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if vllm.Loads() != 2 {
		t.Errorf("%d loads, want 2 (1.0.0 and 1.1.0 once each)", vllm.Loads())
	}
	if n := e.count(t, "SELECT count(*) FROM river_job WHERE kind = 'model_deploy'"); n != 2 {
		t.Errorf("%d deployment jobs, want 2", n)
	}
	if n := e.count(t, "SELECT count(*) FROM model_history WHERE action = 'alias_moved'"); n != 2 {
		t.Errorf("%d alias moves, want 2", n)
	}
	// The same version on another target is a deployment of its own.
	other := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-2", Kind: serving.KindVLLM, BaseURL: other.URL})
	moved, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, models.DeployRequest{Alias: "production", Target: "gpu-2", Reason: "move"})
	if err != nil || moved.Unchanged || moved.ID == answers[0].ID {
		t.Fatalf("1.1.0 to another target: %+v, %v", moved, err)
	}
	if err := e.svc.Advance(e.ctx, moved.ID); err != nil {
		t.Fatal(err)
	}

	// gpu-2 restarts and forgets its adapters: a re-deploy asks it, finds
	// the adapter gone, records so, and loads it again.
	forget(t, other.URL, moved.ServedName)
	again, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, models.DeployRequest{Alias: "production", Target: "gpu-2", Reason: "after the restart"})
	if err != nil || again.Unchanged || again.ID == moved.ID {
		t.Fatalf("a re-deploy on a target that lost the adapter: %+v, %v", again, err)
	}
	if d := e.deployment(t, moved.ID); d.UnloadedAt == nil {
		t.Errorf("the lost adapter's deployment is still recorded as served: %+v", d)
	}
	if err := e.svc.Advance(e.ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	if got := other.Loaded(); len(got) != 1 || got[0] != again.ServedName {
		t.Errorf("gpu-2 serves %v, want %s", got, again.ServedName)
	}
	if r := e.resolve(t); r.Model != again.ServedName || r.Target != "gpu-2" {
		t.Errorf("resolved %+v", r)
	}
}

// deployAtOnce asks for the same deployment n times together.
func deployAtOnce(t *testing.T, e deployEnv, n int, version uuid.UUID, req models.DeployRequest) []models.Deployment {
	t.Helper()
	out := make([]models.Deployment, n)
	failed := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], failed[i] = e.svc.Deploy(e.ctx, admin, e.org, version, req)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range failed {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

func (e deployEnv) count(t *testing.T, query string, args ...any) int {
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

// What a version serves is what its target holds: once an adapter is
// unloaded, the version is served nowhere (its model id, no address), and
// an evaluation cannot call it; the alias holding a version keeps it
// loaded whatever unload job runs.
func TestServedFollowsUnloads(t *testing.T) {
	e := newDeployEnv(t)
	vllm := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: vllm.URL})
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	var ds []models.Deployment
	for _, v := range []models.Version{v1, v2} {
		d, err := e.svc.Deploy(e.ctx, admin, e.org, v.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "next"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Advance(e.ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if s, err := e.svc.Served(e.ctx, e.org, v1.ID); err != nil || s.Model != ds[0].ServedName || s.BaseURL != vllm.URL {
		t.Errorf("1.0.0 before its unload: %+v, %v", s, err)
	}
	if err := e.svc.Unload(e.ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if s, err := e.svc.Served(e.ctx, e.org, v1.ID); err != nil || s.Model != "/adapters/support-1" || s.BaseURL != "" || s.Target != "" {
		t.Errorf("1.0.0 after its unload: %+v, %v", s, err)
	}
	if _, err := e.svc.Chat(e.ctx, e.org, v1.ID); !errors.Is(err, models.ErrNotServed) {
		t.Errorf("chat with an unloaded version: %v", err)
	}
	if c, err := e.svc.Chat(e.ctx, e.org, v2.ID); err != nil || c.Model != ds[1].ServedName || c.BaseURL != vllm.URL+"/v1" {
		t.Errorf("chat with production's version: %+v, %v", c, err)
	}
	// An unload job for what production holds leaves it loaded.
	if err := e.svc.Unload(e.ctx, ds[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := vllm.Loaded(); len(got) != 1 || got[0] != ds[1].ServedName {
		t.Errorf("served after unloading production's adapter: %v", got)
	}
	if d := e.deployment(t, ds[1].ID); d.UnloadedAt != nil {
		t.Errorf("production's deployment recorded as unloaded: %+v", d)
	}
}
