package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// feedExperiment assigns n units of a running experiment and sends one
// thumb for each in it: up for controlUp (treatmentUp) units in ten of the control
// (the treatment).
func feedExperiment(t *testing.T, s *webtest.Server, assistant, key string, n, controlUp, treatmentUp int) {
	t.Helper()
	var items []map[string]any
	for from := 0; from < n; from += 1000 {
		ids := []string{}
		for i := from; i < min(n, from+1000); i++ {
			ids = append(ids, fmt.Sprintf("%s-u-%d", key, i))
		}
		var out struct {
			Data []assignmentDoc `json:"data"`
		}
		s.API(assistant, http.MethodPost, "/api/experiments/"+key+"/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
		for i, a := range out.Data {
			if !a.InExperiment {
				continue // outside the coverage: its feedback is the control's, not the experiment's
			}
			up := controlUp
			if a.ArmIndex == 1 {
				up = treatmentUp
			}
			kind := "thumbs_down"
			if (from+i)%10 < up {
				kind = "thumbs_up"
			}
			items = append(items, map[string]any{"query": "q", "response": a.UnitID, "feedback_type": kind, "user_id": a.UnitID, "experiment": key})
		}
	}
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
}

// signIn signs the browser in.
func signIn(t *testing.T, b context.Context, s *webtest.Server, email string) {
	t.Helper()
	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, email),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
	)
	if err != nil {
		t.Fatal(err)
	}
}

// effectData is the cumulative-effect chart's data as the panel gives it.
type effectData struct {
	Start int64     `json:"start"`
	Unit  string    `json:"unit"`
	X     []float64 `json:"x"`
}

// checkEffectAxis asserts the effect chart is drawn against the
// experiment's own time: hours since its start, for data minutes old.
func checkEffectAxis(t *testing.T, b context.Context, started time.Time) {
	t.Helper()
	var d effectData
	if err := json.Unmarshal([]byte(eval[string](t, b, `document.querySelector('.chart[data-chart=ab-effect]').dataset.effect`)), &d); err != nil {
		t.Fatal(err)
	}
	if d.Unit != "hours" || d.Start != started.Unix() || len(d.X) == 0 || d.X[len(d.X)-1] <= 0 || d.X[len(d.X)-1] > 1 {
		t.Errorf("the effect chart's x axis: %+v, want hours since %d under 1", d, started.Unix())
	}
	if legend := text(t, b, `#effect-chart .u-legend`); !strings.Contains(legend, "Since the start") {
		t.Errorf("the chart's legend %q", legend)
	}
}

// From a version's page: "A/B Test" opens the form with that version on
// trial against production's, each shown with where it is served; a
// refused rollout plan comes back in place (HTMX) with its messages beside
// the fields and what was typed; the corrected form creates the draft, its
// panel leads with Start, and once started and fed the panel shows the
// rollout's first step, the metrics and the effect chart in hours since
// the start. The form and the panel fit a 390 px screen.
func TestBrowserExperimentFromVersion(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	assistant := s.APIKey(org, "assistant", "curator")
	_, v1, v2, _ := servedVersions(t, s, admin, viewer)

	b := webtest.Browser(t)
	dialogs := webtest.AcceptDialogs(t, b)
	signIn(t, b, s, "ada@acme.test")
	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/models/versions/"+v2.ID),
		chromedp.WaitVisible(`#ab-test`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-model-version")
	if err := chromedp.Do(b, chromedp.Click(`#ab-test`), chromedp.WaitVisible(`#experiment-form`)); err != nil {
		t.Fatal(err)
	}
	// A click before htmx has taken the form over submits it natively,
	// which answers the same refusal at /experiments: wait for the page's
	// scripts, as a person's click comes after them.
	waitFor(t, b, `typeof htmx !== 'undefined'`)
	webtest.Screenshot(t, b, "after-experiment-new")
	for sel, want := range map[string]string{
		`select[name=control]`:   "1.0.0 · production on gpu-1",
		`select[name=treatment]`: "1.1.0 · staging on gpu-1",
	} {
		if got := eval[string](t, b, `(s => s.options[s.selectedIndex].text)(document.querySelector('`+sel+`'))`); got != want {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}

	// A rollout that does not reach 100% and two primary metrics.
	err = chromedp.Do(b,
		chromedp.Click(`input[name=rollout]`),
		chromedp.SetValue(`input[name=rollout_steps]`, "10, 50"),
		chromedp.SetValue(`select[name="metric.avg_rating"]`, "primary"),
		chromedp.Click(`#create-experiment`),
		chromedp.WaitVisible(`#err-rollout_steps`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-new-refused")
	if got := text(t, b, `#err-rollout_steps`); got != "must end at 100: the full rollout" {
		t.Errorf("beside the steps: %q", got)
	}
	if got := text(t, b, `#err-metrics`); !strings.Contains(got, "only one primary metric") {
		t.Errorf("beside the metrics: %q", got)
	}
	kept := eval[[]any](t, b, `[location.pathname, document.querySelector('input[name=rollout]').checked, document.querySelector('input[name=rollout_steps]').value,
		document.querySelector('select[name="metric.avg_rating"]').value, document.querySelector('select[name=treatment]').value]`)
	if fmt.Sprint(kept) != fmt.Sprint([]any{"/experiments/new", true, "10, 50", "primary", v2.ID}) {
		t.Errorf("after the refusal: %v", kept)
	}

	err = chromedp.Do(b,
		chromedp.SetValue(`input[name=rollout_steps]`, "10, 50, 100"),
		chromedp.SetValue(`select[name="metric.avg_rating"]`, "guardrail"),
		chromedp.Click(`#create-experiment`),
		chromedp.WaitVisible(`#recommendation`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#recommendation h2`); got != "Not started" {
		t.Errorf("a draft's verdict %q", got)
	}
	if got := eval[string](t, b, `document.querySelector('#start-experiment').className`); got != "primary" {
		t.Errorf("Start is %q", got)
	}
	if got := text(t, b, `#rollout`); got != "[10%] → 50% → 100%, each held 1 day with 100 units per arm" {
		t.Errorf("rollout %q", got)
	}
	err = chromedp.Do(b,
		chromedp.Click(`#start-experiment`),
		chromedp.WaitVisible(`#experiment-status[data-status=running]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#traffic`); !strings.HasPrefix(got, "10% to the treatment") {
		t.Errorf("traffic %q", got)
	}
	// The split form (a rollout plan sets the share: the coverage is left)
	// refuses in place, confirmed first, and keeps what was typed.
	err = chromedp.Do(b,
		chromedp.SetValue(`#traffic-form input[name=coverage_percent]`, "0"),
		chromedp.Click(`#change-split`),
		chromedp.WaitVisible(`#err-coverage_percent`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval[[]string](t, b, `[location.pathname, document.querySelector('#traffic-form input[name=coverage_percent]').value,
		document.querySelector('#err-coverage_percent').innerText]`); fmt.Sprint(got) != "[/experiments/support-1.1.0 0 must be above 0% and at most 100%]" {
		t.Errorf("the refused split: %v", got)
	}
	err = chromedp.Do(b,
		chromedp.SetValue(`#traffic-form input[name=coverage_percent]`, "80"),
		chromedp.Click(`#change-split`),
		chromedp.WaitVisible(`#traffic-form input[name=coverage_percent][value="80"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#traffic`); got != "10% to the treatment, 80% of units in the experiment" {
		t.Errorf("after the split form: %q", got)
	}
	if dialogs.Load() != 2 {
		t.Errorf("%d confirmations for two changes of the split", dialogs.Load())
	}
	var e struct {
		StartedAt time.Time `json:"started_at"`
		Arms      []struct {
			ModelVersionID string `json:"model_version_id"`
		} `json:"arms"`
		Guardrails []string `json:"guardrails"`
	}
	s.API(viewer, http.MethodGet, "/api/experiments/support-1.1.0", nil).Must(t, http.StatusOK).JSON(t, &e)
	// Latency is a guardrail as the form prefills it (the seed's criterion).
	if len(e.Arms) != 2 || e.Arms[0].ModelVersionID != v1.ID || e.Arms[1].ModelVersionID != v2.ID || fmt.Sprint(e.Guardrails) != "[avg_rating latency]" {
		t.Errorf("created %+v", e)
	}

	feedExperiment(t, s, assistant, "support-1.1.0", 2000, 5, 8)
	err = chromedp.Do(b,
		chromedp.Reload(),
		chromedp.WaitVisible(`.chart[data-chart=ab-effect] canvas`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-panel")
	checkEffectAxis(t, b, e.StartedAt)
	// The coverage changed within the phase: no check, and no badge.
	if got := text(t, b, `#srm`); got != "Not checked: the split or the coverage changed within this phase, and units assigned before keep their arm." ||
		eval[int](t, b, `document.querySelectorAll('#srm .badge').length`) != 0 {
		t.Errorf("sample ratio %q", got)
	}
	if got := text(t, b, `#metrics tr[data-metric=thumbs_up_rate] .p-value`); got != "< 0.0001" {
		t.Errorf("the thumbs-up rate's p-value %q", got)
	}

	panel := s.URL + "/experiments/support-1.1.0"
	form := s.URL + "/experiments/new?treatment=" + v2.ID
	for _, size := range []struct{ w, h int64 }{{390, 844}, {1280, 800}} {
		if err := chromedp.Do(b, chromedp.EmulateViewport(size.w, size.h)); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{form, panel} {
			t.Run(fmt.Sprintf("%d%s", size.w, strings.TrimPrefix(u, s.URL)), func(t *testing.T) { checkPage(t, b, u) })
		}
		if size.w == 390 {
			webtest.Screenshot(t, b, "after-experiment-panel-390")
		}
	}
}

// The panel tells one story: after an automatic rollback it says "Rolled
// back" with the rollout's reason and who did it, shows no sample-ratio
// badge for a check that did not run, and leads with ending the experiment
// keeping the control; an ended one shows its winner and who chose it, and
// offers no decision. Neither says "Keep running" or "Stop now".
func TestBrowserABPanelStory(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	assistant := s.APIKey(org, "assistant", "curator")
	_, v1, v2, _ := servedVersions(t, s, admin, viewer)
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "harmful", "name": "Gradual rollout of 1.1.0", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID, "metrics": []string{"thumbs_up_rate"},
		"rollout": map[string]any{"steps": []float64{0.1, 0.5, 1}, "hold_minutes": 0, "min_units_per_arm": 50}}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/harmful/start", nil).Must(t, http.StatusOK)
	feedExperiment(t, s, assistant, "harmful", 3000, 7, 2)
	if err := s.App.Services.Experiments.CheckRollouts(context.Background()); err != nil {
		t.Fatal(err)
	}
	var harmful struct {
		Status     string    `json:"status"`
		StartedAt  time.Time `json:"started_at"`
		StopReason string    `json:"stop_reason"`
	}
	s.API(viewer, http.MethodGet, "/api/experiments/harmful", nil).Must(t, http.StatusOK).JSON(t, &harmful)
	if harmful.Status != "paused" || !strings.HasPrefix(harmful.StopReason, "Rolled back automatically at the 10% step") {
		t.Fatalf("the rollout did not roll back: %+v", harmful)
	}
	var r resultsDoc
	s.API(viewer, http.MethodGet, "/api/experiments/harmful/results", nil).Must(t, http.StatusOK).JSON(t, &r)
	if r.Recommendation.Action != "rolled_back" || !strings.HasPrefix(r.Recommendation.Reason, harmful.StopReason) {
		t.Errorf("the API recommends %+v after a rollback", r.Recommendation)
	}

	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "done", "name": "Finished test", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/done/start", nil).Must(t, http.StatusOK)
	feedExperiment(t, s, assistant, "done", 400, 5, 6)
	s.API(admin, http.MethodPost, "/api/experiments/done/end", map[string]any{"winner": "treatment", "reason": "Clear enough."}).Must(t, http.StatusOK)

	b := webtest.Browser(t)
	signIn(t, b, s, "ada@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/experiments"), chromedp.WaitVisible(`#new-experiment`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiments")

	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/experiments/harmful"),
		chromedp.WaitVisible(`.chart[data-chart=ab-effect] canvas`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-rolled-back")
	if got := text(t, b, `#recommendation h2`); got != "Rolled back" {
		t.Errorf("after the rollback the verdict is %q", got)
	}
	if got := text(t, b, `#verdict-reason`); !strings.HasPrefix(got, "Rolled back automatically at the 10% step: The thumbs-up rate is significantly lower in the treatment") {
		t.Errorf("the reason %q", got)
	}
	if got := text(t, b, `#decided`); !strings.HasPrefix(got, "By rollout, ") {
		t.Errorf("who rolled back: %q", got)
	}
	if got := text(t, b, `#srm`); !strings.HasPrefix(got, "Not checked: ") || eval[int](t, b, `document.querySelectorAll('#srm .badge').length`) != 0 {
		t.Errorf("the sample ratio %q carries a badge", got)
	}
	checkEffectAxis(t, b, harmful.StartedAt)
	if got := text(t, b, `#metrics tr[data-metric=thumbs_up_rate] .p-value`); got != "< 0.0001" {
		t.Errorf("p-value %q", got)
	}
	buttons := eval[[]string](t, b, `[document.querySelector('#end-experiment').className, document.querySelector('#full-deploy').className,
		document.querySelector('#start-experiment').className, document.querySelector('#end-form select').value,
		[...document.querySelectorAll('#experiment-actions h3')].map(h => h.innerText).join(',')]`)
	if fmt.Sprint(buttons) != "[primary secondary secondary control Run,Traffic,Analysis,Conclude]" {
		t.Errorf("the decisions (end, deploy, resume, winner, groups): %v", buttons)
	}
	for _, contradiction := range []string{"Keep running", "Stop now", "Mismatch", "Recommendation:"} {
		if body := text(t, b, `main`); strings.Contains(body, contradiction) {
			t.Errorf("the rolled-back panel says %q", contradiction)
		}
	}

	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/experiments/done"), chromedp.WaitVisible(`#recommendation`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-completed")
	if got := text(t, b, `#recommendation h2`); got != "Ended: the treatment won" {
		t.Errorf("the ended verdict %q", got)
	}
	if got := text(t, b, `#verdict-reason`); got != "The treatment won. Clear enough." {
		t.Errorf("the ended reason %q", got)
	}
	if got := text(t, b, `#decided`); !strings.HasPrefix(got, "By ops, ") {
		t.Errorf("who ended it: %q", got)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#experiment-actions').length`); n != 0 {
		t.Error("an ended experiment offers decisions")
	}
	for _, contradiction := range []string{"Keep running", "Stop now", "Recommendation:"} {
		if body := text(t, b, `main`); strings.Contains(body, contradiction) {
			t.Errorf("the ended panel says %q", contradiction)
		}
	}
}
