package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// The scenario through the API, with the workers running: 1.0.0
// then 1.1.0 deployed to production on a vLLM server whose grace period is
// 0, so the unload job removes 1.0.0's adapter at once; an experiment
// 1.0.0 against 1.1.0 starts (200) with both loaded, and every answer of
// assign and assign-batch, fifty callers at once included, names a model
// the server lists at that moment. An arm the server will not load is
// refused with 409 naming the arm and its version. Re-deploying what
// production holds answers the existing deployment (200) and loads nothing.
func TestExperimentStartServesArms(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL,
		"unload_grace_seconds": 0}).Must(t, http.StatusCreated)
	var v1, v2, v3 modelDoc
	for i, v := range []*modelDoc{&v1, &v2, &v3} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	deploy := map[string]any{"alias": "production", "target": "gpu-1", "reason": "next"}
	d1 := deployAndWait(t, s, admin, viewer, "/api/models/"+v1.ID+"/deploy", deploy)
	d2 := deployAndWait(t, s, admin, viewer, "/api/models/"+v2.ID+"/deploy", deploy)
	for deadline := time.Now().Add(30 * time.Second); slices.Contains(vllm.Loaded(), d1["served_name"].(string)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("1.0.0's adapter is still loaded: %v", vllm.Loaded())
		}
	}

	var again map[string]any
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/deploy", deploy).Must(t, http.StatusOK).JSON(t, &again)
	if again["id"] != d2["id"] || again["status"] != "succeeded" || vllm.Loads() != 2 {
		t.Errorf("re-deploying production's version: %v (%d loads)", again, vllm.Loads())
	}

	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-v3", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID, "metrics": []string{"thumbs_up_rate"}}).Must(t, http.StatusCreated)
	var exp struct {
		Status string `json:"status"`
		Arms   []struct {
			Name         string `json:"name"`
			DeploymentID string `json:"deployment_id"`
		} `json:"arms"`
	}
	s.API(admin, http.MethodPost, "/api/experiments/support-v3/start", nil).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Status != "running" || exp.Arms[1].DeploymentID != d2["id"] || exp.Arms[0].DeploymentID == "" {
		t.Fatalf("started %+v", exp)
	}
	if got := vllm.Loaded(); len(got) != 2 || !slices.Contains(got, d2["served_name"].(string)) {
		t.Fatalf("after the start the server lists %v", got)
	}
	var loaded map[string]any
	s.API(viewer, http.MethodGet, "/api/deployments/"+exp.Arms[0].DeploymentID, nil).Must(t, http.StatusOK).JSON(t, &loaded)
	if loaded["action"] != "load" || loaded["alias"] != "support-v3" || loaded["version_id"] != v1.ID || loaded["status"] != "succeeded" {
		t.Errorf("the control's load %v", loaded)
	}

	check := func(a assignmentDoc) {
		t.Helper()
		if got := vllm.Loaded(); !slices.Contains(got, a.Model) || a.BaseURL != vllm.URL {
			t.Errorf("%s is sent to %q at %s; the server lists %v", a.UnitID, a.Model, a.BaseURL, got)
		}
	}
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%d", i)
	}
	var batch struct {
		Data []assignmentDoc `json:"data"`
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &batch)
	arms := map[string]int{}
	for _, a := range batch.Data {
		check(a)
		arms[a.Arm]++
	}
	if arms["control"] < 100 || arms["treatment"] < 100 {
		t.Errorf("arms %v", arms)
	}
	// Fifty callers at once for one new unit: each gets the recorded arm.
	responses := make([]webtest.Response, 50)
	var wg sync.WaitGroup
	for i := range responses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			responses[i] = s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": "newcomer"})
		}()
	}
	wg.Wait()
	answers := make([]assignmentDoc, len(responses))
	for i, r := range responses {
		r.Must(t, http.StatusOK).JSON(t, &answers[i])
	}
	for i, a := range answers {
		check(a)
		if !a.InExperiment || a.Arm != answers[0].Arm {
			t.Errorf("caller %d: %+v, caller 0: %+v", i, a, answers[0])
		}
	}
	var recorded string
	if err := s.Pool.QueryRow(t.Context(), `SELECT a.name FROM experiment_exposures x JOIN experiment_arms a ON a.experiment_id = x.experiment_id AND a.idx = x.arm
		WHERE x.unit_id = 'newcomer'`).Scan(&recorded); err != nil || recorded != answers[0].Arm {
		t.Errorf("newcomer recorded in %q (%v), answered %q", recorded, err, answers[0].Arm)
	}

	// 1.2.0, which the server refuses to load.
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "refused", "control_model_id": v3.ID,
		"treatment_model_id": v2.ID}).Must(t, http.StatusCreated)
	vllm.Script("/v1/load_lora_adapter", http.StatusBadRequest)
	var p struct {
		Detail string `json:"detail"`
	}
	s.API(admin, http.MethodPost, "/api/experiments/refused/start", nil).Must(t, http.StatusConflict).JSON(t, &p)
	if !strings.Contains(p.Detail, "control arm") || !strings.Contains(p.Detail, "1.2.0") {
		t.Errorf("the refusal says %q", p.Detail)
	}
	s.API(admin, http.MethodGet, "/api/experiments/refused", nil).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Status != "draft" {
		t.Errorf("the refused experiment is %s", exp.Status)
	}
}
