package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/db"
	"github.com/curate/curate/web"
	"github.com/curate/curate/web/webtest"
)

func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "curator")

	c := s.Client()
	c.Get("/").Must(t, http.StatusSeeOther)
	page := c.Get("/login").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "Sign in to Curate") {
		t.Fatalf("login page: %s", page.Body)
	}
	res := c.PostForm("/login", url.Values{"email": {"ada@acme.test"}, "password": {webtest.Password}, "next": {"/admin/users"}})
	if res.Status != http.StatusSeeOther || res.Header.Get("Location") != "/admin/users" {
		t.Fatalf("login: %d %q", res.Status, res.Header.Get("Location"))
	}
	session := setCookie(t, res, "curate_session")
	if !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure || session.MaxAge <= 0 {
		t.Errorf("session cookie: HttpOnly=%v SameSite=%v Secure=%v MaxAge=%d", session.HttpOnly, session.SameSite, session.Secure, session.MaxAge)
	}
	home := c.Get("/").Must(t, http.StatusOK)
	if !strings.Contains(home.Body, "ada@acme.test") || !strings.Contains(home.Body, `aria-label="Curate sections"`) {
		t.Fatalf("home: %s", home.Body)
	}
	c.PostForm("/logout", nil).Must(t, http.StatusSeeOther)
	c.Get("/").Must(t, http.StatusSeeOther)

	assertAudit(t, s, "auth.login", "auth.logout")
}

func TestSignInRejections(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "bob@acme.test", "viewer")

	c := s.Client()
	res := c.PostForm("/login", url.Values{"email": {"bob@acme.test"}, "password": {"not the password"}})
	if res.Status != http.StatusUnauthorized || !strings.Contains(res.Body, "Wrong e-mail or password") {
		t.Fatalf("wrong password: %d %s", res.Status, res.Body)
	}
	// An unknown e-mail gets the same answer.
	res = c.PostForm("/login", url.Values{"email": {"nobody@acme.test"}, "password": {"whatever-it-is"}})
	if res.Status != http.StatusUnauthorized || !strings.Contains(res.Body, "Wrong e-mail or password") {
		t.Fatalf("unknown e-mail: %d", res.Status)
	}
	// Missing fields.
	c.PostForm("/login", url.Values{"email": {""}}).Must(t, http.StatusUnprocessableEntity)
	assertAudit(t, s, "auth.login_failed")
}

func TestLockout(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "eve@acme.test", "viewer")
	c := s.Client()
	for i := range 5 {
		c.PostForm("/login", url.Values{"email": {"eve@acme.test"}, "password": {"wrong-password-x"}}).Must(t, http.StatusUnauthorized)
		_ = i
	}
	// Locked now, even with the right password.
	res := c.PostForm("/login", url.Values{"email": {"eve@acme.test"}, "password": {webtest.Password}})
	if res.Status != http.StatusTooManyRequests || !strings.Contains(res.Body, "Too many failed sign-ins") || res.Header.Get("Retry-After") == "" {
		t.Fatalf("after 5 failures: %d %q", res.Status, res.Header.Get("Retry-After"))
	}
	assertAudit(t, s, "auth.login_locked")
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "root@acme.test", "admin")
	c := s.SignedIn("root@acme.test")
	c.Get("/admin/users")

	form := url.Values{"email": {"new@acme.test"}, "role": {"viewer"}, "password": {"long-enough-password"}}
	// A missing token and a wrong one get the same answer, 403.
	missing := c.PostFormRaw("/admin/users", form)
	if missing.Status != http.StatusForbidden || !strings.Contains(missing.Body, "security token") {
		t.Fatalf("no token: %d %s", missing.Status, missing.Body)
	}
	res := c.Do(http.MethodPost, "/admin/users", strings.NewReader(form.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "HX-Request": {"true"}})
	res.Must(t, http.StatusForbidden)
	form.Set("_csrf", "forged-token-forged-token-forged")
	c.PostFormRaw("/admin/users", form).Must(t, http.StatusForbidden)
	// An HTMX request with a wrong header is refused too.
	res = c.Do(http.MethodPost, "/admin/users", strings.NewReader(url.Values{"email": {"x@acme.test"}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-CSRF-Token": {"nope"}, "HX-Request": {"true"}})
	res.Must(t, http.StatusForbidden)

	users, err := db.New(s.Pool).UserList(context.Background(), org)
	if err != nil || len(users) != 1 {
		t.Fatalf("refused requests changed users: %d %v", len(users), err)
	}
	// With the page's token it works.
	form.Del("_csrf")
	c.PostForm("/admin/users", form).Must(t, http.StatusSeeOther)
}

// Signing in gives the browser a new CSRF token: the one its signed-out
// pages carried (which a page elsewhere could have read or planted) no
// longer passes, and the new one does.
func TestCSRFRotatedAtSignIn(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "root@acme.test", "admin")
	c := s.Client()
	c.Get("/login").Must(t, http.StatusOK)
	before := c.CSRF()
	res := c.PostForm("/login", url.Values{"email": {"root@acme.test"}, "password": {webtest.Password}}).Must(t, http.StatusSeeOther)
	after := setCookie(t, res, "curate_csrf")
	if after.Value == "" || after.Value == before || !after.HttpOnly || after.SameSite != http.SameSiteLaxMode || after.Path != "/" {
		t.Fatalf("CSRF cookie at sign-in: %+v; want a new token (the signed-out one was %q), HttpOnly, SameSite=Lax, path /", after, before)
	}
	if n := strings.Count(strings.Join(res.Header.Values("Set-Cookie"), "\n"), "curate_csrf="); n != 1 {
		t.Errorf("sign-in set the CSRF cookie %d times; want once", n)
	}
	form := url.Values{"email": {"new@acme.test"}, "role": {"viewer"}, "password": {"long-enough-password"}, "_csrf": {before}}
	c.PostFormRaw("/admin/users", form).Must(t, http.StatusForbidden)
	if page := c.Get("/admin/users").Must(t, http.StatusOK); !strings.Contains(page.Body, after.Value) {
		t.Errorf("the signed-in page does not carry the new token %q", after.Value)
	}
	form.Set("_csrf", after.Value)
	c.PostFormRaw("/admin/users", form).Must(t, http.StatusSeeOther)
}

func TestRoles(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "viewer@acme.test", "viewer")
	s.User(org, "curator@acme.test", "curator")
	s.User(org, "admin@acme.test", "admin")

	for _, tc := range []struct {
		email  string
		path   string
		status int
	}{
		{"viewer@acme.test", "/admin/users", http.StatusForbidden},
		{"curator@acme.test", "/admin/api-keys", http.StatusForbidden},
		{"curator@acme.test", "/admin/audit", http.StatusForbidden},
		{"admin@acme.test", "/admin/audit", http.StatusOK},
		{"viewer@acme.test", "/", http.StatusOK},
	} {
		res := s.SignedIn(tc.email).Get(tc.path)
		if res.Status != tc.status {
			t.Errorf("%s GET %s: %d, want %d", tc.email, tc.path, res.Status, tc.status)
		}
	}
	// A curator cannot create users: refused, nothing stored.
	c := s.SignedIn("curator@acme.test")
	c.Get("/")
	c.PostForm("/admin/users", url.Values{"email": {"sneaky@acme.test"}, "role": {"admin"}, "password": {"long-enough-password"}}).Must(t, http.StatusForbidden)
	if _, err := db.New(s.Pool).UserGetByEmail(context.Background(), "sneaky@acme.test"); err == nil {
		t.Fatal("a curator created a user")
	}
}

func TestRoutesTableNamesRoles(t *testing.T) {
	public := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /login": true, "POST /login": true}
	for _, r := range web.Routes(nil) {
		key := r.Method + " " + r.Path
		if r.Role == web.Public && !public[key] {
			t.Errorf("%s is public", key)
		}
		if r.Method != http.MethodGet && r.Role == web.Public && key != "POST /login" {
			t.Errorf("mutating route %s needs a role", key)
		}
	}
}

func TestAdminUserForm(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "admin@acme.test", "admin")
	c := s.SignedIn("admin@acme.test")
	c.Get("/admin/users")

	for _, tc := range []struct {
		form  url.Values
		field string
		msg   string
	}{
		{url.Values{"email": {"not-an-email"}, "role": {"viewer"}, "password": {"long-enough-password"}}, "email", "enter an e-mail address"},
		{url.Values{"email": {"a@acme.test"}, "role": {"owner"}, "password": {"long-enough-password"}}, "role", "unknown role"},
		{url.Values{"email": {"a@acme.test"}, "role": {"viewer"}, "password": {"short"}}, "password", "at least"},
		{url.Values{"email": {"admin@acme.test"}, "role": {"viewer"}, "password": {"long-enough-password"}}, "email", "already exists"},
	} {
		res := c.PostForm("/admin/users", tc.form).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `id="err-`+tc.field+`"`) || !strings.Contains(res.Body, tc.msg) {
			t.Errorf("%v: no inline message %q for %s", tc.form, tc.msg, tc.field)
		}
	}
	users, _ := db.New(s.Pool).UserList(context.Background(), org)
	if len(users) != 1 {
		t.Fatalf("bad forms stored users: %d", len(users))
	}

	c.PostForm("/admin/users", url.Values{"email": {"cat@acme.test"}, "role": {"viewer"}, "password": {"long-enough-password"}}).Must(t, http.StatusSeeOther)
	cat, err := db.New(s.Pool).UserGetByEmail(context.Background(), "cat@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	list := c.Get("/admin/users").Must(t, http.StatusOK)
	if !strings.Contains(list.Body, "Added cat@acme.test as viewer") {
		t.Error("no flash after creating a user")
	}
	c.PostForm("/admin/users/"+cat.ID.String()+"/role", url.Values{"role": {"curator"}}).Must(t, http.StatusSeeOther)
	c.PostForm("/admin/users/"+cat.ID.String()+"/active", url.Values{"active": {"false"}}).Must(t, http.StatusSeeOther)
	// A deactivated user cannot sign in.
	res := s.Client().PostForm("/login", url.Values{"email": {"cat@acme.test"}, "password": {"long-enough-password"}})
	if res.Status != http.StatusUnauthorized {
		t.Fatalf("deactivated user signed in: %d", res.Status)
	}
	// The last admin cannot demote themselves.
	admin, _ := db.New(s.Pool).UserGetByEmail(context.Background(), "admin@acme.test")
	c.PostForm("/admin/users/"+admin.ID.String()+"/role", url.Values{"role": {"viewer"}}).Must(t, http.StatusConflict)
	assertAudit(t, s, "user.create", "user.role_change", "user.deactivate")
}

func TestCrossOrganisationIsNotFound(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	acme, globex := s.Org("acme"), s.Org("globex")
	s.User(acme, "admin@acme.test", "admin")
	s.User(globex, "admin@globex.test", "admin")
	victim := s.User(globex, "victim@globex.test", "curator")

	c := s.SignedIn("admin@acme.test")
	c.Get("/admin/users")
	c.PostForm("/admin/users/"+victim.String()+"/role", url.Values{"role": {"viewer"}}).Must(t, http.StatusNotFound)
	c.PostForm("/admin/users/"+victim.String()+"/active", url.Values{"active": {"false"}}).Must(t, http.StatusNotFound)
	c.PostForm("/admin/users/not-a-uuid/role", url.Values{"role": {"viewer"}}).Must(t, http.StatusNotFound)
	u, _ := db.New(s.Pool).UserGetByEmail(context.Background(), "victim@globex.test")
	if u.Role != db.UserRoleCurator || !u.Active {
		t.Fatal("another organisation's user was changed")
	}
	list := c.Get("/admin/users").Body
	if strings.Contains(list, "globex.test") {
		t.Fatal("another organisation's users are listed")
	}
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "admin@acme.test", "admin")
	key := s.APIKey(org, "backend", "curator")

	var me map[string]string
	s.API(key, http.MethodGet, "/api/me", nil).Must(t, http.StatusOK).JSON(t, &me)
	if me["org"] != "acme" || me["role"] != "curator" || me["kind"] != "api_key" {
		t.Fatalf("/api/me = %v", me)
	}
	for _, bad := range []string{"", "cur_x_y", "Basic abc", key[:len(key)-2] + "zz"} {
		h := http.Header{}
		if bad != "" {
			h.Set("Authorization", strings.TrimPrefix("Bearer "+bad, "Bearer Basic "))
			if strings.HasPrefix(bad, "Basic") {
				h.Set("Authorization", bad)
			}
		}
		res := s.Client().Do(http.MethodGet, "/api/me", nil, h)
		if res.Status != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("key %q: %d %s", bad, res.Status, res.Header.Get("Content-Type"))
		}
	}

	// Create through the page: the secret is shown once.
	c := s.SignedIn("admin@acme.test")
	c.Get("/admin/api-keys")
	res := c.PostForm("/admin/api-keys", url.Values{"name": {"ingest"}, "role": {"viewer"}}).Must(t, http.StatusCreated)
	secret := regexpFind(t, `<pre id="new-secret">(cur_[a-z0-9_]+)</pre>`, res.Body)
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Error("the page with a secret may be cached")
	}
	if strings.Contains(c.Get("/admin/api-keys").Body, secret) {
		t.Fatal("the secret is shown again")
	}
	var me2 map[string]string
	s.API(secret, http.MethodGet, "/api/me", nil).Must(t, http.StatusOK).JSON(t, &me2)
	if me2["role"] != "viewer" {
		t.Fatalf("new key role %v", me2)
	}
	// Revoke it: it stops working.
	keys, _ := db.New(s.Pool).APIKeyList(context.Background(), org)
	var ingestID string
	for _, k := range keys {
		if k.Name == "ingest" {
			ingestID = k.ID.String()
		}
	}
	c.PostForm("/admin/api-keys/"+ingestID+"/revoke", nil).Must(t, http.StatusSeeOther)
	s.API(secret, http.MethodGet, "/api/me", nil).Must(t, http.StatusUnauthorized)
	c.PostForm("/admin/api-keys", url.Values{"name": {""}, "role": {"viewer"}}).Must(t, http.StatusUnprocessableEntity)

	// A session reaches the API too, as kind "session".
	var me3 map[string]string
	c.Get("/api/me").Must(t, http.StatusOK).JSON(t, &me3)
	if me3["kind"] != "session" || me3["role"] != "admin" {
		t.Fatalf("session /api/me = %v", me3)
	}
	assertAudit(t, s, "api_key.create", "api_key.revoke")
}

func TestSecurityHeadersAndLimits(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) { c.BodyLimit = 4096 }})
	res := s.Client().Get("/login")
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", res.Header)
	}
	if strings.Contains(res.Body, "<script>") || strings.Contains(res.Body, " style=") {
		t.Error("inline script or style in the page")
	}
	// An API answer may run nothing at all, and carries no page headers.
	api := s.Client().Get("/api/me")
	if got := api.Header.Get("Content-Security-Policy"); got != "default-src 'none'; frame-ancestors 'none'" {
		t.Errorf("API CSP %q", got)
	}
	if api.Header.Get("X-Content-Type-Options") != "nosniff" || api.Header.Get("Referrer-Policy") != "" {
		t.Errorf("API headers %v", api.Header)
	}
	big := url.Values{"email": {strings.Repeat("a", 8000)}, "password": {"x"}}
	s.Client().PostFormRaw("/login", big).Must(t, http.StatusRequestEntityTooLarge)
	s.Client().Get("/no/such/page").Must(t, http.StatusNotFound)
	s.Client().Get("/healthz").Must(t, http.StatusOK)
	s.Client().Get("/readyz").Must(t, http.StatusOK)
}
