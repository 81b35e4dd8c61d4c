package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// A version served as an experiment's treatment whose last half hour is
// slow and failing: the alert rules' evaluation opens the production
// monitors' alerts, the alerts page links each to its evidence, and the
// monitors page shows the readings against their limits. An unknown
// version's evidence is not found.
func TestBrowserMonitors(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	var ids []string
	for _, v := range []string{"1.0.0", "1.1.0"} {
		var mv struct {
			ID string `json:"id"`
		}
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "version": v, "model_id": "ft:gpt-4o-mini:acme::" + v,
			"kind": "full"}).Must(t, http.StatusCreated).JSON(t, &mv)
		ids = append(ids, mv.ID)
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "watch", "control_model_id": ids[0],
		"treatment_model_id": ids[1]}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/watch/start", nil).Must(t, http.StatusOK)
	ctx := context.Background()
	// 40 answers of the treatment in the last half hour, taking 2.5 s, 4
	// of them errors.
	if _, err := s.Pool.Exec(ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, experiment_arm, query, response, feedback_type,
			latency_ms, is_error, source, content_hash, created_at)
		SELECT $1, 'u-' || i, (SELECT id FROM experiments), 'treatment', 'q', 'a', 'thumbs_up', 2500 + i, i < 4, 'api', '\x00',
			now() - interval '30 minutes'
		FROM generate_series(0, 39) i`, org); err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Alerts.Evaluate(ctx, org, time.Now()); err != nil {
		t.Fatal(err)
	}

	b := webtest.Browser(t)
	signIn(t, b, s, "ada@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/alerts"), chromedp.WaitVisible(`#alerts`)); err != nil {
		t.Fatal(err)
	}
	kinds := eval[[]string](t, b, `[...document.querySelectorAll('#alerts tr[data-kind]')].map(r => r.dataset.kind).sort()`)
	if strings.Join(kinds, ",") != "monitor_error_rate,monitor_latency" {
		t.Fatalf("alerts: %v", kinds)
	}
	if err := chromedp.Do(b, chromedp.Click(`tr[data-kind=monitor_latency] a.alert-evidence`), chromedp.WaitVisible(`#monitor-`+ids[1])); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-monitors")
	states := eval[[]string](t, b, `[...document.querySelectorAll('[data-monitor]')].map(r => r.dataset.monitor + ' ' + r.dataset.state)`)
	if strings.Join(states, ",") != "monitor_latency breached,monitor_feedback_rate waiting,monitor_error_rate breached,monitor_score_shift waiting" {
		t.Errorf("readings: %v", states)
	}
	if got := text(t, b, `[data-monitor=monitor_latency] td:nth-child(2)`); !strings.HasPrefix(got, "p95 2.54 s over the last hour (40 answers") {
		t.Errorf("latency reading: %q", got)
	}
	// Only that version is shown; an unknown one is not found.
	if n := eval[int](t, b, `document.querySelectorAll('section[data-version]').length`); n != 1 {
		t.Errorf("%d versions on the evidence page", n)
	}
	s.SignedIn("ada@acme.test").Get("/monitors?version=00000000-0000-0000-0000-000000000001").Must(t, http.StatusNotFound)
	s.SignedIn("ada@acme.test").Get("/monitors").Must(t, http.StatusOK)
}
