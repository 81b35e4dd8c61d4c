package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
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

// The retention page: an admin sets a number of days and clears it again;
// a bad number is shown back with the field's message and changes
// nothing; the stats page links to it for admins only, and a viewer may
// not open or post it.
func TestRetentionSettingsPage(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "vic@acme.test", "viewer")
	admin := s.SignedIn("ada@acme.test")

	page := admin.Get("/stats/retention").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "Feedback is kept forever.") {
		t.Errorf("retention page by default: %s", regexpFind(t, `(?s)(<h1>.{0,300})`, page.Body))
	}
	if !strings.Contains(admin.Get("/stats").Must(t, http.StatusOK).Body, `href="/stats/retention"`) {
		t.Error("the stats page does not link an admin to the retention page")
	}
	for _, bad := range []string{"0", "36501", "a year", "1.5"} {
		res := admin.PostForm("/stats/retention", url.Values{"retention_days": {bad}}).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `id="err-retention-days">`) || strings.Contains(res.Body, `id="err-retention-days"></p>`) {
			t.Errorf("%q: no message beside the field: %s", bad, regexpFind(t, `(?s)(<form.{0,600})`, res.Body))
		}
		if !strings.Contains(res.Body, "Feedback is kept forever.") || !strings.Contains(res.Body, `value="`+bad+`"`) {
			t.Errorf("%q: the refusal does not show the kept setting beside what was typed: %s", bad, regexpFind(t, `(?s)(<h1>.{0,600})`, res.Body))
		}
	}
	var days *int
	if err := s.Pool.QueryRow(context.Background(), `SELECT retention_days FROM organizations WHERE id = $1`, org).Scan(&days); err != nil || days != nil {
		t.Fatalf("after refusals the retention is %v (%v), want none", days, err)
	}
	admin.PostForm("/stats/retention", url.Values{"retention_days": {"1,200"}}).Must(t, http.StatusSeeOther)
	page = admin.Get("/stats/retention").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "Feedback older than 1200 days is removed.") || !strings.Contains(page.Body, "will be removed within the hour") ||
		!strings.Contains(page.Body, "Experiment exposures first seen before then are removed too") {
		t.Errorf("after setting 1,200 days: %s", regexpFind(t, `(?s)(<main.{0,800})`, page.Body))
	}
	admin.PostForm("/stats/retention", url.Values{"retention_days": {" "}}).Must(t, http.StatusSeeOther)
	if !strings.Contains(admin.Get("/stats/retention").Must(t, http.StatusOK).Body, "Feedback is kept forever.") {
		t.Error("clearing the field did not keep feedback forever")
	}
	assertAudit(t, s, "org.retention_set")

	viewer := s.SignedIn("vic@acme.test")
	if strings.Contains(viewer.Get("/stats").Must(t, http.StatusOK).Body, `href="/stats/retention"`) {
		t.Error("the stats page links a viewer to a page they may not open")
	}
	viewer.Get("/stats/retention").Must(t, http.StatusForbidden)
	viewer.PostForm("/stats/retention", url.Values{"retention_days": {"30"}}).Must(t, http.StatusForbidden)
}
