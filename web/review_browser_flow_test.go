package web_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/web/webtest"
)

// Overlapping review end to end in a real browser: an admin asks for two
// reviews of every item tagged "expert" and names a senior curator
// adjudicator; two curators review the same five items through "Review
// the next item", blind (the second sees neither the first's label nor
// who gave it until submitting); the one disagreement waits in
// adjudication, where the senior curator decides it with a note; the
// agreement page shows the pair's kappa with its counts; and a dataset
// made with "agreed items only" holds the four agreed items and the
// adjudicated one.
func TestBrowserOverlappingReview(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	s.User(org, "sam@acme.test", "curator")
	ids := tagged(t, s, org, "expert", 5)
	// Statuses given: cara approves all but the fourth, which she
	// corrects; dan rejects the first and otherwise agrees.
	verdicts := map[string][]string{
		"cara@acme.test": {"approved", "approved", "approved", "corrected", "approved"},
		"dan@acme.test":  {"rejected", "approved", "approved", "corrected", "approved"},
	}
	ctx := webtest.Browser(t)

	signIn := func(email string) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.URL+"/login"),
			chromedp.WaitVisible(`input[name=email]`),
			chromedp.SendKeys(`input[name=email]`, email),
			chromedp.SendKeys(`input[name=password]`, webtest.Password),
			chromedp.Submit(`input[name=password]`),
			chromedp.WaitVisible(`#logout`),
		)
		if err != nil {
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

	// The admin asks for overlap on the tag and names sam adjudicator.
	signIn("ada@acme.test")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/review"),
		chromedp.WaitVisible(`#new-plan`),
		chromedp.SendKeys(`#plan-tag`, "expert"),
		chromedp.SetValue(`#plan-overlap`, "2"),
		chromedp.Click(`#create-plan`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('[data-plan] .plan-overlap') !== null`)
	if got := text(t, ctx, "[data-plan] .plan-overlap"); got != "2" {
		t.Errorf("the plan asks for %q reviews per item", got)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(`#adjudicator-user`, userID(t, s, "sam@acme.test")), chromedp.Click(`#add-adjudicator`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('[data-adjudicator="sam@acme.test"]') !== null`)
	webtest.Screenshot(t, ctx, "after-review-settings")
	signOut()

	// Two curators review the five items, one after the other, each
	// through "Review the next item".
	for _, who := range []string{"cara@acme.test", "dan@acme.test"} {
		signIn(who)
		for i, verdict := range verdicts[who] {
			if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review"), chromedp.WaitVisible(`button[data-next-plan]`),
				chromedp.Click(`button[data-next-plan]`)); err != nil {
				t.Fatal(err)
			}
			// The oldest item first, whoever reviewed it before.
			waitFor(t, ctx, `location.pathname === '/feedback/`+ids[i].String()+`' && document.getElementById('review-form') !== null`)
			panel := text(t, ctx, "#item-review")
			if eval[bool](t, ctx, `document.getElementById('review-labels') !== null`) || strings.Contains(panel, "cara@acme.test") {
				t.Errorf("%s sees another label of item %d before submitting: %q", who, i, panel)
			}
			if who == "dan@acme.test" && !strings.Contains(panel, "1 review is in") {
				t.Errorf("dan is not told a review is hidden: %q", panel)
			}
			if eval[bool](t, ctx, `document.getElementById('approve') !== null`) {
				t.Error("the queue's approve button is offered on an item under overlapping review")
			}
			if who == "dan@acme.test" && i == 0 {
				webtest.Screenshot(t, ctx, "after-review-blind")
			}
			if err := chromedp.Do(ctx, chromedp.Click(`input[data-verdict="`+verdict+`"]`)); err != nil {
				t.Fatal(err)
			}
			if verdict == "corrected" {
				if err := chromedp.Do(ctx, chromedp.SendKeys(`#review-correction`, "The release was in March.")); err != nil {
					t.Fatal(err)
				}
			}
			if err := chromedp.Do(ctx, chromedp.Click(`#submit-review`)); err != nil {
				t.Fatal(err)
			}
			// Submitted: the reviews now show, the reviewer's own among them.
			waitFor(t, ctx, `document.getElementById('review-labels') !== null && document.getElementById('review-form') === null`)
			if labels := text(t, ctx, "#review-labels"); !strings.Contains(labels, who) {
				t.Errorf("%s's own review is not shown after submitting: %q", who, labels)
			}
			if who == "dan@acme.test" {
				if labels := text(t, ctx, "#review-labels"); !strings.Contains(labels, "cara@acme.test") {
					t.Errorf("after submitting, dan does not see cara's review: %q", labels)
				}
				if i == 0 {
					webtest.Screenshot(t, ctx, "after-review-submitted")
				}
			}
		}
		signOut()
	}
	for i, want := range []string{"pending", "approved", "approved", "corrected", "approved"} {
		var status string
		if err := s.Pool.QueryRow(context.Background(), "SELECT status::text FROM feedback WHERE id = $1", ids[i]).Scan(&status); err != nil || status != want {
			t.Errorf("item %d is %s (%v), want %s", i, status, err, want)
		}
	}

	// The one disagreement waits for sam, who decides it with a note.
	signIn("sam@acme.test")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review/adjudication"), chromedp.WaitVisible(`[data-dispute]`)); err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-dispute]').length`); n != 1 {
		t.Fatalf("%d disputes in adjudication, want 1", n)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-dispute]').dataset.dispute`); got != ids[0].String() {
		t.Errorf("the dispute is %s, want the first item %s", got, ids[0])
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-dispute] .review-card').length`); n != 2 {
		t.Errorf("%d reviews side by side, want 2", n)
	}
	webtest.Screenshot(t, ctx, "after-adjudication")
	form := `#decide-` + ids[0].String()
	if err := chromedp.Do(ctx,
		chromedp.Click(form+` input[value="approved"]`),
		chromedp.SendKeys(form+` textarea[name=note]`, "The date is the release date: the answer is right."),
		chromedp.Click(form+` button[type=submit]`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('no-disputes') !== null`)
	if flash := text(t, ctx, ".flash"); !strings.Contains(flash, "Decided") {
		t.Errorf("after deciding: %q", flash)
	}
	if n := auditCount(t, s, "review.adjudicate", ids[0].String()); n != 1 {
		t.Errorf("%d review.adjudicate entries", n)
	}

	// The agreement page: statuses cara A A A C A, dan R A A C A. By hand,
	// Cohen's kappa: p_o = 4/5; p_e = (4/5)(3/5) + (1/5)(1/5) = 13/25;
	// kappa = (0.8 - 0.52) / 0.48 = 0.5833.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review/agreement?tag=expert"), chromedp.WaitVisible(`#agreement-pairs`)); err != nil {
		t.Fatal(err)
	}
	pair := `#agreement-pairs tr[data-pair="cara@acme.test dan@acme.test"]`
	if got := text(t, ctx, pair+" .pair-kappa"); got != "0.583" {
		t.Errorf("the pair's kappa reads %q, want 0.583", got)
	}
	if units, alike := text(t, ctx, pair+" .pair-units"), text(t, ctx, pair+" .pair-agreed"); units != "5" || alike != "4" {
		t.Errorf("the pair's counts read %s items, %s alike; want 5 and 4", units, alike)
	}
	if got := text(t, ctx, "#agreement-matrix tbody tr:first-child td:nth-child(3) .figure-value"); got != "0.583" {
		t.Errorf("the matrix shows %q for cara and dan", got)
	}
	webtest.Screenshot(t, ctx, "after-agreement")

	// A dataset made now takes agreed items only by default, and holds the
	// four agreed items and the adjudicated one.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/datasets"), chromedp.WaitVisible(`#new-dataset`)); err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, `document.getElementById('agreed-only').checked`) {
		t.Error("agreed items only is not on by default while overlap is set")
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#new-dataset input[name=name]`, "Expert answers"),
		chromedp.SetValue(`#new-dataset select[name=dataset_type]`, "instruction_tuning"),
		chromedp.Click(`#new-dataset button[type=submit]`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('add-by-filter') !== null`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#add-by-filter input[name=tag]`, "expert"), chromedp.Click(`#add-filter`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('.flash') !== null && document.querySelector('.flash').innerText.includes('Added 5 members')`)
	var datasetID uuid.UUID
	if err := s.Pool.QueryRow(context.Background(), "SELECT id FROM training_datasets WHERE name = 'Expert answers' AND agreed_only").Scan(&datasetID); err != nil {
		t.Fatalf("the dataset does not take agreed items only: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#lifecycle button[data-to=ready]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('.flash') !== null && document.querySelector('.flash').innerText.includes('version 1 frozen, 5 items')`)
	rows, err := s.Pool.Query(context.Background(), `SELECT i.source_id FROM dataset_version_items i
		JOIN training_datasets d ON d.current_version_id = i.version_id WHERE d.id = $1`, datasetID)
	if err != nil {
		t.Fatal(err)
	}
	var frozen []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		frozen = append(frozen, id)
	}
	want := slices.Clone(ids)
	cmp := func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(frozen, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(frozen, want) {
		t.Errorf("the frozen version holds %v, want the five reviewed items %v", frozen, want)
	}

	// The plans page, with the plan's progress complete.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/review"), chromedp.WaitVisible(`[data-plan]`)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, `[data-plan] td[data-reviews="2"]`); !strings.HasPrefix(got, "5") {
		t.Errorf("items with 2 reviews: %q, want 5", got)
	}
	webtest.Screenshot(t, ctx, "after-review-plans")

	// The new pages keep the design system's promises (no sideways
	// spill, styled tables, no raw words) on a desktop and a phone.
	for _, size := range []struct{ w, h int64 }{{1280, 900}, {390, 844}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h)); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/review", "/review/adjudication", "/review/adjudication?decided=1", "/review/agreement?tag=expert",
			"/review/agreement?tag=expert&kind=thumbs", "/feedback/" + ids[0].String()} {
			checkPage(t, ctx, s.URL+path)
		}
	}
}

func userID(t *testing.T, s *webtest.Server, email string) string {
	t.Helper()
	var id string
	if err := s.Pool.QueryRow(context.Background(), "SELECT id::text FROM users WHERE email = $1", email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
