package web_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/web/webtest"
)

// signInBrowser signs email in on a fresh browser at the desktop width.
func signInBrowser(t *testing.T, s *webtest.Server, email string) context.Context {
	t.Helper()
	b := webtest.Browser(t)
	err := chromedp.Do(b,
		chromedp.EmulateViewport(1280, 800),
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
	return b
}

// current is the href of the navigation link marked as the current page.
func current(t *testing.T, b context.Context) string {
	t.Helper()
	got, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('nav.tabs a[aria-current=page]')?.getAttribute('href') ?? ''`))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The navigation holds the whole loop: Codebooks on its own tab (and
// highlighted on its pages), Registry, Evaluation, Experiments, Judges and
// Serving targets in the Models menu, which shows itself active on their
// pages. On a phone it folds behind a Menu button and opens as a column
// within the screen, the account links under it.
func TestBrowserNavigation(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "vi@acme.test", "viewer")
	other := s.Org("other")
	seedModelCards(t, s, org, other)
	storePairs(t, s, org, 2)

	b := signInBrowser(t, s, "ada@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/codebooks"), chromedp.WaitVisible(`nav.tabs`)); err != nil {
		t.Fatal(err)
	}
	if got := current(t, b); got != "/codebooks" {
		t.Errorf("the codebooks page highlights %q", got)
	}
	webtest.Screenshot(t, b, "after-nav-1280")
	err := chromedp.Do(b,
		chromedp.Click(`#models-menu > summary`),
		chromedp.WaitVisible(`#models-menu a[href="/experiments"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	menu, err := chromedp.Run(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#models-menu .menu-list a')].map(a => a.innerText.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Registry", "Evaluation", "Experiments", "Shadows", "Loops", "Judges", "Serving targets", "Monitors"}; !slices.Equal(menu, want) {
		t.Errorf("the Models menu holds %q, want %q", menu, want)
	}
	webtest.Screenshot(t, b, "after-nav-models-menu")
	err = chromedp.Do(b,
		chromedp.Click(`#models-menu a[href="/experiments"]`),
		chromedp.WaitVisible(`main h1`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := current(t, b); got != "/experiments" {
		t.Errorf("the experiments page highlights %q", got)
	}
	if active, err := chromedp.Run(b, chromedp.Evaluate[bool](`document.querySelector('#models-menu').classList.contains('active')`)); err != nil || !active {
		t.Errorf("the Models menu does not show itself active on the experiments page (%v)", err)
	}
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(`#card-experiments`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-overview")

	// The flashes templates write as "flash warn" and "flash bad" wear the
	// warning's and the error's colours, as the session's flashes do.
	colours, err := chromedp.Run(b, chromedp.Evaluate[[]string](`(() => {
		const main = document.querySelector('main'), out = [];
		for (const c of ['flash warn', 'flash flash-warn', 'flash bad', 'flash flash-error', 'flash flash-ok']) {
			const p = document.createElement('p'); p.className = c; p.textContent = c; main.prepend(p);
			out.push(getComputedStyle(p).backgroundColor + ' ' + getComputedStyle(p).color);
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if colours[0] != colours[1] || colours[2] != colours[3] || colours[0] == colours[2] || colours[0] == colours[4] || strings.HasPrefix(colours[0], "rgba(0, 0, 0, 0)") {
		t.Errorf("flash colours: warn %q, flash-warn %q, bad %q, flash-error %q, ok %q", colours[0], colours[1], colours[2], colours[3], colours[4])
	}

	// A phone: one row with the brand and the Menu button.
	if err := chromedp.Do(b, chromedp.EmulateViewport(390, 844), chromedp.Navigate(s.URL+"/codebooks"), chromedp.WaitVisible(`.nav-button`)); err != nil {
		t.Fatal(err)
	}
	shown := func() []bool {
		t.Helper()
		v, err := chromedp.Run(b, chromedp.Evaluate[[]bool](`[document.querySelector('nav.tabs').checkVisibility(), document.querySelector('.who').checkVisibility()]`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := shown(); v[0] || v[1] {
		t.Errorf("on a phone the navigation (%v) or the account links (%v) show before the Menu is opened", v[0], v[1])
	}
	webtest.Screenshot(t, b, "after-nav-390")
	if err := chromedp.Do(b, chromedp.Click(`.nav-button`), chromedp.WaitVisible(`nav.tabs`)); err != nil {
		t.Fatal(err)
	}
	if v := shown(); !v[0] || !v[1] {
		t.Errorf("the opened Menu shows the navigation %v and the account links %v", v[0], v[1])
	}
	// A column of links within the screen, not a strip that scrolls.
	geo, err := chromedp.Run(b, chromedp.Evaluate[[]float64](`(() => {
		const nav = document.querySelector('nav.tabs'), links = [...nav.querySelectorAll(':scope > a')];
		const lefts = new Set(links.map(a => Math.round(a.getBoundingClientRect().left)));
		return [nav.scrollWidth, nav.clientWidth, nav.getBoundingClientRect().right, lefts.size, links.length, document.documentElement.scrollWidth];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if geo[0] > geo[1] || geo[2] > 390 || geo[3] != 1 || geo[4] < 8 || geo[5] > 390 {
		t.Errorf("the opened Menu is not a column within 390px: scroll %v of %v, right edge %v, %v left edges for %v links, page %vpx", geo[0], geo[1], geo[2], geo[3], geo[4], geo[5])
	}
	if got := current(t, b); got != "/codebooks" {
		t.Errorf("the opened Menu highlights %q", got)
	}
	webtest.Screenshot(t, b, "after-nav-390-open")
	err = chromedp.Do(b,
		chromedp.Click(`#models-menu > summary`),
		chromedp.WaitVisible(`#models-menu a[href="/evaluations"]`),
		chromedp.Click(`#models-menu a[href="/evaluations"]`),
		chromedp.WaitVisible(`#golden-sets`),
	)
	if err != nil {
		t.Fatalf("the Models menu on a phone: %v", err)
	}
	if v := shown(); v[0] {
		t.Error("the Menu stays open on the next page")
	}

	// A viewer's phone Menu: only what a viewer may open.
	vb := signInBrowser(t, s, "vi@acme.test")
	if err := chromedp.Do(vb, chromedp.EmulateViewport(390, 844), chromedp.Navigate(s.URL+"/"), chromedp.Click(`.nav-button`), chromedp.WaitVisible(`nav.tabs`)); err != nil {
		t.Fatal(err)
	}
	hrefs, err := chromedp.Run(vb, chromedp.Evaluate[[]string](`[...document.querySelectorAll('nav.tabs a')].map(a => a.getAttribute('href'))`))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hrefs {
		if strings.HasPrefix(h, "/admin") || h == "/imports" || h == "/evaluations/judges" || h == "/models/targets" {
			t.Errorf("a viewer's Menu offers %s", h)
		}
	}
}

// With no open dataset, "Add to dataset…" on the pairs list names a new
// one: the ticked pairs go into it in one step and the list comes back;
// next time the new dataset is offered, and typing another name picks "A
// new dataset" by itself.
func TestBrowserAddPairsToNewDataset(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	pairs := storePairs(t, s, org, 4)
	newDataset(t, s, org, "Instructions", datasets.TypeInstructionTuning) // holds feedback: not offered
	b := signInBrowser(t, s, "cu@acme.test")

	tick := func(ids ...string) {
		t.Helper()
		if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/pairs"), chromedp.WaitVisible(`#pairs`)); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := chromedp.Do(b, chromedp.Click(`tr[data-pair="`+id+`"] input[type=checkbox]`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := chromedp.Do(b, chromedp.WaitVisible(`#pairs-select`), chromedp.Click(`#add-to-dataset > summary`), chromedp.WaitVisible(`#new-dataset-name`)); err != nil {
			t.Fatal(err)
		}
	}
	tick(pairs[0], pairs[1])
	if on, err := chromedp.Run(b, chromedp.Evaluate[bool](`document.getElementById('new-dataset-choice').checked`)); err != nil || !on {
		t.Errorf("with no open dataset, a new one is not chosen (%v)", err)
	}
	if err := chromedp.Do(b, chromedp.SendKeys(`#new-dataset-name`, "Support preferences")); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-selection-bar")
	if err := chromedp.Do(b, chromedp.Click(`#add-to-dataset-confirm`), chromedp.WaitVisible(`.flash-ok`)); err != nil {
		t.Fatal(err)
	}
	if msg := text(t, b, `.flash-ok`); !strings.Contains(msg, "2 pairs added to the new dataset Support preferences.") {
		t.Fatalf("flash %q", msg)
	}
	if loc, err := chromedp.Run(b, chromedp.Location()); err != nil || loc != s.URL+"/pairs" {
		t.Errorf("after adding, the browser is at %s (%v), not the list", loc, err)
	}
	first := strings.TrimPrefix(browserAttr(t, b, `.flash-ok a`, "href"), "/datasets/")
	want := []string{pairs[0], pairs[1]}
	slices.Sort(want)
	if got := memberIDs(t, s, first); !slices.Equal(got, want) {
		t.Fatalf("the new dataset holds %v, want %v", got, want)
	}

	// The new dataset is open now, so it is offered; a typed name still
	// makes another.
	tick(pairs[2])
	if on, err := chromedp.Run(b, chromedp.Evaluate[[]bool](`[document.getElementById('new-dataset-choice').checked,
		document.querySelector('input[name=dataset][value="`+first+`"]') !== null]`)); err != nil || on[0] || !on[1] {
		t.Fatalf("with an open dataset: new chosen %v, the open one offered %v (%v)", on[0], on[1], err)
	}
	err := chromedp.Do(b,
		chromedp.SendKeys(`#new-dataset-name`, "Hard cases"),
		chromedp.Poll[chromedp.Void](`document.getElementById('new-dataset-choice').checked`, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Click(`#add-to-dataset-confirm`),
		chromedp.WaitVisible(`.flash-ok`),
	)
	if err != nil {
		t.Fatalf("typing a name does not choose a new dataset: %v", err)
	}
	second := strings.TrimPrefix(browserAttr(t, b, `.flash-ok a`, "href"), "/datasets/")
	if second == first || !slices.Equal(memberIDs(t, s, second), []string{pairs[2]}) || len(memberIDs(t, s, first)) != 2 {
		t.Errorf("the second new dataset %s holds %v; the first %v", second, memberIDs(t, s, second), memberIDs(t, s, first))
	}
}

// attr is an attribute of the first element sel matches.
func browserAttr(t *testing.T, b context.Context, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector(`+mustJSON(t, sel)+`)?.getAttribute(`+mustJSON(t, name)+`) ?? ''`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
