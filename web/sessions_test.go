package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

// copyCookies gives to the cookies from holds for fromURL, as someone who
// copied them out of a browser would hold them.
func copyCookies(t *testing.T, from *webtest.Client, fromURL string, to *webtest.Client, toURL string) {
	t.Helper()
	fu, _ := url.Parse(fromURL)
	tu, _ := url.Parse(toURL)
	cookies := from.HTTP.Jar.Cookies(fu)
	if len(cookies) == 0 {
		t.Fatal("no cookies to copy")
	}
	to.HTTP.Jar.SetCookies(tu, cookies)
}

func assertSignedIn(t *testing.T, c *webtest.Client, who string) {
	t.Helper()
	if res := c.Get("/"); res.Status != http.StatusOK {
		t.Errorf("%s: GET / = %d; want 200 (signed in)", who, res.Status)
	}
}

func assertSignedOut(t *testing.T, c *webtest.Client, who string) {
	t.Helper()
	if res := c.Get("/"); res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Errorf("%s: GET / = %d to %q; want a redirect to /login", who, res.Status, res.Header.Get("Location"))
	}
	if res := c.Get("/api/me"); res.Status != http.StatusUnauthorized {
		t.Errorf("%s: GET /api/me = %d; want 401", who, res.Status)
	}
}

// A session cookie copied before sign-out is worthless after it.
func TestSignOutEndsACopiedCookie(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	s.User(s.Org("acme"), "ada@acme.test", "curator")
	c := s.SignedIn("ada@acme.test")
	thief := s.Client()
	copyCookies(t, c, s.URL, thief, s.URL)
	assertSignedIn(t, thief, "copied cookie before sign-out")

	c.Get("/")
	c.PostForm("/logout", nil).Must(t, http.StatusSeeOther)
	assertSignedOut(t, c, "signed-out client")
	assertSignedOut(t, thief, "copied cookie after sign-out")
}

// Two servers on one database: signing out on one ends the session on the
// other at once.
func TestSignOutReachesEveryServer(t *testing.T) {
	t.Parallel()
	sameKey := func(c *config.Config) { c.SessionKey = strings.Repeat("shared-session-key-", 3) }
	a := webtest.New(t, webtest.Options{Configure: sameKey})
	b := webtest.New(t, webtest.Options{Configure: sameKey, Pool: a.Pool})
	a.User(a.Org("acme"), "ada@acme.test", "curator")

	onA := a.SignedIn("ada@acme.test")
	onB := b.Client()
	copyCookies(t, onA, a.URL, onB, b.URL)
	assertSignedIn(t, onB, "the session on the second server")

	onA.Get("/")
	onA.PostForm("/logout", nil).Must(t, http.StatusSeeOther)
	assertSignedOut(t, onB, "the second server after signing out on the first")
}

func TestSignOutEverywhere(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	s.User(s.Org("acme"), "ada@acme.test", "viewer")
	laptop := s.SignedIn("ada@acme.test")
	phone := s.SignedIn("ada@acme.test")

	home := laptop.Get("/").Must(t, http.StatusOK)
	if !strings.Contains(home.Body, `href="/account"`) {
		t.Error("the header does not link to the account page")
	}
	page := laptop.Get("/account").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `action="/account/sign-out-everywhere"`) || !strings.Contains(page.Body, "2 browsers") {
		t.Fatalf("account page lacks the sign-out-everywhere form or the session count:\n%s", page.Body)
	}
	// A forged request (no CSRF token) changes nothing.
	laptop.PostFormRaw("/account/sign-out-everywhere", url.Values{}).Must(t, http.StatusForbidden)
	assertSignedIn(t, phone, "phone after a forged request")

	res := laptop.PostForm("/account/sign-out-everywhere", nil).Must(t, http.StatusSeeOther)
	if res.Header.Get("Location") != "/login" {
		t.Errorf("after signing out everywhere: to %q; want /login", res.Header.Get("Location"))
	}
	assertSignedOut(t, laptop, "the browser that signed out everywhere")
	assertSignedOut(t, phone, "another browser of the same user")
	assertAudit(t, s, "auth.logout_everywhere")
}

// Deactivating a user ends their sessions for good: reactivating them does
// not bring an old cookie back to life.
func TestDeactivationEndsSessions(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "root@acme.test", "admin")
	cat := s.User(org, "cat@acme.test", "curator")
	admin := s.SignedIn("root@acme.test")
	admin.Get("/admin/users")
	catC := s.SignedIn("cat@acme.test")

	admin.PostForm("/admin/users/"+cat.String()+"/active", url.Values{"active": {"false"}}).Must(t, http.StatusSeeOther)
	assertSignedOut(t, catC, "deactivated user")
	admin.PostForm("/admin/users/"+cat.String()+"/active", url.Values{"active": {"true"}}).Must(t, http.StatusSeeOther)
	assertSignedOut(t, catC, "reactivated user's old session")
	assertSignedIn(t, s.SignedIn("cat@acme.test"), "reactivated user signing in again")
}

func TestRoleChangeEndsSessions(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "root@acme.test", "admin")
	cat := s.User(org, "cat@acme.test", "curator")
	admin := s.SignedIn("root@acme.test")
	admin.Get("/admin/users")
	catC := s.SignedIn("cat@acme.test")

	admin.PostForm("/admin/users/"+cat.String()+"/role", url.Values{"role": {"viewer"}}).Must(t, http.StatusSeeOther)
	assertSignedOut(t, catC, "user whose role changed")
	var me map[string]string
	s.SignedIn("cat@acme.test").Get("/api/me").Must(t, http.StatusOK).JSON(t, &me)
	if me["role"] != "viewer" {
		t.Errorf("after signing in again the role is %q; want viewer", me["role"])
	}
}

// Changing one's password ends every other session and keeps this one.
func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	s.User(s.Org("acme"), "ada@acme.test", "viewer")
	laptop := s.SignedIn("ada@acme.test")
	phone := s.SignedIn("ada@acme.test")
	laptop.Get("/account").Must(t, http.StatusOK)

	const newPassword = "a-brand-new-password"
	for _, tc := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"current_password": {"not-the-password"}, "new_password": {newPassword}}, "current_password"},
		{url.Values{"current_password": {webtest.Password}, "new_password": {"short"}}, "new_password"},
	} {
		res := laptop.PostForm("/account/password", tc.form).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `id="err-`+tc.field+`"`) {
			t.Errorf("no message for %s:\n%s", tc.field, res.Body)
		}
	}
	assertSignedIn(t, phone, "phone after refused changes")

	laptop.PostForm("/account/password", url.Values{"current_password": {webtest.Password}, "new_password": {newPassword}}).
		Must(t, http.StatusSeeOther)
	assertSignedIn(t, laptop, "the browser that changed the password")
	assertSignedOut(t, phone, "another browser after the password changed")

	s.Client().PostForm("/login", url.Values{"email": {"ada@acme.test"}, "password": {webtest.Password}}).Must(t, http.StatusUnauthorized)
	s.Client().PostForm("/login", url.Values{"email": {"ada@acme.test"}, "password": {newPassword}}).Must(t, http.StatusSeeOther)
	assertAudit(t, s, "user.password_change")
}

// In a real browser: from the header to the account page, and signing out
// everywhere with its form.
func TestBrowserSignOutEverywhere(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	s.User(s.Org("acme"), "ada@acme.test", "viewer")
	other := s.SignedIn("ada@acme.test")
	ctx := webtest.Browser(t)

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`.who a[href="/account"]`),
		chromedp.Click(`.who a[href="/account"]`),
		chromedp.WaitVisible(`#sign-out-everywhere`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "account")
	if sessions := text(t, ctx, `#sessions`); !strings.Contains(sessions, "2 browsers") || !strings.Contains(sessions, "this browser") {
		t.Fatalf("account page sessions: %q", sessions)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#sign-out-everywhere`), chromedp.WaitVisible(`input[name=email]`)); err != nil {
		t.Fatal(err)
	}
	if flash := text(t, ctx, `.flash`); !strings.Contains(flash, "signed out everywhere") {
		t.Fatalf("after signing out everywhere: flash %q", flash)
	}
	assertSignedOut(t, other, "the other client")
}
