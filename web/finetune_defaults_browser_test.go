package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/web/webtest"
)

// From a frozen version's row on its dataset's page, "Fine-tune this
// version" opens the launch form with the version chosen and the base
// model filled in (the dataset names none: OpenAI's default), so the
// estimate is complete before anything is typed; it says how its count
// differs from the validation report's. On a fresh form, choosing a
// version is enough. Changing the provider swaps a default base model for
// the new provider's, and leaves one typed by hand. Only those who may
// launch see the link.
func TestBrowserFineTuneThisVersion(t *testing.T) {
	fake := openaitest.New(t)
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTunePoll, c.FineTuneBudgetUSD = "sk-test", fake.URL(), time.Hour, 100
	}})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	datasetPage := "/datasets/" + version.DatasetID.String()
	s.User(seeded.OrgID, "cu@demo.test", "curator")
	if body := s.SignedIn("cu@demo.test").Get(datasetPage).Must(t, http.StatusOK).Body; strings.Contains(body, "Fine-tune this version") {
		t.Error("a curator, who may not launch, is offered Fine-tune this version")
	}

	b := webtest.Browser(t)
	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, seeded.Email),
		chromedp.SendKeys(`input[name=password]`, seeded.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+datasetPage),
		chromedp.Click(`#versions a.fine-tune-version`),
		chromedp.WaitVisible(`#ft-form`),
		chromedp.WaitVisible(`#est-cost`),
	)
	if err != nil {
		t.Fatal(err)
	}
	facts, err := chromedp.Run(b, chromedp.Evaluate[[]string](`[document.querySelector('select[name=dataset_version_id]').value,
		document.querySelector('input[name=base_model]').value, document.querySelector('#est-versus-report').innerText]`))
	if err != nil {
		t.Fatal(err)
	}
	if facts[0] != version.ID.String() || facts[1] != ftMini {
		t.Errorf("the form opened on version %q with base model %q, want %s and %s", facts[0], facts[1], version.ID, ftMini)
	}
	if !strings.Contains(facts[2], "validation split is checked, not trained on") || !strings.Contains(facts[2], "validation report") {
		t.Errorf("the estimate does not say how it differs from the report: %q", facts[2])
	}
	webtest.Screenshot(t, b, "after-finetune-form")

	// A fresh form: the default is already there, so choosing the version
	// completes the estimate.
	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/fine-tuning/new"),
		chromedp.WaitVisible(`#est-missing`),
		chromedp.SetValue(`select[name=dataset_version_id]`, version.ID.String()),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('select[name=dataset_version_id]').dispatchEvent(new Event('change', {bubbles: true}))`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#est-cost') !== null && document.querySelector('#est-missing') === null`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil {
		t.Fatalf("choosing a version on a fresh form: %v", err)
	}
	// The provider's default follows the provider; a typed model stays.
	provider := func(name string) string {
		t.Helper()
		got, err := chromedp.Run(b, chromedp.Evaluate[string](`(() => { const p = document.querySelector('select[name=provider]'); p.value = '`+name+`';
			p.dispatchEvent(new Event('change', {bubbles: true})); return document.querySelector('input[name=base_model]').value })()`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := provider("bedrock"); got != "anthropic.claude-3-haiku-20240307-v1:0:200k" {
		t.Errorf("switching to Bedrock left the base model %q, want Bedrock's default", got)
	}
	if got := provider("openai"); got != ftMini {
		t.Errorf("switching back to OpenAI left the base model %q, want its default", got)
	}
	if err := chromedp.Do(b, chromedp.SetValue(`input[name=base_model]`, "gpt-4.1-mini-2025-04-14")); err != nil {
		t.Fatal(err)
	}
	if got := provider("bedrock"); got != "gpt-4.1-mini-2025-04-14" {
		t.Errorf("switching provider replaced a typed base model with %q", got)
	}
}
