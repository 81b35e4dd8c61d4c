package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// The review loop in a real browser, from the keyboard: open a filtered
// queue, open its first item, step to the next item and back, turn
// auto-advance on, then approve and reject five items in a row, each
// landing on the next item of the filter while the database records each
// verdict. Along the way: the bulk bar appears only once a row is
// selected and stays in view, and the correction editor shows a live
// word diff. Then, in the same session, three pairs go into a dataset by
// selection on the pairs list, without an id typed anywhere.
func TestBrowserReviewLoopThenPairsToDataset(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	// Seven items of model "m", newest first, and one of another model the
	// filter leaves out.
	ids := reviewItems(t, s, org, "m", "m", "other", "m", "m", "m", "m", "m")
	ids = append(ids[:2], ids[3:]...)
	path := func(i int) string { return "/feedback/" + ids[i].String() }

	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cara@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/feedback?model=m&status=pending"),
		chromedp.WaitVisible(`#queue`),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelectorAll('#queue tr[data-item]').length === 7`)

	// The bulk bar waits for a selection, then stays at the foot of the
	// window.
	if !eval[bool](t, ctx, `document.getElementById('bulk-bar').hidden`) {
		t.Error("the bulk bar shows before anything is selected")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `!document.getElementById('bulk-bar').hidden`)
	if got := text(t, ctx, "#bulk-count"); got != "1 item selected" {
		t.Errorf("bulk bar count %q", got)
	}
	if pos := eval[string](t, ctx, `getComputedStyle(document.getElementById('bulk-bar')).position`); pos != "sticky" {
		t.Errorf("the bulk bar is %s, not sticky", pos)
	}
	inView := `(() => { const r = document.getElementById('bulk-bar').getBoundingClientRect(); return r.bottom <= innerHeight + 1 && r.top >= 0; })()`
	if !eval[bool](t, ctx, inView) {
		t.Error("the bulk bar is out of view with a row selected")
	}
	webtest.Screenshot(t, ctx, "review-queue-selected")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('bulk-bar').hidden`)

	// o opens the focused (first) item, which knows its place.
	navKey(t, ctx, "o")
	waitFor(t, ctx, `location.pathname === '`+path(0)+`' && document.getElementById('item-position') !== null`)
	if got := text(t, ctx, "#item-position"); got != "1 of 7" {
		t.Errorf("first item at %q, want 1 of 7", got)
	}
	if eval[bool](t, ctx, `document.getElementById('prev-item') !== null`) {
		t.Error("the first item offers a previous one")
	}
	// j and k step through the filter without changing anything.
	navKey(t, ctx, "j")
	waitFor(t, ctx, `location.pathname === '`+path(1)+`' && document.getElementById('item-position').innerText.trim() === '2 of 7'`)
	navKey(t, ctx, "k")
	waitFor(t, ctx, `location.pathname === '`+path(0)+`'`)

	// The live diff follows the editor as the curator types.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("c")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.activeElement.id === 'correction'`)
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.select()`), chromedp.KeyEvent("answer 0 revised")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('#live-diff ins') !== null`)
	if got := text(t, ctx, "#live-diff ins"); got != "revised" {
		t.Errorf("live diff inserts %q, want revised", got)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`)); err != nil {
		t.Fatal(err)
	}

	// Auto-advance on: the setting comes back with the item.
	if err := chromedp.Do(ctx, chromedp.Click(`#auto-advance`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('auto-advance').getAttribute('aria-pressed') === 'true'`)
	webtest.Screenshot(t, ctx, "review-item")

	// Five reviews from the keyboard: a, r, a, r, a. Each item leaves the
	// pending filter, so the next one is always first of one fewer.
	keys := []string{"a", "r", "a", "r", "a"}
	for i, key := range keys {
		waitFor(t, ctx, `location.pathname === '`+path(i)+`' && document.getElementById('approve') !== null`)
		navKey(t, ctx, key)
		want := "1 of " + strconv.Itoa(7-i-1)
		waitFor(t, ctx, `location.pathname === '`+path(i+1)+`' && document.getElementById('item-position') !== null && document.getElementById('item-position').innerText.trim() === '`+want+`'`)
		flash := text(t, ctx, ".flash")
		wantFlash := map[string]string{"a": "Approved.", "r": "Rejected."}[key]
		if !strings.Contains(flash, wantFlash) {
			t.Errorf("review %d: flash %q, want %q", i+1, flash, wantFlash)
		}
		var status string
		if err := s.Pool.QueryRow(context.Background(), "SELECT status::text FROM feedback WHERE id = $1", ids[i]).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if wantStatus := map[string]string{"a": "approved", "r": "rejected"}[key]; status != wantStatus {
			t.Errorf("review %d (%s): item is %s, want %s", i+1, key, status, wantStatus)
		}
	}
	if got := text(t, ctx, "#item-status"); got != "Pending" {
		t.Errorf("the sixth item is %q before its review", got)
	}
	var pending int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feedback WHERE model = 'm' AND status = 'pending'").Scan(&pending); err != nil || pending != 2 {
		t.Errorf("%d items of m still pending (%v), want 2", pending, err)
	}

	addPairsBySelection(t, s, ctx, org)
}
