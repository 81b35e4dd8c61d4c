package web_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

type assignmentDoc struct {
	UnitID       string `json:"unit_id"`
	Arm          string `json:"arm"`
	ArmIndex     int    `json:"arm_index"`
	InExperiment bool   `json:"in_experiment"`
	Version      string `json:"version"`
	Model        string `json:"model"`
	BaseURL      string `json:"base_url"`
}

type resultsDoc struct {
	Units     []int64  `json:"units"`
	SRMPValue *float64 `json:"srm_p_value"`
	Metrics   []struct {
		Metric string `json:"metric"`
		Arms   []struct {
			Arm            string     `json:"arm"`
			N              int        `json:"n"`
			Mean           *float64   `json:"mean"`
			RelativeChange *float64   `json:"relative_change"`
			CI             []*float64 `json:"ci"`
			PValue         *float64   `json:"p_value"`
		} `json:"arms"`
	} `json:"metrics"`
	Recommendation struct {
		Action string `json:"action"`
		Reason string `json:"reason"`
	} `json:"recommendation"`
	Timeline []map[string]any `json:"timeline"`
}

// A simulated experiment through the API: two versions served by a vLLM
// stand-in, 2,000 units assigned (sticky, split within the SRM check),
// feedback with a known effect (70% thumbs up in the treatment, 50% in the
// control) attributed by the experiment's key; the results recommend the
// treatment, and Full Deploy moves production through the registry.
func TestExperimentAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	vllm, v1, v2, staged := servedVersions(t, s, admin, viewer)

	var p problemDoc
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "Support V3", "control_model_id": v1.ID,
		"treatment_model_id": v1.ID, "traffic_split": 1.5, "metrics": []string{"vibes"}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "key,traffic_split,metrics[0],treatment_model_id" {
		t.Errorf("bad experiment named %q", p.fields())
	}
	var exp struct {
		Key          string  `json:"key"`
		Status       string  `json:"status"`
		Seed         string  `json:"seed"`
		TrafficSplit float64 `json:"traffic_split"`
		Arms         []struct {
			Name   string  `json:"name"`
			Weight float64 `json:"weight"`
		} `json:"arms"`
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-v3", "name": "Support model v2 vs v3",
		"control_model_id": v1.ID, "treatment_model_id": v2.ID, "traffic_split": 0.5, "coverage": 1.0, "seed": "support-v3",
		"metrics": []string{"thumbs_up_rate", "avg_rating"}}).Must(t, http.StatusCreated).JSON(t, &exp)
	if exp.Status != "draft" || exp.TrafficSplit != 0.5 || len(exp.Arms) != 2 || exp.Arms[0].Name != "control" || exp.Arms[1].Weight != 0.5 {
		t.Fatalf("created %+v", exp)
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": "u-1"}).Must(t, http.StatusConflict)
	s.API(viewer, http.MethodPost, "/api/experiments/support-v3/start", nil).Must(t, http.StatusForbidden)
	s.API(admin, http.MethodPost, "/api/experiments/support-v3/start", nil).Must(t, http.StatusOK)

	var one assignmentDoc
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": "u-17"}).Must(t, http.StatusOK).JSON(t, &one)
	if !one.InExperiment || one.BaseURL != vllm.URL || (one.Arm == "treatment") != (one.ArmIndex == 1) ||
		(one.Arm == "treatment" && one.Model != staged["served_name"]) || one.Version == "" {
		t.Errorf("assignment %+v", one)
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": strings.Repeat("x", 201)}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "unit_id" {
		t.Errorf("a long unit id named %q", p.fields())
	}

	arms := map[string]int{}
	counts := []int{0, 0}
	for batch := range 2 {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = fmt.Sprintf("user-%d", batch*1000+i)
		}
		var out struct {
			Data []assignmentDoc `json:"data"`
		}
		s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
		for _, a := range out.Data {
			arms[a.UnitID] = a.ArmIndex
			counts[a.ArmIndex]++
		}
	}
	var again assignmentDoc
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": "user-42"}).Must(t, http.StatusOK).JSON(t, &again)
	if again.ArmIndex != arms["user-42"] {
		t.Errorf("user-42 moved from arm %d to %d", arms["user-42"], again.ArmIndex)
	}

	// Feedback with a known effect: 70% thumbs up in the treatment, 50% in
	// the control; ratings 4 and 3.
	items := make([]map[string]any, 0, 2000)
	for i := range 2000 {
		unit := fmt.Sprintf("user-%d", i)
		kind, rating := "thumbs_down", 3
		if arms[unit] == 1 {
			rating = 4
			if i%10 < 7 {
				kind = "thumbs_up"
			}
		} else if i%10 < 5 {
			kind = "thumbs_up"
		}
		items = append(items, map[string]any{"query": "How do I reset?", "response": fmt.Sprintf("Answer %d", i), "feedback_type": kind,
			"user_id": unit, "experiment": "support-v3"})
		items = append(items, map[string]any{"query": "Rate it", "response": fmt.Sprintf("Rated %d", i), "feedback_type": "rating",
			"rating": rating, "user_id": unit, "experiment": "support-v3"})
	}
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up",
		"user_id": "user-1", "experiment": "nope"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "experiment" {
		t.Errorf("an unknown experiment named %q", p.fields())
	}
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up",
		"user_id": "stranger", "experiment": "support-v3"}).Must(t, http.StatusUnprocessableEntity)

	var res resultsDoc
	s.API(viewer, http.MethodGet, "/api/experiments/support-v3/results", nil).Must(t, http.StatusOK).JSON(t, &res)
	if res.Units[0]+res.Units[1] != 2001 || res.SRMPValue == nil || *res.SRMPValue < 0.001 {
		t.Errorf("units %v, SRM %v", res.Units, res.SRMPValue)
	}
	thumbs := res.Metrics[0]
	tr := thumbs.Arms[1]
	if thumbs.Metric != "thumbs_up_rate" || tr.N != counts[1] || math.Abs(*thumbs.Arms[0].Mean-0.5) > 0.03 || math.Abs(*tr.Mean-0.7) > 0.03 ||
		math.Abs(*tr.RelativeChange-(*tr.Mean / *thumbs.Arms[0].Mean - 1)) > 1e-9 || *tr.PValue > 1e-6 || *tr.CI[0] <= 0 {
		t.Errorf("thumbs-up rate: control mean %v, treatment n %d (%d assigned) mean %v change %v p %v low %v", *thumbs.Arms[0].Mean, tr.N, counts[1], *tr.Mean, *tr.RelativeChange, *tr.PValue, *tr.CI[0])
	}
	if res.Recommendation.Action != "deploy_treatment" || len(res.Timeline) == 0 {
		t.Errorf("recommendation %+v, timeline %v", res.Recommendation, res.Timeline)
	}

	d := deployAndWait(t, s, admin, viewer, "/api/experiments/support-v3/deploy", map[string]any{"reason": "v3 wins on thumbs"})
	if d["version_id"] != v2.ID || d["alias"] != "production" {
		t.Errorf("full deploy %v", d)
	}
	s.API(viewer, http.MethodGet, "/api/experiments/support-v3", nil).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Status != "completed" {
		t.Errorf("after the full deploy: %+v", exp)
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign", map[string]any{"unit_id": "u-1"}).Must(t, http.StatusConflict)
	s.API(s.APIKey(s.Org("globex"), "x", "viewer"), http.MethodGet, "/api/experiments/support-v3", nil).Must(t, http.StatusNotFound)
}

// A rollout plan (10% → 50% → 100%): a treatment whose thumbs-up rate is
// far worse is sent back to the control at the 10% step and the experiment
// paused, with the reason in the registry's history; a sound one moves on
// to 50%.
func TestExperimentRollout(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("support-%d", i+1)}).
			Must(t, http.StatusCreated).JSON(t, v)
	}
	run := func(key string, treatmentUp int) {
		t.Helper()
		s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": key, "control_model_id": v1.ID, "treatment_model_id": v2.ID,
			"metrics": []string{"thumbs_up_rate"}, "rollout": map[string]any{"steps": []float64{0.1, 0.5, 1}, "hold_minutes": 0, "min_units_per_arm": 50}}).
			Must(t, http.StatusCreated)
		s.API(admin, http.MethodPost, "/api/experiments/"+key+"/start", nil).Must(t, http.StatusOK)
		var items []map[string]any
		for batch := range 3 {
			ids := make([]string, 1000)
			for i := range ids {
				ids[i] = fmt.Sprintf("%s-user-%d", key, batch*1000+i)
			}
			var out struct {
				Data []assignmentDoc `json:"data"`
			}
			s.API(assistant, http.MethodPost, "/api/experiments/"+key+"/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
			for i, a := range out.Data {
				up := 7
				if a.ArmIndex == 1 {
					up = treatmentUp
				}
				kind := "thumbs_down"
				if i%10 < up {
					kind = "thumbs_up"
				}
				items = append(items, map[string]any{"query": "q", "response": a.UnitID, "feedback_type": kind, "user_id": a.UnitID, "experiment": key})
			}
		}
		s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
		if err := s.App.Services.Experiments.CheckRollouts(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	type expDoc struct {
		Status      string `json:"status"`
		RolloutStep int    `json:"rollout_step"`
		StopReason  string `json:"stop_reason"`
		Arms        []struct {
			Weight float64 `json:"weight"`
		} `json:"arms"`
	}
	run("harmful", 2)
	var e expDoc
	s.API(admin, http.MethodGet, "/api/experiments/harmful", nil).Must(t, http.StatusOK).JSON(t, &e)
	if e.Status != "paused" || e.Arms[0].Weight != 1 || e.Arms[1].Weight != 0 ||
		!strings.Contains(e.StopReason, "Rolled back automatically at the 10% step: The thumbs-up rate is significantly lower") {
		t.Fatalf("the harmful rollout: %+v", e)
	}
	var history struct {
		Data []map[string]any `json:"data"`
	}
	s.API(admin, http.MethodGet, "/api/models/"+v2.ID+"/history", nil).Must(t, http.StatusOK).JSON(t, &history)
	if h := history.Data[0]; h["action"] != "traffic_rolled_back" || h["alias"] != "harmful" || h["reason"] != e.StopReason {
		t.Errorf("the registry's newest history entry: %v", h)
	}
	s.API(assistant, http.MethodPost, "/api/experiments/harmful/assign", map[string]any{"unit_id": "late"}).Must(t, http.StatusConflict)

	run("sound", 7)
	s.API(admin, http.MethodGet, "/api/experiments/sound", nil).Must(t, http.StatusOK).JSON(t, &e)
	if e.Status != "running" || e.RolloutStep != 1 || e.Arms[1].Weight != 0.5 {
		t.Errorf("the sound rollout: %+v", e)
	}
	s.API(admin, http.MethodGet, "/api/models/"+v2.ID+"/history", nil).Must(t, http.StatusOK).JSON(t, &history)
	if h := history.Data[0]; h["action"] != "traffic_shifted" || !strings.Contains(h["reason"].(string), "from 10% to 50%") {
		t.Errorf("after the step: %v", h)
	}
}

// servedVersions registers two versions of "support" served by a vLLM
// stand-in: the first in production, the second in staging (its
// deployment returned).
func servedVersions(t *testing.T, s *webtest.Server, admin, viewer string) (*vllmtest.Server, modelDoc, modelDoc, map[string]any) {
	t.Helper()
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	deployAndWait(t, s, admin, viewer, "/api/models/"+v1.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "now"})
	staged := deployAndWait(t, s, admin, viewer, "/api/models/"+v2.ID+"/deploy", map[string]any{"alias": "staging", "target": "gpu-1", "reason": "try"})
	return vllm, v1, v2, staged
}

// deployAndWait asks for a deployment (202) and waits for it to succeed.
func deployAndWait(t *testing.T, s *webtest.Server, admin, viewer, path string, body map[string]any) map[string]any {
	t.Helper()
	var d map[string]any
	s.API(admin, http.MethodPost, path, body).Must(t, http.StatusAccepted).JSON(t, &d)
	for deadline := time.Now().Add(30 * time.Second); d["status"] == "queued" || d["status"] == "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("deployment %v", d)
		}
		s.API(viewer, http.MethodGet, "/api/deployments/"+d["id"].(string), nil).Must(t, http.StatusOK).JSON(t, &d)
	}
	if d["status"] != "succeeded" {
		t.Fatalf("deployment %v", d)
	}
	return d
}

// Changing the split: units already assigned keep their arm and only new
// units follow the new weights (the sample-ratio check is then off); a
// shrunk coverage keeps exposed units in; re-randomising starts phase 2,
// whose units are assigned afresh and whose results count only the
// phase's own exposures and feedback. Bad weights are refused by field.
func TestExperimentTraffic(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	_, v1, v2, _ := servedVersions(t, s, admin, viewer)
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "split", "control_model_id": v1.ID, "treatment_model_id": v2.ID,
		"traffic_split": 0.5, "seed": "split", "metrics": []string{"thumbs_up_rate"}}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/split/start", nil).Must(t, http.StatusOK)

	assign := func(from, to int) []assignmentDoc {
		t.Helper()
		ids := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			ids = append(ids, fmt.Sprintf("u-%d", i))
		}
		var out struct {
			Data []assignmentDoc `json:"data"`
		}
		s.API(assistant, http.MethodPost, "/api/experiments/split/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
		return out.Data
	}
	treated := func(as []assignmentDoc) float64 {
		n := 0
		for _, a := range as {
			n += a.ArmIndex
		}
		return float64(n) / float64(len(as))
	}
	results := func() resultsDoc {
		t.Helper()
		var r resultsDoc
		s.API(viewer, http.MethodGet, "/api/experiments/split/results", nil).Must(t, http.StatusOK).JSON(t, &r)
		return r
	}
	first := assign(0, 400)
	if r := results(); r.SRMPValue == nil {
		t.Error("no sample-ratio check before the weights changed")
	}
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up",
		"experiment": "split", "user_id": "u-0"}).Must(t, http.StatusCreated)

	var p problemDoc
	s.API(viewer, http.MethodPatch, "/api/experiments/split", map[string]any{"weights": []float64{0.9, 0.1}}).Must(t, http.StatusForbidden)
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"weights": []float64{0.5, 0.6}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "weights" {
		t.Errorf("weights adding to 1.1 named %q", p.fields())
	}
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"weights": []float64{1.5, -0.5}, "coverage": 0}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "coverage,weights[0],weights[1]" {
		t.Errorf("bad weights and coverage named %q", p.fields())
	}

	// 90/10: the first 400 stay where they were; new units follow.
	var exp struct {
		Phase          int  `json:"phase"`
		WeightsChanged bool `json:"weights_changed"`
	}
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"weights": []float64{0.9, 0.1}}).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Phase != 1 || !exp.WeightsChanged {
		t.Errorf("after new weights: %+v", exp)
	}
	again := assign(0, 400)
	for i := range first {
		if again[i].ArmIndex != first[i].ArmIndex {
			t.Fatalf("%s moved from arm %d to %d when the weights changed", first[i].UnitID, first[i].ArmIndex, again[i].ArmIndex)
		}
	}
	if share := treated(append(assign(400, 1400), assign(1400, 2400)...)); share < 0.07 || share > 0.13 {
		t.Errorf("new units' treatment share %.3f, want about 0.1", share)
	}
	if r := results(); r.SRMPValue != nil || r.Units[0]+r.Units[1] != 2400 {
		t.Errorf("after the change: SRM %v, units %v", r.SRMPValue, r.Units)
	}

	// A shrunk coverage keeps exposed units in the experiment.
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"coverage": 0.05}).Must(t, http.StatusOK)
	for _, a := range assign(0, 400) {
		if !a.InExperiment {
			t.Fatalf("%s left the experiment when the coverage shrank", a.UnitID)
		}
	}
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"coverage": 1}).Must(t, http.StatusOK)

	// Re-randomised: phase 2, nobody exposed yet, units assigned afresh
	// (at 90/10 a good share of the first half-treated 400 change arm),
	// and phase 1's feedback no longer counts.
	s.API(admin, http.MethodPatch, "/api/experiments/split", map[string]any{"reseed": true}).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Phase != 2 || exp.WeightsChanged {
		t.Errorf("after re-randomising: %+v", exp)
	}
	if r := results(); r.Units[0]+r.Units[1] != 0 || r.Metrics[0].Arms[0].N != 0 {
		t.Errorf("phase 2 starts with units %v and %d thumbs", r.Units, r.Metrics[0].Arms[0].N)
	}
	moved := 0
	for i, a := range assign(0, 400) {
		if a.ArmIndex != first[i].ArmIndex {
			moved++
		}
	}
	if moved < 100 {
		t.Errorf("%d of 400 units changed arm after re-randomising at 90/10", moved)
	}
	if r := results(); r.SRMPValue == nil || r.Units[0]+r.Units[1] != 400 {
		t.Errorf("phase 2: SRM %v, units %v", r.SRMPValue, r.Units)
	}

	// The panel's form: the treatment's share in percent.
	s.User(org, "ad@acme.test", "admin")
	page := s.SignedIn("ad@acme.test")
	if body := page.Get("/experiments/split").Must(t, http.StatusOK).Body; !strings.Contains(body, `id="traffic-form"`) || !strings.Contains(body, "start phase 3") {
		t.Error("the panel lacks the split form")
	}
	if body := page.PostForm("/experiments/split/traffic", url.Values{"treatment_percent": {"half"}}).Must(t, http.StatusUnprocessableEntity).Body; !strings.Contains(body, `id="err-treatment_percent"`) {
		t.Error("a bad share is not named on the form")
	}
	page.PostForm("/experiments/split/traffic", url.Values{"treatment_percent": {"30"}, "reseed": {"1"}}).Must(t, http.StatusSeeOther)
	s.API(viewer, http.MethodGet, "/api/experiments/split", nil).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Phase != 3 {
		t.Errorf("after the form: phase %d", exp.Phase)
	}

	// A rating dimension's average is a metric too.
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "dims", "control_model_id": v1.ID, "treatment_model_id": v2.ID,
		"traffic_split": 0.5, "metrics": []string{"avg_accuracy", "avg_safety"}}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/dims/start", nil).Must(t, http.StatusOK)
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("d-%d", i)
	}
	var dims struct {
		Data []assignmentDoc `json:"data"`
	}
	s.API(assistant, http.MethodPost, "/api/experiments/dims/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &dims)
	var sum, n [2]float64
	for i, a := range dims.Data {
		score := 2 + 2*a.ArmIndex + i%2
		sum[a.ArmIndex] += float64(score)
		n[a.ArmIndex]++
		s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "rating", "rating": 4,
			"experiment": "dims", "user_id": a.UnitID, "dimensions": map[string]int{"accuracy": score, "safety": 5}}).Must(t, http.StatusCreated)
	}
	var r resultsDoc
	s.API(viewer, http.MethodGet, "/api/experiments/dims/results", nil).Must(t, http.StatusOK).JSON(t, &r)
	control, treatment := sum[0]/n[0], sum[1]/n[1]
	if acc := r.Metrics[0]; acc.Metric != "avg_accuracy" || acc.Arms[0].Mean == nil || math.Abs(*acc.Arms[0].Mean-control) > 1e-9 ||
		acc.Arms[1].RelativeChange == nil || math.Abs(*acc.Arms[1].RelativeChange-(treatment/control-1)) > 1e-9 {
		t.Errorf("accuracy: %+v, want means %v and %v", acc, control, treatment)
	}
}
