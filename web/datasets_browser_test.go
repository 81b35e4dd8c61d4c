package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// In a real browser: build an instruction dataset from corrected feedback,
// read its validation report, freeze it, export it and download the file.
func TestBrowserDatasetFromCorrectedFeedback(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	uid := s.User(org, "cora@acme.test", "curator")
	store := feedback.New(s.Pool)
	reviewer := audit.Actor{Kind: "user", ID: uid, Label: "cora@acme.test"}
	bg := context.Background()
	for i := range 10 {
		row, _, err := store.Ingest(bg, org, "api", feedback.Item{Query: fmt.Sprintf("How do I rotate API key %d?", i),
			Response: "No idea.", FeedbackType: "thumbs_down"})
		if err != nil {
			t.Fatal(err)
		}
		id := row.ID
		fix := fmt.Sprintf("Open Settings > API keys, pick key %d and choose Rotate.", i)
		if _, err := store.Update(bg, reviewer, org, id, 1, feedback.Change{Correction: &fix}); err != nil {
			t.Fatal(err)
		}
	}
	// One that is only pending must stay out.
	if _, _, err := store.Ingest(bg, org, "api", feedback.Item{Query: "Pending?", Response: "Yes.", FeedbackType: "thumbs_up"}); err != nil {
		t.Fatal(err)
	}

	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cora@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Click(`nav.tabs a[href="/datasets"]`),
		chromedp.WaitVisible(`#new-dataset`),
		chromedp.SendKeys(`#new-dataset input[name=name]`, "Key rotation answers"),
		chromedp.SetValue(`#new-dataset select[name=dataset_type]`, "instruction_tuning"),
		chromedp.Submit(`#new-dataset`),
		chromedp.WaitVisible(`#add-by-filter`),
		chromedp.SetValue(`#add-by-filter select[name=status]`, "corrected"),
		chromedp.Click(`#add-filter`),
		chromedp.WaitVisible(`#report-verdict`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n := text(t, ctx, `#sample-count`); n != "10" {
		t.Fatalf("sample count %q, want 10", n)
	}
	if v := text(t, ctx, `#report-verdict`); !strings.Contains(v, "No errors: ready to export to OpenAI chat") {
		t.Fatalf("report verdict %q", v)
	}
	if f := text(t, ctx, `#quality-formula`); !strings.Contains(f, "1 - (examples_with_errors + 0.5 * examples_with_only_warnings) / examples") {
		t.Fatalf("formula %q", f)
	}
	webtest.Screenshot(t, ctx, "dataset-report")

	err = chromedp.Do(ctx,
		chromedp.Click(`#lifecycle button[data-to=ready]`),
		chromedp.WaitVisible(`#versions tr[data-version="1"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st := text(t, ctx, `#dataset-status`); st != "Ready" {
		t.Fatalf("status %q", st)
	}
	hash := text(t, ctx, `#versions tr[data-version="1"] code.hash`)
	if len(hash) != 64 {
		t.Fatalf("hash %q", hash)
	}

	err = chromedp.Do(ctx,
		chromedp.Click(`#start-export`),
		chromedp.WaitVisible(`#export-rows tr[data-status=succeeded] a.download`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "dataset-exported")
	// The progress bar is a <progress> element, full at the end.
	full, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const p = document.querySelector('#export-rows tr[data-status=succeeded] progress'); return p.value === p.max && p.max === 10; })()`))
	if err != nil || !full {
		t.Fatalf("progress element not full: %v %v", full, err)
	}
	// Download through the app with the browser's session.
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`fetch(document.querySelector('#export-rows a.download').href).then(r => r.ok ? r.text() : "status " + r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(body), "\n")
	// 10 × 20% = 2 validation examples: 8 in train.jsonl.
	if len(lines) != 8 || !strings.HasPrefix(lines[0], `{"messages":[{"role":"user","content":"How do I rotate API key`) ||
		!strings.Contains(body, "choose Rotate.") || strings.Contains(body, "No idea.") {
		t.Fatalf("downloaded train.jsonl:\n%s", body)
	}
}
