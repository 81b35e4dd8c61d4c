package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// The additive API of experiment statistics and production monitors:
// feedback may say its answer was an error (one item or a batch, read
// back as "error"); the organisation's default engine is read by viewers
// and changed by admins; monitor settings are refused field by field and
// stored whole; a live scorer names an experiment or a model's alias.
func TestExperimentStatsAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")

	var item map[string]any
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "Sorry, something went wrong.",
		"feedback_type": "thumbs_down", "error": true, "model": "support-v2"}).Must(t, http.StatusCreated).JSON(t, &item)
	if item["error"] != true {
		t.Errorf("stored item: %v", item)
	}
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": []map[string]any{
		{"query": "q", "response": "a", "feedback_type": "thumbs_up"},
		{"query": "q2", "response": "failed", "feedback_type": "thumbs_down", "error": true}}}).Must(t, http.StatusOK)
	var errors int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feedback WHERE is_error").Scan(&errors); err != nil || errors != 2 {
		t.Errorf("%d feedback items reporting an error, %v", errors, err)
	}

	var settings map[string]any
	s.API(viewer, http.MethodGet, "/api/settings/experiments", nil).Must(t, http.StatusOK).JSON(t, &settings)
	if settings["default_engine"] != "frequentist" {
		t.Errorf("default engine: %v", settings)
	}
	s.API(viewer, http.MethodPut, "/api/settings/experiments", map[string]any{"default_engine": "bayesian"}).Must(t, http.StatusForbidden)
	var p problemDoc
	s.API(admin, http.MethodPut, "/api/settings/experiments", map[string]any{"default_engine": "both"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "default_engine" {
		t.Errorf("refusal: %+v", p)
	}
	s.API(admin, http.MethodPut, "/api/settings/experiments", map[string]any{"default_engine": "bayesian"}).Must(t, http.StatusOK)
	s.API(viewer, http.MethodGet, "/api/settings/experiments", nil).Must(t, http.StatusOK).JSON(t, &settings)
	if settings["default_engine"] != "bayesian" {
		t.Errorf("default engine after the change: %v", settings)
	}

	p = problemDoc{}
	s.API(admin, http.MethodPut, "/api/monitors/settings", map[string]any{"latency_p95_ms": 0, "error_rate": 2, "shift_test": "t"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "latency_p95_ms,error_rate,shift_test" {
		t.Errorf("monitor settings refused on %s", p.fields())
	}
	s.API(admin, http.MethodPut, "/api/monitors/settings", map[string]any{"latency_p95_ms": 1500, "shift_test": "psi"}).Must(t, http.StatusOK)
	var mon map[string]any
	s.API(viewer, http.MethodGet, "/api/monitors/settings", nil).Must(t, http.StatusOK).JSON(t, &mon)
	if mon["latency_p95_ms"] != 1500.0 || mon["shift_test"] != "psi" || mon["error_rate"] != 0.01 {
		t.Errorf("monitor settings: %v", mon)
	}
	var list struct {
		Data []any `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/monitors", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Errorf("served versions without any: %v", list.Data)
	}

	p = problemDoc{}
	s.API(admin, http.MethodPut, "/api/live-scorers", map[string]any{"endpoint": "judge", "rate": 0.1}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "experiment" {
		t.Errorf("a scorer of nothing: %+v", p)
	}
	s.API(admin, http.MethodPut, "/api/live-scorers", map[string]any{"experiment": "missing", "endpoint": "judge", "rate": 0.1}).
		Must(t, http.StatusUnprocessableEntity) // no such endpoint: refused before the experiment is looked for
	s.API(viewer, http.MethodPut, "/api/live-scorers", map[string]any{"experiment": "x", "endpoint": "judge", "rate": 0.1}).Must(t, http.StatusForbidden)
	s.API(viewer, http.MethodGet, "/api/live-scorers", nil).Must(t, http.StatusOK)
}
