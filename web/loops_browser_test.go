package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// In a browser: an admin makes a loop with the form (a bad value comes
// back beside its field, with the rest as typed), and its page shows each
// run as a pipeline: one that reached production with a link under each
// step, one skipped with nothing new, and one a gate stopped with its
// reasons; a loop that waits for approval names who may approve, and the
// Approve button lets the run go on. The artefacts' pages say which run
// made them.
func TestBrowserLoops(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	b := webtest.Browser(t)
	signIn(t, b, w.s, "ad@acme.test")

	// The form: everything filled but a cost cap of zero and no dataset.
	err := chromedp.Do(b,
		chromedp.Navigate(w.s.URL+"/loops/new"),
		chromedp.WaitVisible(`#loop-form`),
		chromedp.SetValue(`input[name=name]`, "support-weekly"),
		chromedp.SetValue(`input[name=registered_model]`, "support"),
		chromedp.SetValue(`input[name=min_new_items]`, "20"),
		chromedp.SetValue(`input[name=filter_tag]`, "weekly"),
		chromedp.SetValue(`input[name=base_model]`, loopBase),
		chromedp.SetValue(`input[name=max_cost_usd]`, "0"),
		chromedp.SetValue(`select[name=golden_set_version_id]`, w.set.String()),
		chromedp.SetValue(`select[name=judge_endpoint]`, "judge"),
		chromedp.SetValue(`select[name=deploy_target]`, "openai-prod"),
		chromedp.Click(`#loop-methods input[value=correction]`), // leaves same_query alone
		chromedp.Click(`#loop-save`),
		chromedp.WaitVisible(`#err-max_cost_usd`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if msg := text(t, b, `#err-max_cost_usd`); !strings.Contains(msg, "must be above 0") {
		t.Errorf("the cap's message: %q", msg)
	}
	if msg := text(t, b, `#err-dataset_name`); msg != "is required" {
		t.Errorf("the dataset's message: %q", msg)
	}
	if v := eval[string](t, b, `document.querySelector('input[name=filter_tag]').value`); v != "weekly" {
		t.Errorf("the form came back without the typed tag: %q", v)
	}
	webtest.Screenshot(t, b, "after-loop-form-refused")
	err = chromedp.Do(b,
		chromedp.SetValue(`input[name=max_cost_usd]`, "20"),
		chromedp.SetValue(`input[name=dataset_name]`, "support-training"),
		chromedp.Click(`#loop-save`),
		chromedp.WaitVisible(`#loop-policy`),
	)
	if err != nil {
		t.Fatal(err)
	}
	loop := strings.TrimPrefix(eval[string](t, b, `location.pathname`), "/loops/")
	if got := text(t, b, `#loop-policy`); !strings.Contains(got, "20 new items (Status Approved, Tag weekly)") || !strings.Contains(got, "pairs by Same query") {
		t.Errorf("the policy in words: %q", got)
	}

	// Three runs: to production, skipped, stopped at the gate.
	w.approve(t, w.post(t, 20, "weekly")...)
	var runs []loopRunDoc
	w.waitFor(t, "the first run", func() bool {
		runs = w.runs(t, loop)
		return len(runs) == 1 && w.settle(t, runs[0].ID).Status == "succeeded"
	})
	w.s.API(w.admin, http.MethodPost, "/api/loops/"+loop+"/run", nil).Must(t, http.StatusAccepted)
	w.waitFor(t, "the skipped run", func() bool {
		runs = w.runs(t, loop)
		return len(runs) == 2 && w.settle(t, runs[0].ID).Status == "skipped"
	})
	w.worse.Store(true)
	w.approve(t, w.post(t, 20, "weekly")...)
	w.waitFor(t, "the failed run", func() bool {
		runs = w.runs(t, loop)
		return len(runs) == 3 && w.settle(t, runs[0].ID).Status == "failed"
	})
	w.worse.Store(false)

	err = chromedp.Do(b, chromedp.Navigate(w.s.URL+"/loops/"+loop), chromedp.WaitVisible(`#run-3`))
	if err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]string{"#run-1": "succeeded", "#run-2": "skipped", "#run-3": "failed"} {
		if got := eval[string](t, b, `document.querySelector('`+run+`').dataset.status`); got != want {
			t.Errorf("%s is %s, want %s", run, got, want)
		}
	}
	if n := eval[int](t, b, `document.querySelectorAll('#run-1 .pipeline .step-succeeded').length`); n != 9 {
		t.Errorf("%d of run 1's steps succeeded on the page", n)
	}
	if n := eval[int](t, b, `[...document.querySelectorAll('#run-1 .pipeline .step')].filter(s => !s.querySelector('a.step-link')).length`); n != 0 {
		t.Errorf("%d of run 1's steps link to nothing", n)
	}
	if got := text(t, b, `#run-3 .run-reason`); !strings.Contains(got, "The evaluation gate blocks the version: Mean reward 0.100") {
		t.Errorf("the failed run's reason: %q", got)
	}
	if got := eval[string](t, b, `document.querySelector('#run-3 [data-step=gate]').dataset.status`); got != "failed" {
		t.Errorf("run 3 stopped at %s", got)
	}
	webtest.Screenshot(t, b, "after-loop")

	// A run's own page, and an artefact's link back to it.
	err = chromedp.Do(b, chromedp.Click(`#run-1 h3 a`), chromedp.WaitVisible(`#steps`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#steps [data-step=dataset] .step-detail`); !strings.Contains(got, "same query 10") {
		t.Errorf("the dataset step's detail: %q", got)
	}
	webtest.Screenshot(t, b, "after-loop-run")
	err = chromedp.Do(b, chromedp.Click(`#steps [data-step=train] a.step-link`), chromedp.WaitVisible(`#loop-origin`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#loop-origin`); !strings.Contains(got, "Made by the loop support-weekly, run #1 (Train step)") {
		t.Errorf("the job's page says %q", got)
	}

	// Approval before deployment: the page names who may approve; the
	// button lets the run go on.
	careful := w.create(t, w.policy("support-careful", "careful", 4, "before_deploy"))
	w.approve(t, w.post(t, 4, "careful")...)
	w.waitFor(t, "the careful run to wait", func() bool {
		runs = w.runs(t, careful)
		return len(runs) == 1 && w.settle(t, runs[0].ID).Status == "waiting_approval"
	})
	err = chromedp.Do(b, chromedp.Navigate(w.s.URL+"/loops/"+careful), chromedp.WaitVisible(`#approval-1`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#approval-1`); !strings.Contains(got, "Waiting for approval before the new version is deployed. ad@acme.test or boss@acme.test may approve it.") {
		t.Errorf("the approval box: %q", got)
	}
	webtest.Screenshot(t, b, "after-loop-approval")
	if err := chromedp.Do(b, chromedp.Click(`#approval-1 .approve-run`), chromedp.WaitVisible(`#steps`)); err != nil {
		t.Fatal(err)
	}
	if r := w.settle(t, runs[0].ID); r.Status != "succeeded" {
		t.Errorf("the approved run %s: %s", r.Status, r.Reason)
	}
}

// Routing from the page: an admin makes a team and a rule that hands
// thumbs-down to it; Route now assigns new items, and a curator's
// Overview counts them under My assignments. A refused rule comes back
// with its message beside the field.
func TestBrowserRouting(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ad@acme.test", "admin")
	s.User(org, "ann@acme.test", "curator")
	s.User(org, "bob@acme.test", "curator")
	key := s.APIKey(org, "widget", "curator")
	b := webtest.Browser(t)
	signIn(t, b, s, "ad@acme.test")

	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/feedback/routing"),
		chromedp.WaitVisible(`#team-form`),
		chromedp.SetValue(`#team-form input[name=name]`, "Support"),
		chromedp.Click(`#team-form input[name=member]`),
		chromedp.Click(`#team-form input[name=member]:not(:checked)`),
		chromedp.Click(`#team-save`),
		chromedp.WaitVisible(`#teams [data-team=Support]`),
		chromedp.SetValue(`#rule-form input[name=name]`, "Thumbs down"),
		chromedp.SetValue(`#rule-form input[name=cap]`, "0"),
		chromedp.Click(`#rule-save`),
		chromedp.WaitVisible(`#err-cap`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if msg := text(t, b, `#err-cap`); !strings.Contains(msg, "from 1 to") {
		t.Errorf("the cap's message: %q", msg)
	}
	teamID := eval[string](t, b, `[...document.querySelectorAll('select[name=team_id] option')].find(o => o.textContent === 'Support').value`)
	err = chromedp.Do(b,
		chromedp.SetValue(`#rule-form input[name=cap]`, "2"),
		chromedp.SetValue(`select[name=team_id]`, teamID),
		chromedp.Click(`#rule-save`),
		chromedp.WaitVisible(`#routing-rules [data-rule="Thumbs down"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	for i := range 5 {
		items = append(items, map[string]any{"query": "Why? " + url.QueryEscape(string(rune('a'+i))), "response": "Because.", "feedback_type": "thumbs_down"})
	}
	items = append(items, map[string]any{"query": "Thanks", "response": "Welcome.", "feedback_type": "thumbs_up"})
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
	err = chromedp.Do(b, chromedp.Navigate(s.URL+"/feedback/routing"), chromedp.WaitVisible(`#route-now`), chromedp.Click(`#route-now`),
		chromedp.WaitVisible(`.flash`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `.flash`); !strings.Contains(got, "Routed 4 items. 1 item no curator could take") {
		t.Errorf("after Route now: %q", got)
	}
	if got := text(t, b, `#routing-rules [data-rule="Thumbs down"]`); !strings.Contains(got, "the team Support") || !strings.Contains(got, "4") {
		t.Errorf("the rule's row: %q", got)
	}
	webtest.Screenshot(t, b, "after-routing")

	ann := webtest.Browser(t)
	signIn(t, ann, s, "ann@acme.test")
	if err := chromedp.Do(ann, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(`#card-mine`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(text(t, ann, `#card-mine`)), " "); !strings.Contains(got, "2 items wait for your review") {
		t.Errorf("ann's assignments: %q", got)
	}
	webtest.Screenshot(t, ann, "after-overview-assignments")
}

// The item page says whether an item may be training data and why not,
// and a curator's decision changes it.
func TestBrowserTrainingData(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	key := s.APIKey(org, "widget", "curator")
	var items []map[string]any
	for i := range 3 {
		items = append(items, map[string]any{"query": "Question " + string(rune('a'+i)), "response": "Answer.", "feedback_type": "thumbs_down",
			"comment": "Visit spam.example for cheap followers now!!"})
	}
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
	if _, err := s.App.Services.Hygiene.Check(context.Background(), org, time.Time{}); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/feedback?limit=1", nil).Must(t, http.StatusOK).JSON(t, &list)
	b := webtest.Browser(t)
	signIn(t, b, s, "cu@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/feedback/"+list.Data[0].ID), chromedp.WaitVisible(`#training-data`)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#training-data`); !strings.Contains(got, "left out its comment is pasted on other items") || !strings.Contains(got, "Duplicate spam") {
		t.Errorf("the card says %q", got)
	}
	webtest.Screenshot(t, b, "after-item-training-data")
	err := chromedp.Do(b,
		chromedp.SetValue(`#training-data select`, "true"),
		chromedp.Click(`#training-data button`),
		chromedp.WaitVisible(`#training-data[data-training=true]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#training-data`); !strings.Contains(got, "may be used") || !strings.Contains(got, "Decided by cu@acme.test") {
		t.Errorf("after the decision the card says %q", got)
	}
}
