package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// Review rubrics end to end in a real browser: an admin defines a rubric
// with a label, a rating, a span and a text question for items tagged
// "triage" and asks for two reviews of them; two curators review the
// three items with the keyboard beside the guidelines (Tab from question
// to question, number keys for the label and the rating, the arrow keys
// and a number for a span on the first item, Ctrl+Enter to save); they
// disagree on one item's urgency, which the admin adjudicates by
// choosing one of the two answers; the agreement page shows the
// question's alpha; and the rubric's export carries every answer.
//
// Urgency answers: (none, none), (none, critical), (minor, minor). By
// Krippendorff's coincidence-matrix formula ("Computing Krippendorff's
// Alpha-Reliability", 2011), nominal: n = 6, D_o = 2/6, D_e = 2(3·1 +
// 3·2 + 1·2)/30 = 22/30, alpha = 1 − (1/3)/(11/15) = 0.5455.
func TestBrowserRubricReview(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	ids := ingest(t, s, org,
		feedback.Item{Query: "Crushing chest pain since an hour?", Response: "Rest and drink some water, it will pass.", FeedbackType: "thumbs_down", Tags: []string{"triage"}},
		feedback.Item{Query: "Mild headache after a long day?", Response: "Rest in a dark room and drink water.", FeedbackType: "thumbs_up", Tags: []string{"triage"}},
		feedback.Item{Query: "Sprained ankle, swollen?", Response: "Ice it, raise it and see a doctor if it worsens.", FeedbackType: "thumbs_up", Tags: []string{"triage"}})
	ctx := webtest.Browser(t)
	signIn := func(email string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.Navigate(s.URL+"/login"),
			chromedp.WaitVisible(`input[name=email]`),
			chromedp.SendKeys(`input[name=email]`, email),
			chromedp.SendKeys(`input[name=password]`, webtest.Password),
			chromedp.Submit(`input[name=password]`),
			chromedp.WaitVisible(`#logout`),
		); err != nil {
			t.Fatalf("signing in as %s: %v", email, err)
		}
	}
	signOut := func() {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(`#logout`)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `location.pathname === '/login'`)
	}

	// The admin defines the rubric with the form, and asks for overlap.
	signIn("ada@acme.test")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/rubrics"),
		chromedp.WaitVisible(`#new-rubric`),
		chromedp.Click(`#new-rubric`),
		chromedp.WaitVisible(`#rubric-form`),
		chromedp.SendKeys(`#rubric-name`, "Clinical triage"),
		chromedp.SendKeys(`#rubric-tags`, "triage"),
		chromedp.SetValue(`#rubric-guidelines`, "# Urgency\n- **critical**: a red flag was missed\n- Mark the words that are *wrong*."),
		chromedp.SendKeys(`input[name=q0_key]`, "urgency_missed"),
		chromedp.SetValue(`select[name=q0_kind]`, "label"),
		chromedp.SendKeys(`input[name=q0_title]`, "Urgency missed?"),
		chromedp.SetValue(`textarea[name=q0_options]`, "none\nminor\ncritical"),
		chromedp.Click(`input[name=q0_required]`),
		chromedp.SendKeys(`input[name=q1_key]`, "accuracy"),
		chromedp.SetValue(`select[name=q1_kind]`, "rating"),
		chromedp.SendKeys(`input[name=q1_title]`, "Accuracy"),
		chromedp.SendKeys(`input[name=q1_min]`, "1"),
		chromedp.SendKeys(`input[name=q1_max]`, "5"),
		chromedp.SendKeys(`input[name=q2_key]`, "wrong"),
		chromedp.SetValue(`select[name=q2_kind]`, "span"),
		chromedp.SendKeys(`input[name=q2_title]`, "Which words are wrong?"),
		chromedp.SetValue(`textarea[name=q2_options]`, "error\nunsafe"),
		chromedp.SendKeys(`input[name=q3_key]`, "why"),
		chromedp.SetValue(`select[name=q3_kind]`, "text"),
		chromedp.SendKeys(`input[name=q3_title]`, "Why?"),
		chromedp.Click(`#save-rubric`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `/^\/rubrics\/[0-9a-f-]{36}$/.test(location.pathname) && document.querySelector('.flash') !== null`)
	if flash := text(t, ctx, ".flash"); !strings.Contains(flash, "version 1") {
		t.Errorf("after defining the rubric: %q", flash)
	}
	rubricID := eval[string](t, ctx, `location.pathname.split('/')[2]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/review"),
		chromedp.WaitVisible(`#new-plan`),
		chromedp.SendKeys(`#plan-tag`, "triage"),
		chromedp.SetValue(`#plan-overlap`, "2"),
		chromedp.Click(`#create-plan`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('[data-plan]') !== null`)
	signOut()

	key := func(k string, mods ...chromedp.Modifier) chromedp.Action[chromedp.Void] {
		if len(mods) == 0 {
			return chromedp.KeyEvent(k)
		}
		return chromedp.KeyEvent(k, chromedp.KeyModifiers(mods...))
	}
	urgency := map[string][]string{"cara@acme.test": {"1", "1", "2"}, "dan@acme.test": {"1", "3", "2"}}
	for _, who := range []string{"cara@acme.test", "dan@acme.test"} {
		signIn(who)
		for i := range ids {
			if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review"), chromedp.WaitVisible(`button[data-next-plan]`),
				chromedp.Click(`button[data-next-plan]`)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, `location.pathname === '/feedback/`+ids[i].String()+`' && document.querySelector('[data-rubric-form]') !== null`)
			if i == 0 && !strings.Contains(text(t, ctx, ".rubric .guidelines-body"), "critical: a red flag was missed") {
				t.Error("the guidelines are not beside the item")
			}
			// The first question takes focus; Tab moves on, number keys choose.
			actions := []chromedp.Action[chromedp.Void]{chromedp.Focus(`[data-question="urgency_missed"]`), key(urgency[who][i]),
				key(kb.Tab), key("4"), key(kb.Tab)}
			if i == 0 {
				// On the answer's words: the second and third word, labelled error.
				actions = append(actions, key(kb.ArrowRight), key(kb.ArrowRight, chromedp.ModifierShift), key("1"))
			}
			actions = append(actions, key(kb.Tab))
			if err := chromedp.Do(ctx, actions...); err != nil {
				t.Fatal(err)
			}
			if focused := eval[string](t, ctx, `document.activeElement.name || ''`); focused != "a.why" {
				t.Logf("focused: %s; checked: %s", eval[string](t, ctx, `document.activeElement.outerHTML.slice(0, 200)`),
					eval[string](t, ctx, `Array.from(document.querySelectorAll('[data-rubric-form] input:checked')).map(e => e.name + '=' + e.value).join(' ') + ' spans=' + (document.querySelector('[data-spans]') || {}).value`))
				t.Fatalf("Tab through the questions ends on %q, want the text question", focused)
			}
			if err := chromedp.Do(ctx, chromedp.SendKeys(`textarea[name="a.why"]`, "read by "+who)); err != nil {
				t.Fatal(err)
			}
			if i == 0 && who == "dan@acme.test" {
				webtest.Screenshot(t, ctx, "after-rubric-review")
			}
			if err := chromedp.Do(ctx, key(kb.Enter, chromedp.ModifierCtrl)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, `document.getElementById('answers-saved') !== null`)
			if err := chromedp.Do(ctx, chromedp.Click(`input[data-verdict="approved"]`), chromedp.Click(`#submit-review`)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, `document.getElementById('review-labels') !== null`)
		}
		signOut()
	}
	var spans, urgencies []string
	rows, err := s.Pool.Query(context.Background(), `SELECT coalesce(answers->>'wrong', ''), answers->>'urgency_missed' FROM rubric_answers ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sp, u string
		if err := rows.Scan(&sp, &u); err != nil {
			t.Fatal(err)
		}
		spans, urgencies = append(spans, sp), append(urgencies, u)
	}
	if len(urgencies) != 6 || strings.Join(urgencies, ",") != "none,none,minor,none,critical,minor" {
		t.Fatalf("answers stored: %v", urgencies)
	}
	// "Rest and drink": the words "and drink" are characters 5 to 14.
	if want := `[{"end": 14, "label": "error", "start": 5}]`; spans[0] != want || spans[3] != want {
		t.Errorf("spans stored %q and %q, want %s", spans[0], spans[3], want)
	}

	// The admin adjudicates the urgency question of the second item.
	signIn("ada@acme.test")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review/adjudication"), chromedp.WaitVisible(`[data-dispute]`)); err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-dispute]').length`); n != 1 {
		t.Fatalf("%d disputes, want 1", n)
	}
	form := `#decide-` + ids[1].String()
	if err := chromedp.Do(ctx,
		chromedp.Click(form+` [data-disputed-question="Urgency missed?"] input[value='"critical"']`),
		chromedp.Click(form+` input[value="approved"]`),
		chromedp.SendKeys(form+` textarea[name=note]`, "A headache after a long day is not urgent, but the answer should ask about warning signs."),
		chromedp.Click(form+` button[type=submit]`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('no-disputes') !== null`)

	// The agreement page, for the question.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review/agreement?tag=triage"), chromedp.WaitVisible(`#agreement-questions`),
		chromedp.Click(`[data-question-link="question:urgency_missed"]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('tr[data-kind="question:urgency_missed"]') !== null`)
	if got := text(t, ctx, `tr[data-kind="question:urgency_missed"] .alpha .figure-value`); got != "0.545" {
		t.Errorf("the question's alpha reads %q, want 0.545", got)
	}
	if got := text(t, ctx, `#agreement-pairs tr[data-pair="cara@acme.test dan@acme.test"] .pair-units`); got != "3" {
		t.Errorf("the pair shares %q items on the question, want 3", got)
	}
	webtest.Screenshot(t, ctx, "after-rubric-agreement")

	// The export, from the rubric's page: every answer and the decision.
	body := eval[string](t, ctx, `(() => { const x = new XMLHttpRequest(); x.open('GET', '/api/rubrics/`+rubricID+`/export', false); x.send(); return x.responseText; })()`)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) != 7 || !strings.Contains(body, `"adjudicated":true`) || !strings.Contains(body, `"urgency_missed":"critical"`) ||
		!strings.Contains(body, `"wrong":[{"end":14,"label":"error","start":5}]`) {
		t.Errorf("the export has %d lines: %s", len(lines), body)
	}
}
