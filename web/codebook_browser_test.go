package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// From a correction to a rule the assistant uses, in a real browser: an
// admin corrects an item, makes a rule from it with the reflector's
// suggestion (a judge stand-in), adds it and publishes the codebook; the
// assistant's retrieval with the item's question returns that rule first,
// and feedback naming the rule with a thumbs-down counts it harmful.
func TestBrowserCodebookFromCorrection(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 1})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "admin") // publishing is an admin's
	assistant := s.APIKey(org, "assistant", "curator")
	admin := s.APIKey(org, "ops", "admin")
	judge := reflector(t)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1", "model": "deepseek-chat"}).
		Must(t, http.StatusCreated)

	const question = "Can I get a refund after 30 days?"
	var item struct {
		ID string `json:"id"`
	}
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": question, "response": "Yes, always.", "feedback_type": "thumbs_down"}).
		Must(t, http.StatusCreated).JSON(t, &item)
	// Other rules the new one must outrank.
	for _, r := range []string{"To reset a password, point to Settings, Security, Reset password.", "Invoices are emailed on the first day of the month."} {
		s.API(assistant, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "accounts", "content": r, "status": "active"}).
			Must(t, http.StatusCreated)
	}

	b := webtest.Browser(t)
	dialogs := webtest.AcceptDialogs(t, b)
	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cara@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		// The correction: c opens the editor.
		chromedp.Navigate(s.URL+"/feedback/"+item.ID),
		chromedp.WaitVisible(`#item`),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, `document.getElementById('item') !== null`)
	if err := chromedp.Do(b, chromedp.KeyEvent("c")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, `document.activeElement.id === 'correction'`)
	err = chromedp.Do(b,
		chromedp.Evaluate[chromedp.Void](`document.activeElement.select()`),
		chromedp.KeyEvent("Refunds are possible within 14 days of purchase only."),
		chromedp.Click(`#save-correction`),
		chromedp.WaitVisible(`#make-rule`),
		// Make a rule, in the codebook "support".
		chromedp.Click(`#make-rule`),
		chromedp.WaitVisible(`#open-codebook`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#open-codebook input[name=open]').value = 'support'`),
		chromedp.Click(`#open-codebook button[type=submit]`),
		chromedp.WaitVisible(`#suggest-form`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#rule-source`); !strings.Contains(got, "Refunds are possible within 14 days of purchase only.") {
		t.Fatalf("the editor shows %q beside the form", got)
	}
	// The reflector fills the form; the curator edits it and adds it.
	err = chromedp.Do(b,
		chromedp.Click(`#suggest-form button[type=submit]`),
		chromedp.WaitVisible(`[data-suggestion="ready"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	const suggested = "When asked about refunds, say they are possible within 14 days of purchase only."
	if got := eval[string](t, b, `document.querySelector('#rule-form textarea[name=content]').value`); got != suggested {
		t.Fatalf("the form holds %q, want the suggestion", got)
	}
	webtest.Screenshot(t, b, "codebook-suggested-rule")
	err = chromedp.Do(b,
		chromedp.Evaluate[chromedp.Void](`const a = document.querySelector('#rule-form textarea[name=content]'); a.focus(); a.setSelectionRange(a.value.length, a.value.length)`),
		chromedp.KeyEvent(" Link the refund policy."),
		chromedp.Click(`#rule-form button.primary`),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The codebook's page, without the item (the editor's page had a
	// Publish button too).
	waitFor(t, b, `location.search === '' && document.getElementById('publish-form') !== null`)
	err = chromedp.Do(b,
		chromedp.Click(`#publish-form button`),
		chromedp.WaitVisible(`#versions tr[data-version="1"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if dialogs.Load() != 1 {
		t.Errorf("%d confirmations, want 1 (publish)", dialogs.Load())
	}

	// The assistant retrieves it first for the item's question.
	var got struct {
		Version int `json:"version"`
		Rules   []struct {
			ID      string  `json:"id"`
			Content string  `json:"content"`
			Score   float64 `json:"score"`
		} `json:"rules"`
	}
	s.API(assistant, http.MethodPost, "/api/codebooks/support/retrieve", map[string]any{"query": question, "k": 3}).Must(t, http.StatusOK).JSON(t, &got)
	if got.Version != 1 || len(got.Rules) == 0 || got.Rules[0].Content != suggested+" Link the refund policy." {
		t.Fatalf("retrieved %+v", got)
	}
	rule := got.Rules[0].ID

	// Feedback that used it, thumbs down: harmful 1, shown on its page.
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": question, "response": "Refunds: 14 days.",
		"feedback_type": "thumbs_down", "codebook_rules": []string{rule}}).Must(t, http.StatusCreated)
	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/codebooks/support/rules/"+rule),
		chromedp.WaitVisible(`#rule-uses`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#rule dl`); !strings.Contains(got, "harmful 1") {
		t.Errorf("the rule's counters read %q", got)
	}
	if n := eval[int](t, b, `document.querySelectorAll('#rule-uses tr[data-use]').length`); n != 1 {
		t.Errorf("%d uses listed, want 1", n)
	}
	if got := text(t, b, `#rule-sources`); !strings.Contains(got, question) {
		t.Errorf("the rule's sources read %q", got)
	}
}
