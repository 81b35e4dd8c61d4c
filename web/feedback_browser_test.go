package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/curate/curate/web/webtest"
)

// The whole loop in a real browser: an API key posts feedback; a curator
// finds it through the URL and the filter form, opens it from the keyboard,
// writes a correction, sees the word diff, and approves it with "a".
func TestBrowserFeedbackQueue(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	key := s.APIKey(org, "assistant", "curator")

	post := func(body map[string]any) string {
		t.Helper()
		res := s.API(key, http.MethodPost, "/api/feedback", body).Must(t, http.StatusCreated)
		var out struct {
			ID string `json:"id"`
		}
		res.JSON(t, &out)
		return out.ID
	}
	target := post(map[string]any{
		"external_id": "trace-1", "query": "What is the capital of Australia?", "response": "The capital of Australia is Sydney.",
		"feedback_type": "thumbs_down", "model": "assist-v2", "comment": "wrong city", "latency_ms": 910,
		"context": map[string]any{"documents": []any{map[string]any{"title": "Atlas", "content": "Canberra is the capital."}}},
	})
	post(map[string]any{"query": "How do refunds work?", "response": "Within 30 days.", "feedback_type": "thumbs_up", "model": "assist-v2"})
	post(map[string]any{"query": "What is the capital of France?", "response": "Paris.", "feedback_type": "thumbs_up", "model": "assist-v1"})

	ctx := webtest.Browser(t)
	rowCount := `document.querySelectorAll('#queue tr[data-item]').length`
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cara@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		// A filter in the URL.
		chromedp.Navigate(s.URL+"/feedback?model=assist-v2"),
		chromedp.WaitVisible(`#queue`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, ctx, rowCount); n != 2 {
		t.Fatalf("model=assist-v2 shows %d rows, want 2", n)
	}
	// The counts per status arrive after the page: two pending, none approved.
	waitFor(t, ctx, `document.querySelector('#status-counts [data-status=""] .num') !== null`)
	if all, approved := text(t, ctx, `#status-counts [data-status=""] .num`), text(t, ctx, `#status-counts [data-status="approved"] .num`); all != "2" || approved != "0" {
		t.Errorf("counts: all %s, approved %s; want 2 and 0", all, approved)
	}

	// The filter form adds a search and keeps the model; empty fields stay
	// out of the URL.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(`#filters input[name=q]`, "capital"),
		chromedp.KeyEvent(kb.Enter), // as a person submits it
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, rowCount+` === 1 && location.search.includes('q=capital')`)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "model=assist-v2") || strings.Contains(loc, "status=") {
		t.Fatalf("after filtering the URL is %s (%v)", loc, err)
	}
	webtest.Screenshot(t, ctx, "queue-filtered")

	// j focuses the first row, visibly; o opens it.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j")); err != nil {
		t.Fatal(err)
	}
	if id := eval[string](t, ctx, `document.activeElement.dataset.item || ''`); id != target {
		t.Fatalf("j focused %q, want the row of %s", id, target)
	}
	if outline := eval[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`); outline == "none" {
		t.Error("the focused row has no visible outline")
	}
	navKey(t, ctx, "o")
	waitFor(t, ctx, `document.getElementById('item') !== null`)
	for sel, want := range map[string]string{"#item-query": "What is the capital of Australia?", "#item-status": "Pending"} {
		if got := text(t, ctx, sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}

	// ? shows the shortcuts; Escape closes them.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("?")); err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, `document.getElementById('shortcuts').open`) {
		t.Error("? did not open the shortcuts")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape), chromedp.Poll[chromedp.Void](`!document.getElementById('shortcuts').open`)); err != nil {
		t.Fatal(err)
	}

	// c opens the editor; the curator replaces the text and saves.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("c")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.activeElement.id === 'correction'`) // c focuses the editor
	const golden = "The capital of Australia is Canberra."
	err = chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.activeElement.select()`),
		chromedp.KeyEvent(golden),
		chromedp.Click(`#save-correction`),
		chromedp.WaitVisible(`#item-diff ins`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "item-corrected")
	if del, ins := text(t, ctx, `#item-diff del`), text(t, ctx, `#item-diff ins`); del != "Sydney" || ins != "Canberra" {
		t.Errorf("diff shows -%q +%q, want -Sydney +Canberra", del, ins)
	}
	if got := text(t, ctx, "#item-status"); got != "Corrected" {
		t.Errorf("after saving the correction the status is %q", got)
	}

	// a approves, in place (once the saved correction's page has settled).
	waitFor(t, ctx, `document.readyState === 'complete' && document.getElementById('item-status') !== null`)
	navKey(t, ctx, "a")
	waitFor(t, ctx, `document.getElementById('item-status') !== null && document.getElementById('item-status').textContent.trim() === 'Approved'`)

	// u goes back to the queue as it was left: the filter is kept.
	navKey(t, ctx, "u")
	waitFor(t, ctx, `location.pathname === '/feedback' && location.search.includes('q=capital') && `+rowCount+` === 1`)

	// In the queue: r rejects the focused row; x selects a row and t tags the
	// selection through the bulk form, confirmed before it runs.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/feedback?model=assist-v2"), chromedp.WaitVisible(`#queue`)); err != nil {
		t.Fatal(err)
	}
	refunds := eval[string](t, ctx, `document.querySelector('#queue tr[data-item]').dataset.item`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.querySelector('.flash') !== null && document.querySelector('.flash').textContent.includes('Rejected')`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("x")); err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, `document.activeElement.querySelector('[data-select]').checked`) {
		t.Fatal("x did not select the row: " + eval[string](t, ctx, `document.activeElement.outerHTML.slice(0, 300)`))
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("t")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.activeElement.id === 'bulk-tag'`) // t focuses the bulk tag field
	if err := chromedp.Do(ctx, chromedp.KeyEvent("geo"), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `document.getElementById('bulk-confirm') !== null`)
	if q := text(t, ctx, `.confirm-question`); q != "Apply Add tag “geo” to 2 items?" {
		t.Errorf("confirmation asks %q", q)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#bulk-apply`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, `location.pathname === '/feedback' && document.querySelector('.flash') !== null`)
	var tagged int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feedback WHERE 'geo' = ANY(tags)").Scan(&tagged); err != nil || tagged != 2 {
		t.Errorf("%d items tagged geo (%v), want 2", tagged, err)
	}
	var refundsStatus string
	if err := s.Pool.QueryRow(context.Background(), "SELECT status::text FROM feedback WHERE id = $1", refunds).Scan(&refundsStatus); err != nil || refundsStatus != "rejected" {
		t.Errorf("r on the first row left it %s (%v)", refundsStatus, err)
	}

	var status, correction string
	if err := s.Pool.QueryRow(context.Background(), "SELECT status::text, correction FROM feedback WHERE id = $1", target).Scan(&status, &correction); err != nil {
		t.Fatal(err)
	}
	if status != "approved" || correction != golden {
		t.Errorf("row: status %s, correction %q", status, correction)
	}
	for _, action := range []string{"feedback.correct", "feedback.approve"} {
		var actor, details string
		err := s.Pool.QueryRow(context.Background(),
			"SELECT actor_label, details::text FROM audit_log WHERE action = $1 AND target_id = $2", action, target).Scan(&actor, &details)
		if err != nil {
			t.Fatalf("audit %s: %v", action, err)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(details), &d); err != nil {
			t.Fatal(err)
		}
		if actor != "cara@acme.test" {
			t.Errorf("audit %s by %q", action, actor)
		}
		if action == "feedback.approve" && (d["from"] != "corrected" || d["to"] != "approved") {
			t.Errorf("audit %s details %v", action, d)
		}
	}
}

// waitFor evaluates expr until it is true on a fully loaded page, across
// page loads (which end a chromedp.Poll).
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		// A page counts once its deferred scripts (the shortcuts) have run.
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === 'complete' && (`+expr+`)`))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// navKey presses a key that leaves the page. The page may go before the
// key's release is delivered, which chromedp reports as the target having
// navigated; the callers wait for the new page themselves.
func navKey(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(key)); err != nil && !strings.Contains(err.Error(), "navigated or closed") {
		t.Fatal(err)
	}
}
