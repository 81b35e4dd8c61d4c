package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// In a real browser: sign in, see the Curate tab, sign out.
func TestBrowserSignInAndOut(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	ctx := webtest.Browser(t)

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "home")
	heading := text(t, ctx, `main h1`)
	// The admin pages sit in a menu that opens without script.
	if err := chromedp.Do(ctx, chromedp.Click(`#admin-menu summary`), chromedp.WaitVisible(`#admin-menu a[href="/admin/audit"]`)); err != nil {
		t.Fatalf("admin menu: %v", err)
	}
	nav := text(t, ctx, `nav.tabs`)
	who := text(t, ctx, `.who`)
	if heading != "Acme" || !strings.Contains(nav, "Overview") || !strings.Contains(nav, "Audit log") || !strings.Contains(who, "ada@acme.test") {
		t.Fatalf("after sign-in: heading %q nav %q who %q", heading, nav, who)
	}
	// htmx loaded from our own origin under the strict CSP.
	htmx, err := chromedp.Run(ctx, chromedp.Evaluate[string](`typeof htmx`))
	if err != nil || htmx != "object" {
		t.Fatalf("htmx did not load: %q %v", htmx, err)
	}

	if err := chromedp.Do(ctx, chromedp.Click(`#logout`), chromedp.WaitVisible(`input[name=email]`)); err != nil {
		t.Fatal(err)
	}
	if flash := text(t, ctx, `.flash`); !strings.Contains(flash, "signed out") {
		t.Fatalf("after sign-out: flash %q", flash)
	}
	// Signed out for real: the tab asks to sign in again.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/admin/users"), chromedp.WaitVisible(`input[name=email]`)); err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "/login?next=") {
		t.Fatalf("signed-out visit ended at %s (%v)", loc, err)
	}
}
