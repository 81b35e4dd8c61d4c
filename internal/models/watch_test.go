package models_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// reloadOf finds the reload the serving check started for a deployment.
func (e deployEnv) reloadOf(t *testing.T, id uuid.UUID) (uuid.UUID, int) {
	t.Helper()
	var reload uuid.UUID
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT coalesce(max(id::text), '00000000-0000-0000-0000-000000000000')::uuid, count(*) FROM deployments WHERE reload_of = $1`, id).Scan(&reload, &n); err != nil {
		t.Fatal(err)
	}
	return reload, n
}

func (e deployEnv) openAlerts(t *testing.T, versionID uuid.UUID) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM alerts WHERE org_id = $1 AND kind = 'serving_missing' AND dedup_key = $2 AND resolved_at IS NULL`,
		e.org, models.KindServingMissing+":"+versionID.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The vLLM server behind production restarts empty. Until the serving
// check asks it, production resolves to what the last check listed; the
// check finds the adapter gone, records it, opens an alert keyed on the
// version and starts a reload, and resolving answers 503 naming the target
// and the adapter until the reload has the server list the version again
// under a new name. The next check settles the alert and loads nothing
// more. A check older than the interval is not trusted; an alias whose
// admin chose the fallback answers its last version still listed, marked.
func TestServingCheckReloadsWhatTheTargetDropped(t *testing.T) {
	e := newDeployEnv(t)
	e.svc.Alerts = alerts.New(e.pool, nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	vllm := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: vllm.URL})
	v1 := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")
	d1, err := e.svc.Deploy(e.ctx, admin, e.org, v1.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, d1.ID); err != nil {
		t.Fatal(err)
	}
	d1 = e.deployment(t, d1.ID)
	if r := e.resolve(t); r.Model != d1.ServedName || r.Fallback {
		t.Fatalf("production before the restart: %+v", r)
	}

	vllm.Restart()
	if err := e.svc.CheckServing(e.ctx); err != nil {
		t.Fatal(err)
	}
	var unavailable *errs.Unavailable
	_, err = e.svc.Resolve(e.ctx, e.org, "support", "production")
	if !errors.As(err, &unavailable) || !strings.Contains(unavailable.Message, "gpu-1") || !strings.Contains(unavailable.Message, d1.ServedName) {
		t.Fatalf("resolving production once the check found the adapter gone: %v", err)
	}
	if d := e.deployment(t, d1.ID); d.UnloadedAt == nil {
		t.Errorf("the dropped deployment is still recorded as served: %+v", d)
	}
	if n := e.openAlerts(t, v1.ID); n != 1 {
		t.Errorf("%d open serving alerts for 1.0.0", n)
	}
	reloadID, n := e.reloadOf(t, d1.ID)
	if n != 1 {
		t.Fatalf("%d reloads of the dropped deployment", n)
	}
	reload := e.deployment(t, reloadID)
	if reload.Action != "reload" || reload.Alias != "production" || reload.VersionID != v1.ID || !strings.Contains(reload.Reason, "stopped listing "+d1.ServedName) ||
		reload.ServedName == d1.ServedName {
		t.Errorf("the reload: %+v", reload)
	}
	// A second check while the reload waits starts no other.
	if err := e.svc.CheckServing(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, n := e.reloadOf(t, d1.ID); n != 1 {
		t.Errorf("%d reloads after a second check", n)
	}

	if err := e.svc.Advance(e.ctx, reloadID); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); r.Model != reload.ServedName || r.Version != "1.0.0" || r.Fallback {
		t.Errorf("production after the reload: %+v (reload %s)", r, reload.ServedName)
	}
	if err := e.svc.CheckServing(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.openAlerts(t, v1.ID); n != 0 || vllm.Loads() != 2 {
		t.Errorf("after the check that found the reload: %d open alerts, %d loads", n, vllm.Loads())
	}

	// A check older than the interval is not trusted.
	if _, err := e.pool.Exec(e.ctx, `UPDATE serving_checks SET checked_at = now() - interval '31 seconds'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Resolve(e.ctx, e.org, "support", "production"); !errors.As(err, &unavailable) || !strings.Contains(unavailable.Message, "last asked") {
		t.Errorf("resolving on a stale check: %v", err)
	}

	// 1.1.0 goes to production; 1.0.0's adapter stays loaded for the
	// grace period. The server drops 1.1.0's alone.
	v2 := e.register(t, "1.1.0", models.KindLoRA, "/adapters/support-2")
	d2, err := e.svc.Deploy(e.ctx, admin, e.org, v2.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "next"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, d2.ID); err != nil {
		t.Fatal(err)
	}
	d2 = e.deployment(t, d2.ID)
	vllm.Drop(d2.ServedName)
	if err := e.svc.CheckServing(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Resolve(e.ctx, e.org, "support", "production"); !errors.As(err, &unavailable) || !strings.Contains(unavailable.Message, d2.ServedName) {
		t.Errorf("resolving without a fallback: %v", err)
	}
	if err := e.svc.SetFallback(e.ctx, admin, e.org, "support", "production", "sometimes"); fields(err)["fallback"] == "" {
		t.Errorf("an unknown fallback: %v", err)
	}
	if err := e.svc.SetFallback(e.ctx, admin, e.org, "support", "staging", models.FallbackLastHealthy); fields(err)["alias"] == "" {
		t.Errorf("the fallback of an alias the model lacks: %v", err)
	}
	if err := e.svc.SetFallback(e.ctx, admin, e.org, "support", "production", models.FallbackLastHealthy); err != nil {
		t.Fatal(err)
	}
	if r := e.resolve(t); !r.Fallback || r.Version != "1.0.0" || r.Model != reload.ServedName {
		t.Errorf("resolving with the fallback: %+v", r)
	}
}
