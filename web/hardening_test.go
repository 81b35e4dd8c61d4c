package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

// failLogin posts a wrong password with a forged forwarding header.
func failLogin(c *webtest.Client, email, forwarded string) webtest.Response {
	if c.CSRF() == "" {
		c.Get("/login")
	}
	form := url.Values{"email": {email}, "password": {"wrong-password-x"}, "_csrf": {c.CSRF()}}
	return c.Do(http.MethodPost, "/login", strings.NewReader(form.Encode()), http.Header{
		"Content-Type": {"application/x-www-form-urlencoded"}, "X-Forwarded-For": {forwarded}, "X-Real-Ip": {forwarded}})
}

func lastFailedLoginIP(t *testing.T, s *webtest.Server) string {
	t.Helper()
	var ip string
	err := s.Pool.QueryRow(context.Background(),
		"SELECT ip FROM audit_log WHERE action = 'auth.login_failed' ORDER BY created_at DESC, id DESC LIMIT 1").Scan(&ip)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// An untrusted client's X-Forwarded-For changes neither the per-address
// lockout nor the address in the audit log.
func TestForwardedForIgnoredFromUntrustedClients(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	c := s.Client()
	for i := range 30 {
		failLogin(c, fmt.Sprintf("nobody%d@acme.test", i), fmt.Sprintf("203.0.113.%d", i+1)).Must(t, http.StatusUnauthorized)
	}
	if ip := lastFailedLoginIP(t, s); ip != "127.0.0.1" {
		t.Errorf("audit address = %q; want the socket's 127.0.0.1", ip)
	}
	// The 31st failure from this socket is locked out whatever it claims.
	if res := failLogin(c, "nobody-else@acme.test", "198.51.100.7"); res.Status != http.StatusTooManyRequests {
		t.Fatalf("31st failure with a fresh forged address = %d; want 429", res.Status)
	}
}

func TestForwardedForBelievedFromTrustedProxy(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *config.Config) { c.TrustedProxies = "127.0.0.1/32" }})
	failLogin(s.Client(), "nobody@acme.test", "203.0.113.9").Must(t, http.StatusUnauthorized)
	if ip := lastFailedLoginIP(t, s); ip != "203.0.113.9" {
		t.Errorf("audit address = %q; want the proxy's client 203.0.113.9", ip)
	}
}

// After sign-in Curate goes only to a path of its own.
func TestSignInRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ann@acme.test", "viewer")
	for next, want := range map[string]string{
		"/stats?model=a":        "/stats?model=a",
		"/\t/evil.example":      "/",
		"/\n/evil.example":      "/",
		"//evil.example":        "/",
		"/\\evil.example":       "/",
		"/\\/evil.example":      "/",
		"https://evil.example/": "/",
		"javascript:alert(1)":   "/",
		"/%09/evil.example":     "/%09/evil.example", // stays an encoded path on this site
	} {
		c := s.Client()
		c.Get("/login")
		c.HTTP.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		res := c.PostForm("/login", url.Values{"email": {"ann@acme.test"}, "password": {webtest.Password}, "next": {next}})
		if res.Status != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("next=%q: %d to %q; want 303 to %q", next, res.Status, res.Header.Get("Location"), want)
		}
	}
}

// A NUL byte or invalid UTF-8 in a query parameter or a form field is a 422
// naming it, never a 500 from the database.
func TestNULInQueryAndForms(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cur@acme.test", "curator")
	key := s.APIKey(org, "k", "curator")
	c := s.SignedIn("cur@acme.test")
	for _, path := range []string{"/feedback?q=a%00b", "/feedback?tag=%ff", "/pairs?q=%00", "/api/feedback?q=x%00"} {
		var res webtest.Response
		if strings.HasPrefix(path, "/api/") {
			res = s.API(key, http.MethodGet, path, nil)
		} else {
			res = c.Get(path)
		}
		if res.Status != http.StatusUnprocessableEntity {
			t.Errorf("GET %s = %d; want 422", path, res.Status)
		}
	}
	res := s.API(key, http.MethodGet, "/api/feedback?q=x%00", nil)
	if !strings.Contains(res.Body, `"field":"q"`) || !strings.Contains(res.Body, "NUL") {
		t.Errorf("problem does not name the parameter: %s", res.Body)
	}
	res = c.PostForm("/pairs", url.Values{"query": {"a\x00b"}})
	if res.Status != http.StatusUnprocessableEntity || !strings.Contains(res.Body, "NUL") {
		t.Errorf("form with NUL = %d; want 422 naming it", res.Status)
	}
}

// A bulk selection larger than Go's 10,000-field form limit travels as one
// ids field, and the confirmation posts it back the same way.
func TestFeedbackBulkLargeSelection(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	rows, err := s.Pool.Query(context.Background(), `
		INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash)
		SELECT $1, 'question ' || i, 'answer ' || i, 'thumbs_down', 'api', sha256(i::text::bytea)
		FROM generate_series(1, 12000) AS i RETURNING id::text`, org)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != 12000 {
		t.Fatalf("seeded %d items: %v", len(ids), rows.Err())
	}
	c := s.SignedIn("cara@acme.test")
	c.Get("/feedback")
	form := url.Values{"op": {"approve"}, "ids": {strings.Join(ids, ",")}}
	res := c.PostForm("/feedback/bulk", form).Must(t, http.StatusOK)
	if !strings.Contains(res.Body, "Apply Approve to 12000 items?") && !strings.Contains(res.Body, "Apply Approve to 12,000 items?") {
		t.Fatalf("confirmation page does not count 12,000 items")
	}
	if n := strings.Count(res.Body, `name="ids"`); n != 1 {
		t.Errorf("the confirmation re-posts the selection in %d fields; want 1", n)
	}
	form.Set("confirm", "12000")
	c.PostForm("/feedback/bulk", form).Must(t, http.StatusSeeOther)
	var approved int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feedback WHERE org_id = $1 AND status = 'approved'", org).Scan(&approved); err != nil || approved != 12000 {
		t.Fatalf("%d items approved (%v); want 12000", approved, err)
	}
}

// A NUL character anywhere in a JSON body is a 422 naming the field: tags,
// context, notes, corrections, pair and dataset fields alike.
func TestNULInJSONBodies(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "k", "curator")
	nul := "a\x00b"
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up", "tags": []string{"ok", nul}}, "tags[1]"},
		{http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up", "context": map[string]any{"documents": []any{map[string]any{"text": nul}}}}, "context.documents[0].text"},
		{http.MethodPost, "/api/feedback/batch", map[string]any{"items": []any{map[string]any{"query": "q", "response": "r", "feedback_type": "correction", "correction": nul}}}, "items[0].correction"},
		{http.MethodPost, "/api/preference-pairs", map[string]any{"query": "q", "chosen_response": "a", "rejected_response": "b", "annotation_notes": nul}, "annotation_notes"},
		{http.MethodPost, "/api/training-datasets", map[string]any{"name": nul, "dataset_type": "dpo"}, "name"},
	} {
		res := s.API(key, c.method, c.path, c.body)
		if res.Status != http.StatusUnprocessableEntity || !strings.Contains(res.Body, `"field":"`+c.field+`"`) {
			t.Errorf("%s %s with NUL in %s: %d %s", c.method, c.path, c.field, res.Status, res.Body)
		}
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM feedback) + (SELECT count(*) FROM preference_pairs) + (SELECT count(*) FROM training_datasets)").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows stored from refused bodies (%v)", n, err)
	}
}
