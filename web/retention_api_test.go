package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// The organisation's feedback retention: read by viewers, set by admins
// (days, or null to keep feedback forever), refused out of range with the
// field named, and audited.
func TestRetentionSettingsAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")

	var settings map[string]any
	s.API(viewer, http.MethodGet, "/api/settings/retention", nil).Must(t, http.StatusOK).JSON(t, &settings)
	if v, ok := settings["retention_days"]; !ok || v != nil {
		t.Errorf("retention by default: %v, want null (forever)", settings)
	}
	s.API(viewer, http.MethodPut, "/api/settings/retention", map[string]any{"retention_days": 400}).Must(t, http.StatusForbidden)
	for _, bad := range []any{0, -3, 36501} {
		var p problemDoc
		s.API(admin, http.MethodPut, "/api/settings/retention", map[string]any{"retention_days": bad}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != "retention_days" {
			t.Errorf("retention %v refused on %q", bad, p.fields())
		}
	}
	s.API(admin, http.MethodPut, "/api/settings/retention", map[string]any{"retention_days": 400}).Must(t, http.StatusOK)
	s.API(viewer, http.MethodGet, "/api/settings/retention", nil).Must(t, http.StatusOK).JSON(t, &settings)
	if settings["retention_days"] != float64(400) {
		t.Errorf("retention after the change: %v", settings)
	}
	s.API(admin, http.MethodPut, "/api/settings/retention", map[string]any{"retention_days": nil}).Must(t, http.StatusOK)
	s.API(viewer, http.MethodGet, "/api/settings/retention", nil).Must(t, http.StatusOK).JSON(t, &settings)
	if settings["retention_days"] != nil {
		t.Errorf("retention after clearing: %v", settings)
	}
	var audited int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'org.retention_set'`).Scan(&audited); err != nil || audited != 2 {
		t.Errorf("%d retention changes audited (%v), want 2", audited, err)
	}
}
