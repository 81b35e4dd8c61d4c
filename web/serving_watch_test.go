package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// servingDoc is what resolving an alias answers.
type servingDoc struct {
	Version  string `json:"version"`
	Model    string `json:"model"`
	Target   string `json:"target"`
	Fallback bool   `json:"fallback"`
	Detail   string `json:"detail"`
}

// The scenario with the workers running and the serving check
// every 2 s: production (1.0.0) and staging (1.1.0) on a vLLM stand-in,
// and an experiment between them. The stand-in first drops the staging
// adapter alone (and fails the first load after): while it is reloaded,
// the treatment's units are sent to the control's model, flagged, and the
// config names the treatment as not served. Then the stand-in restarts
// empty: production answers 503 naming the target and the adapter, or the
// reloaded adapter; no answer of resolve or assign names a model the
// stand-in does not list once one poll interval (plus the time a loaded
// machine takes to run the check) has passed; each missing adapter is
// loaded once more, as a reload in the history, and an alert opens.
func TestServingTruthWatched(t *testing.T) {
	t.Parallel()
	const poll = 2 * time.Second
	// One interval, and what a check takes to be queued and run on a
	// loaded 2-core machine.
	const allowed = poll + 5*time.Second
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *config.Config) { c.ServingPoll = poll }})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	vllm, v1, v2, staged := servedVersions(t, s, admin, viewer)
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "watched", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/watched/start", nil).Must(t, http.StatusOK)
	loadsBefore := vllm.Loads()

	// A unit of each arm.
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = "unit-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	var batch struct {
		Data []assignmentDoc `json:"data"`
	}
	s.API(assistant, http.MethodPost, "/api/experiments/watched/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &batch)
	unit := map[string]string{}
	var controlModel string
	for _, a := range batch.Data {
		unit[a.Arm] = a.UnitID
		if a.Arm == "control" {
			controlModel = a.Model
		}
	}
	if unit["control"] == "" || unit["treatment"] == "" {
		t.Fatalf("assigned %+v", batch.Data)
	}

	type assignFull struct {
		assignmentDoc
		Fallback  bool   `json:"fallback"`
		NotServed string `json:"not_served"`
	}
	assign := func(u string) (assignFull, int) {
		var a assignFull
		r := s.API(assistant, http.MethodPost, "/api/experiments/watched/assign", map[string]any{"unit_id": u})
		if r.Status == http.StatusOK {
			r.JSON(t, &a)
		}
		return a, r.Status
	}
	// listed checks an answer against what the stand-in lists just after
	// it: once allowed has passed since the stand-in changed, the answer
	// must name a model it lists.
	listed := func(what, model string, since time.Time) {
		t.Helper()
		if got := vllm.Loaded(); !slices.Contains(got, model) && model != vllm.Base && time.Since(since) > allowed {
			t.Errorf("%s names %s %s after the server changed; it lists %v", what, model, time.Since(since).Round(time.Millisecond), got)
		}
	}

	// 1. The staging adapter alone is dropped, and its first reload fails.
	vllm.Script("/v1/load_lora_adapter", http.StatusServiceUnavailable)
	dropped := time.Now()
	vllm.Drop(staged["served_name"].(string))
	sawFallback, sawConfig := false, false
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the treatment was not served again within 90 s (fallback seen: %v)", sawFallback)
		}
		a, status := assign(unit["treatment"])
		if status != http.StatusOK {
			t.Fatalf("assigning the treatment's unit: %d", status)
		}
		listed("assign", a.Model, dropped)
		if a.Fallback {
			sawFallback = true
			if a.Model != controlModel || a.Arm != "treatment" || !strings.Contains(a.NotServed, "treatment") {
				t.Errorf("a fallback assignment: %+v", a)
			}
			if !sawConfig {
				var cfg struct {
					NotServed []string `json:"not_served"`
					Arms      []struct {
						Name   string `json:"name"`
						Served bool   `json:"served"`
					} `json:"arms"`
				}
				s.API(assistant, http.MethodGet, "/api/experiments/watched/config", nil).Must(t, http.StatusOK).JSON(t, &cfg)
				// The reload may have finished between the two calls.
				if len(cfg.NotServed) == 1 {
					sawConfig = true
					if cfg.NotServed[0] != "treatment" || cfg.Arms[1].Served || !cfg.Arms[0].Served {
						t.Errorf("the config while the treatment is reloaded: %+v", cfg)
					}
				}
			}
			continue
		}
		if a.Model != staged["served_name"] && slices.Contains(vllm.Loaded(), a.Model) {
			t.Logf("the treatment is served again %s after its adapter was dropped", time.Since(dropped).Round(time.Millisecond))
			break
		}
	}
	if !sawFallback || !sawConfig {
		t.Errorf("while the treatment was reloaded: fallback seen %v, config seen %v", sawFallback, sawConfig)
	}

	// 2. The server restarts empty.
	var before servingDoc
	s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &before)
	restarted := time.Now()
	vllm.Restart()
	saw503 := false
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("production was not served again within 90 s (503 seen: %v)", saw503)
		}
		var r servingDoc
		resp := s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil)
		resp.JSON(t, &r)
		if resp.Status == http.StatusServiceUnavailable {
			saw503 = true
			if !strings.Contains(r.Detail, "gpu-1") || !strings.Contains(r.Detail, "support") {
				t.Errorf("the 503 says %q", r.Detail)
			}
			continue
		}
		if resp.Status != http.StatusOK {
			t.Fatalf("resolving production: %d %+v", resp.Status, r)
		}
		listed("resolve", r.Model, restarted)
		for _, u := range []string{unit["control"], unit["treatment"]} {
			if a, status := assign(u); status == http.StatusOK {
				listed("assign", a.Model, restarted)
			} else if status != http.StatusConflict {
				t.Fatalf("assigning %s: %d", u, status)
			}
		}
		if r.Model != before.Model && slices.Contains(vllm.Loaded(), r.Model) && r.Version == "1.0.0" && !r.Fallback {
			t.Logf("production is served again %s after the restart", time.Since(restarted).Round(time.Millisecond))
			break
		}
	}
	if !saw503 {
		t.Errorf("production never answered 503 while its adapter was reloaded")
	}
	// Both arms are called again where the server lists them.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, cs := assign(unit["control"])
		tr, ts := assign(unit["treatment"])
		if cs == http.StatusOK && ts == http.StatusOK && !c.Fallback && !tr.Fallback &&
			slices.Contains(vllm.Loaded(), c.Model) && slices.Contains(vllm.Loaded(), tr.Model) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the arms after the restart: %+v (%d), %+v (%d); the server lists %v", c, cs, tr, ts, vllm.Loaded())
		}
	}

	// The version and experiment pages show the target's health and its
	// last check.
	s.User(org, "ada@acme.test", "viewer")
	browser := s.SignedIn("ada@acme.test")
	for _, page := range []string{"/models/versions/" + v1.ID, "/experiments/watched"} {
		body := browser.Get(page).Must(t, http.StatusOK).Body
		if !strings.Contains(body, `data-target="gpu-1" data-health="healthy"`) || !strings.Contains(body, "models listed") {
			t.Errorf("%s does not show gpu-1's health: %s", page, body)
		}
	}

	// One load per missing adapter: staging's twice (dropped, then lost
	// in the restart), production's once.
	if got := vllm.Loads() - loadsBefore; got != 3 {
		t.Errorf("%d loads after the start, want 3", got)
	}
	var reloads, alertsOpened int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM deployments WHERE action = 'reload' AND reload_of IS NOT NULL AND reason LIKE 'Reloaded: gpu-1 stopped listing%'`).Scan(&reloads); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM alerts WHERE kind = 'serving_missing'`).Scan(&alertsOpened); err != nil {
		t.Fatal(err)
	}
	if reloads < 3 || alertsOpened < 2 {
		t.Errorf("%d reloads recorded, %d serving alerts", reloads, alertsOpened)
	}
}

// An arm the experiment's start loaded for itself (a "load" under the
// experiment's key, no alias) is reloaded the same way when its target
// drops it: as a load that names what it reloads, and the arm is called
// at it once the target lists it.
func TestServingCheckReloadsAnArmsOwnLoad(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *config.Config) { c.ServingPoll = 2 * time.Second }})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	deployAndWait(t, s, admin, viewer, "/api/models/"+v1.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "now"})
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "own-load", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID}).Must(t, http.StatusCreated)
	var exp struct {
		Arms []struct {
			DeploymentID string `json:"deployment_id"`
		} `json:"arms"`
	}
	s.API(admin, http.MethodPost, "/api/experiments/own-load/start", nil).Must(t, http.StatusOK).JSON(t, &exp)
	var loaded map[string]any
	s.API(viewer, http.MethodGet, "/api/deployments/"+exp.Arms[1].DeploymentID, nil).Must(t, http.StatusOK).JSON(t, &loaded)
	if loaded["action"] != "load" {
		t.Fatalf("the treatment's deployment: %v", loaded)
	}

	vllm.Drop(loaded["served_name"].(string))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the treatment's load was not put back; the server lists %v", vllm.Loaded())
		}
		s.API(viewer, http.MethodGet, "/api/experiments/own-load", nil).Must(t, http.StatusOK).JSON(t, &exp)
		if exp.Arms[1].DeploymentID != loaded["id"] {
			break
		}
	}
	var reload map[string]any
	s.API(viewer, http.MethodGet, "/api/deployments/"+exp.Arms[1].DeploymentID, nil).Must(t, http.StatusOK).JSON(t, &reload)
	if reload["action"] != "load" || reload["reload_of"] != loaded["id"] || reload["status"] != "succeeded" || reload["alias"] != "own-load" ||
		!slices.Contains(vllm.Loaded(), reload["served_name"].(string)) {
		t.Errorf("the reload: %v; the server lists %v", reload, vllm.Loaded())
	}
	var a struct {
		assignmentDoc
		Fallback bool `json:"fallback"`
	}
	for i := range 20 {
		s.API(assistant, http.MethodPost, "/api/experiments/own-load/assign", map[string]any{"unit_id": fmt.Sprintf("u-%d", i)}).Must(t, http.StatusOK).JSON(t, &a)
		if a.Fallback || !slices.Contains(vllm.Loaded(), a.Model) {
			t.Errorf("after the reload: %+v; the server lists %v", a, vllm.Loaded())
		}
	}
}
