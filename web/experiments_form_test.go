package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/web/webtest"
)

// experimentDoc is an experiment as the API shows it.
type experimentDoc struct {
	Key             string    `json:"key"`
	Name            string    `json:"name"`
	Status          string    `json:"status"`
	TrafficSplit    float64   `json:"traffic_split"`
	Coverage        float64   `json:"coverage"`
	Metrics         []string  `json:"metrics"`
	Guardrails      []string  `json:"guardrails"`
	MinSamplePerArm int       `json:"min_sample_per_arm"`
	EndsAt          time.Time `json:"ends_at"`
	Rollout         *struct {
		Steps    []float64 `json:"steps"`
		HoldMins int       `json:"hold_minutes"`
		MinUnits int       `json:"min_units_per_arm"`
	} `json:"rollout"`
	Arms []struct {
		Name           string `json:"name"`
		ModelVersionID string `json:"model_version_id"`
	} `json:"arms"`
}

// selected is how a chosen option reads in a page.
func selected(value string) string { return `<option value="` + value + `" selected>` }

// The new-experiment form without JavaScript: only admins (the role of
// POST /api/models/ab-test) see and post it; opened from a version's page
// it puts that version on trial against production's, each shown with
// where it is served, with the rollout plan prefilled. Refusals come back
// with the form as typed and each message beside its field, and store
// nothing; a good form creates the draft the API would, in its units
// (percent, hours, a day).
func TestExperimentForm(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	_, v1, v2, _ := servedVersions(t, s, admin, viewer)
	var v3, foreign modelDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-3",
		"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, &v3)
	globex := s.APIKey(s.Org("globex"), "ops", "admin")
	s.API(globex, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "x"}).Must(t, http.StatusCreated).JSON(t, &foreign)
	s.User(org, "ad@acme.test", "admin")
	s.User(org, "vi@acme.test", "viewer")

	look := s.SignedIn("vi@acme.test")
	if body := look.Get("/experiments").Must(t, http.StatusOK).Body; strings.Contains(body, `id="new-experiment"`) {
		t.Error("a viewer is offered the new-experiment form")
	}
	if body := look.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; strings.Contains(body, `id="ab-test"`) {
		t.Error("a viewer is offered A/B Test")
	}
	look.Get("/experiments/new").Must(t, http.StatusForbidden)
	look.PostForm("/experiments", url.Values{"key": {"x"}}).Must(t, http.StatusForbidden)

	page := s.SignedIn("ad@acme.test")
	if body := page.Get("/experiments").Must(t, http.StatusOK).Body; !strings.Contains(body, `href="/experiments/new"`) || strings.Contains(body, "POST /api/models/ab-test") {
		t.Error("the list neither links the form nor drops the API hint")
	}
	if body := page.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; !strings.Contains(body, `href="/experiments/new?treatment=`+v2.ID+`"`) {
		t.Error("the version's page has no A/B Test button")
	}
	form := page.Get("/experiments/new?treatment="+v2.ID).Must(t, http.StatusOK).Body
	for _, want := range []string{
		selected("support"),
		selected(v1.ID) + "1.0.0 · production on gpu-1</option>",
		selected(v2.ID) + "1.1.0 · staging on gpu-1</option>",
		`<option value="` + v3.ID + `">1.2.0 · not deployed</option>`,
		`name="key" value="support-1.1.0"`,
		`placeholder="support: 1.0.0 vs 1.1.0"`,
		`name="rollout_steps" value="10, 50, 100"`,
		`name="rollout_hold_hours" min="0" step="any" value="24"`,
		`name="treatment_percent" min="0" max="100" step="any" value="50"`,
		`<select name="metric.thumbs_up_rate" aria-label="Use of Thumbs-up rate">` + `<option value="">Not measured</option>` + selected("primary") + `Primary metric</option>`,
		"The share of thumbs up among each unit&#39;s thumbs up and thumbs down.",
		"lower is better", // latency and corrections
	} {
		if !strings.Contains(form, want) {
			t.Errorf("the form lacks %s", want)
		}
	}
	if strings.Contains(form, `name="rollout" value="1" checked`) {
		t.Error("the rollout plan is on before it is chosen")
	}
	// Opened from the list: the only model, production's version against
	// the newest other one.
	if body := page.Get("/experiments/new").Must(t, http.StatusOK).Body; !strings.Contains(body, selected(v1.ID)) || !strings.Contains(body, selected(v3.ID)) {
		t.Error("the form from the list does not preselect production against the newest version")
	}
	page.Get("/experiments/new?treatment=nope").Must(t, http.StatusNotFound)
	page.Get("/experiments/new?treatment="+foreign.ID).Must(t, http.StatusNotFound)

	good := url.Values{"model": {"support"}, "key": {"support-1.1.0"}, "control": {v1.ID}, "treatment": {v2.ID}, "treatment_percent": {"50"},
		"coverage_percent": {"80"}, "min_sample_per_arm": {"250"}, "ends_on": {time.Now().AddDate(0, 0, 14).Format("2006-01-02")},
		"metric.avg_rating": {"primary"}, "metric.thumbs_up_rate": {"secondary"}, "metric.latency": {"guardrail"},
		"rollout": {"1"}, "rollout_steps": {"10% → 50% → 100%"}, "rollout_hold_hours": {"1.5"}, "rollout_min_units": {"20"}}
	with := func(changes ...string) url.Values {
		v := cloneForm(good)
		for i := 0; i < len(changes); i += 2 {
			v.Set(changes[i], changes[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		errors map[string]string // field: part of its message
		kept   []string
	}{
		{"the form's own units", with("rollout_steps", "10, 50", "rollout_hold_hours", "-1", "rollout_min_units", "0", "coverage_percent", "0",
			"metric.latency", "primary", "ends_on", "soon"),
			map[string]string{"rollout_steps": "must end at 100", "rollout_hold_hours": "0 to 2160 hours", "rollout_min_units": "from 1 to",
				"coverage_percent": "above 0% and at most 100%", "metrics": "only one primary metric (now Average rating, Latency)", "ends_on": "must be a date"},
			[]string{`name="rollout_steps" value="10, 50"`, `name="coverage_percent" min="0" max="100" step="any" value="0"`, `name="rollout" value="1" checked`,
				`<select name="metric.latency" aria-label="Use of Latency"><option value="">Not measured</option><option value="primary" selected>`}},
		{"no rollout, a share of 100%", with("rollout", "", "treatment_percent", "100", "metric.avg_rating", ""),
			map[string]string{"treatment_percent": "below 100%", "metrics": "choose one primary metric"}, nil},
		{"steps that fall", with("rollout_steps", "50, 10, 100"), map[string]string{"rollout_steps": "must rise from step to step"}, nil},
		{"the service's checks", with("key", "Support V3", "ends_on", "2001-01-01"),
			map[string]string{"key": "lower-case letters", "ends_on": "must be in the future"}, []string{`name="key" value="Support V3"`}},
		{"another organisation's version", with("control", foreign.ID), map[string]string{"control": "is not a model version of this organisation"}, nil},
		{"the same version twice", with("control", v2.ID), map[string]string{"treatment": "another version of the same model"}, nil},
		{"no version", with("treatment", ""), map[string]string{"treatment": "is required: choose a version"}, nil},
		{"the form's own address", with("key", "new"), map[string]string{"key": "choose another"}, nil},
	} {
		body := page.PostForm("/experiments", tc.form).Must(t, http.StatusUnprocessableEntity).Body
		for field, msg := range tc.errors {
			if got, ok := fieldMessage(body, field); !ok {
				t.Errorf("%s: no message beside %s", tc.name, field)
			} else if !strings.Contains(got, msg) {
				t.Errorf("%s: %s says %q, want %q in it", tc.name, field, got, msg)
			}
		}
		if n := strings.Count(body, `class="field-error"`); n != len(tc.errors) {
			t.Errorf("%s: %d messages, want %d", tc.name, n, len(tc.errors))
		}
		for _, want := range tc.kept {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the form lost %s", tc.name, want)
			}
		}
	}
	var list struct {
		Data []experimentDoc `json:"data"`
	}
	if s.API(viewer, http.MethodGet, "/api/experiments", nil).Must(t, http.StatusOK).JSON(t, &list); len(list.Data) != 0 {
		t.Fatalf("refused forms stored %d experiments", len(list.Data))
	}

	// HTMX: a refusal answers the form to swap in, a success where to go.
	hx := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Hx-Request": {"true"}}
	bad := with("coverage_percent", "0", "_csrf", page.CSRF())
	if res := page.Do(http.MethodPost, "/experiments", strings.NewReader(bad.Encode()), hx); res.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(res.Body, `<div id="experiment-new"`) || !strings.Contains(res.Body, `id="err-coverage_percent"`) {
		t.Errorf("an HTMX refusal: %d", res.Status)
	}
	ok := with("_csrf", page.CSRF())
	res := page.Do(http.MethodPost, "/experiments", strings.NewReader(ok.Encode()), hx)
	if res.Status != http.StatusNoContent || res.Header.Get("HX-Redirect") != "/experiments/support-1.1.0" {
		t.Fatalf("an HTMX success: %d, HX-Redirect %q", res.Status, res.Header.Get("HX-Redirect"))
	}
	var e experimentDoc
	s.API(viewer, http.MethodGet, "/api/experiments/support-1.1.0", nil).Must(t, http.StatusOK).JSON(t, &e)
	endDay := good.Get("ends_on")
	if e.Status != "draft" || e.Name != "support: 1.0.0 vs 1.1.0" || e.TrafficSplit != 0.1 || e.Coverage != 0.8 || e.MinSamplePerArm != 250 ||
		strings.Join(e.Metrics, ",") != "avg_rating,thumbs_up_rate" || strings.Join(e.Guardrails, ",") != "latency" ||
		e.EndsAt.UTC().Format("2006-01-02 15:04:05") != endDay+" 23:59:59" || e.Rollout == nil ||
		fmt.Sprint(e.Rollout.Steps) != "[0.1 0.5 1]" || e.Rollout.HoldMins != 90 || e.Rollout.MinUnits != 20 ||
		e.Arms[0].ModelVersionID != v1.ID || e.Arms[1].ModelVersionID != v2.ID {
		t.Errorf("created %+v", e)
	}
	panel := page.Get("/experiments/support-1.1.0").Must(t, http.StatusOK).Body
	for _, want := range []string{"Not started", "[10%] → 50% → 100%, each held 90 minutes with 20 units per arm",
		`class="primary" id="start-experiment">Start</button>`, "Not checked: no unit is assigned yet."} {
		if !strings.Contains(panel, want) {
			t.Errorf("the draft's panel lacks %s", want)
		}
	}

	// Without a rollout plan the share is the form's; a second start is
	// refused beside the buttons.
	page.PostForm("/experiments", with("key", "plain", "rollout", "", "treatment_percent", "30", "ends_on", "")).Must(t, http.StatusSeeOther)
	var plain experimentDoc
	s.API(viewer, http.MethodGet, "/api/experiments/plain", nil).Must(t, http.StatusOK).JSON(t, &plain)
	if plain.TrafficSplit != 0.3 || plain.Rollout != nil || !plain.EndsAt.IsZero() {
		t.Errorf("without a rollout: %+v", plain)
	}
	page.PostForm("/experiments/plain/start", nil).Must(t, http.StatusSeeOther)
	if body := page.PostForm("/experiments/plain/end", url.Values{"winner": {"nobody"}}).Must(t, http.StatusUnprocessableEntity).Body; !strings.Contains(body, `id="err-winner">Winner: must be control, treatment or inconclusive`) {
		t.Error("a bad winner is not shown beside the end form")
	}
	if body := page.PostForm("/experiments/plain/start", nil).Must(t, http.StatusConflict).Body; !strings.Contains(body, `id="err-status">The experiment is running: it cannot become running.`) {
		t.Error("a refused start is not shown beside the buttons")
	}

	// The split form keeps what was typed when refused.
	body := page.PostForm("/experiments/plain/traffic", url.Values{"treatment_percent": {"30"}, "coverage_percent": {"0"}, "reseed": {"1"}}).
		Must(t, http.StatusUnprocessableEntity).Body
	if !strings.Contains(body, `id="err-coverage_percent">must be above 0% and at most 100%`) || !strings.Contains(body, `name="coverage_percent" min="0" max="100" step="any" value="0"`) ||
		!strings.Contains(body, `name="reseed" value="1" checked`) || strings.Contains(body, `id="err-treatment_percent"`) {
		t.Errorf("a refused split lost the form or named the wrong field: %s", body[strings.Index(body, `id="traffic-form"`):])
	}
	page.PostForm("/experiments/plain/traffic", url.Values{"treatment_percent": {"40"}, "coverage_percent": {"50"}}).Must(t, http.StatusSeeOther)
	s.API(viewer, http.MethodGet, "/api/experiments/plain", nil).Must(t, http.StatusOK).JSON(t, &e)
	if e.TrafficSplit != 0.4 || e.Coverage != 0.5 {
		t.Errorf("after the split form: %+v", e)
	}
	// A person's pause says who paused it, and never "Keep running".
	page.PostForm("/experiments/plain/pause", nil).Must(t, http.StatusSeeOther)
	var r resultsDoc
	s.API(viewer, http.MethodGet, "/api/experiments/plain/results", nil).Must(t, http.StatusOK).JSON(t, &r)
	if r.Recommendation.Action != "paused" {
		t.Errorf("a paused experiment recommends %+v", r.Recommendation)
	}
	body = page.Get("/experiments/plain").Must(t, http.StatusOK).Body
	if !strings.Contains(body, "<h2>Paused</h2>") || !strings.Contains(body, `id="decided">By ad@acme.test,`) || strings.Contains(body, "Keep running") ||
		!strings.Contains(body, `class="primary" id="start-experiment">Resume</button>`) {
		t.Error("the paused panel does not say who paused it, or offers Keep running")
	}
}

// fieldMessage is the message a page shows beside a form's field.
func fieldMessage(body, field string) (string, bool) {
	_, after, ok := strings.Cut(body, `id="err-`+field+`">`)
	if !ok {
		return "", false
	}
	msg, _, _ := strings.Cut(after, "</p>")
	return html.UnescapeString(msg), true
}

// The cumulative effect is read against the experiment's own time: hour
// by hour while the phase is young, each point at the end of its hour (or
// now, while the hour lasts), from the phase's start; two days on it is
// read day by day. The last point's effect is the metrics table's.
func TestExperimentTimeline(t *testing.T) {
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
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "young", "control_model_id": v1.ID, "treatment_model_id": v2.ID}).
		Must(t, http.StatusCreated)
	var e struct {
		StartedAt time.Time `json:"started_at"`
	}
	s.API(admin, http.MethodPost, "/api/experiments/young/start", nil).Must(t, http.StatusOK).JSON(t, &e)
	feedExperiment(t, s, assistant, "young", 400, 5, 7)
	now := time.Now()

	type timeline struct {
		Metrics []struct {
			Arms []struct {
				RelativeChange *float64 `json:"relative_change"`
			} `json:"arms"`
		} `json:"metrics"`
		Timeline []struct {
			Day    time.Time `json:"day"`
			At     time.Time `json:"at"`
			Effect float64   `json:"effect"`
		} `json:"timeline"`
		Start time.Time `json:"timeline_start"`
		Unit  string    `json:"timeline_unit"`
	}
	var r timeline
	s.API(admin, http.MethodGet, "/api/experiments/young/results", nil).Must(t, http.StatusOK).JSON(t, &r)
	if r.Unit != "hour" || !r.Start.Equal(e.StartedAt) || len(r.Timeline) != 1 {
		t.Fatalf("a young experiment's timeline: %+v", r)
	}
	p := r.Timeline[0]
	if hour := now.UTC().Truncate(time.Hour); !p.Day.Equal(hour) && !p.Day.Equal(hour.Add(-time.Hour)) {
		t.Errorf("the point's hour %v, want %v", p.Day, hour)
	}
	if p.At.Before(e.StartedAt) || p.At.After(time.Now()) {
		t.Errorf("the point is at %v: before the start %v or after now", p.At, e.StartedAt)
	}
	if change := *r.Metrics[0].Arms[1].RelativeChange; p.Effect != change {
		t.Errorf("the last point's effect %v, the table's %v", p.Effect, change)
	}

	// Three days on, by the service's clock.
	later := *s.App.Services.Experiments
	later.Now = func() time.Time { return now.Add(72 * time.Hour) }
	res, err := later.Results(context.Background(), org, "young")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timeline) != 1 {
		t.Fatalf("three days on: %+v", res.Timeline)
	}
	day := res.Timeline[0].Day // the feedback's UTC day: today's, or yesterday's just after midnight
	if today := now.UTC().Truncate(24 * time.Hour); !day.Equal(today) && !day.Equal(today.Add(-24*time.Hour)) {
		t.Errorf("the point's day %v, want %v", day, today)
	}
	if res.TimelineUnit != "day" || !res.Timeline[0].At.Equal(day.Add(24*time.Hour)) {
		t.Errorf("three days on: %s %+v, want the day %v", res.TimelineUnit, res.Timeline, day)
	}
}
