package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

type cfgT = config.Config

// setCookie parses the response's Set-Cookie header for name.
func setCookie(t *testing.T, res webtest.Response, name string) *http.Cookie {
	t.Helper()
	for _, line := range res.Header.Values("Set-Cookie") {
		ck, err := http.ParseSetCookie(line)
		if err == nil && ck.Name == name {
			return ck
		}
	}
	t.Fatalf("no Set-Cookie for %s in %v", name, res.Header.Values("Set-Cookie"))
	return nil
}

func regexpFind(t *testing.T, expr, s string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s not found", expr)
	}
	return m[1]
}

func assertAudit(t *testing.T, s *webtest.Server, actions ...string) {
	t.Helper()
	for _, a := range actions {
		var n int
		if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = $1", a).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("no audit entry %q", a)
		}
	}
}

// text is the visible text of the first element sel matches, waiting for
// one to exist. It reads the text inside the page in one step: a polled
// fragment may replace the element between a node lookup and a second
// call for its text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	q := mustJSON(t, sel)
	// The text is wrapped in an array: an empty text is still an answer.
	s, err := chromedp.Run(ctx, chromedp.Poll[[]string](`(() => { const e = document.querySelector(`+q+`); return e ? [e.innerText] : null })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || len(s) != 1 {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s[0])
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawJSON is a body already encoded as JSON.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func pgText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func pgInt2(n *int) pgtype.Int2 {
	if n == nil {
		return pgtype.Int2{}
	}
	return pgtype.Int2{Int16: int16(*n), Valid: true}
}
