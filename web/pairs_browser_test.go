package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// In a real browser: make a pair from a corrected feedback item, swap the
// replies in place, save, and see the word diff of the saved pair.
func TestBrowserPairFromCorrection(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	key := s.APIKey(org, "k", "curator")
	var fb struct {
		ID string `json:"id"`
	}
	const original, correction = "Restart the router twice.", "Restart the modem once, then the router."
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "The internet is down", "response": original,
		"feedback_type": "correction", "correction": correction,
		"context": map[string]any{"documents": []map[string]string{{"title": "Network KB", "content": "Modem first"}}}}).Must(t, http.StatusCreated).JSON(t, &fb)
	ctx := webtest.Browser(t)

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cu@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/pairs/new?feedback="+fb.ID),
		chromedp.WaitVisible(`#chosen`),
	)
	if err != nil {
		t.Fatal(err)
	}
	value := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Value(sel))
		if err != nil {
			t.Fatalf("value of %s: %v", sel, err)
		}
		return v
	}
	if value(`#chosen`) != correction || value(`#rejected`) != original {
		t.Fatalf("prefilled chosen %q rejected %q", value(`#chosen`), value(`#rejected`))
	}
	if docs := text(t, ctx, `.pair-docs`); !strings.Contains(docs, "Network KB") {
		t.Fatalf("context documents %q", docs)
	}
	// Before the swap the diff turns the original into the correction:
	// "modem" is inserted.
	if ins := text(t, ctx, `#pair-diff`); !strings.Contains(ins, "modem") {
		t.Fatalf("diff %q", ins)
	}
	insBefore, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#pair-diff ins")).map(e => e.textContent).join("|")`))

	// The swap happens in the page (the script), with the links and diff.
	if err := chromedp.Do(ctx, chromedp.Click(`#swap`)); err != nil {
		t.Fatal(err)
	}
	if value(`#chosen`) != original || value(`#rejected`) != correction {
		t.Fatalf("after swap chosen %q rejected %q", value(`#chosen`), value(`#rejected`))
	}
	delAfter, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#pair-diff del")).map(e => e.textContent).join("|")`))
	if insBefore == "" || delAfter != insBefore {
		t.Fatalf("swap did not flip the diff: inserted before %q, deleted after %q", insBefore, delAfter)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())

	if err := chromedp.Do(ctx, chromedp.SetValue(`#strength`, "0.6"), chromedp.Click(`#save`), chromedp.WaitVisible(`.flash`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "pair-editor")
	if flash := text(t, ctx, `.flash`); !strings.Contains(flash, "Pair saved") {
		t.Fatalf("flash %q", flash)
	}
	after, _ := chromedp.Run(ctx, chromedp.Location())
	if after == loc || !strings.Contains(after, "/pairs/") {
		t.Fatalf("after save the page is %s", after)
	}
	if value(`#chosen`) != original || value(`#rejected`) != correction {
		t.Fatalf("saved chosen %q rejected %q", value(`#chosen`), value(`#rejected`))
	}
	// The saved pair's diff: the rejected correction against the chosen
	// original, so "modem" is now deleted.
	del, err := chromedp.Run(ctx, chromedp.Text(`#pair-diff del`))
	if err != nil || !strings.Contains(del, "modem") {
		t.Fatalf("saved diff deletes %q (%v)", del, err)
	}
	var chosen, rejected string
	var strength float32
	if err := s.Pool.QueryRow(context.Background(), `SELECT chosen_response, rejected_response, preference_strength FROM preference_pairs`).
		Scan(&chosen, &rejected, &strength); err != nil {
		t.Fatal(err)
	}
	if chosen != original || rejected != correction || strength < 0.59 || strength > 0.61 {
		t.Fatalf("stored chosen %q rejected %q strength %v", chosen, rejected, strength)
	}
}
