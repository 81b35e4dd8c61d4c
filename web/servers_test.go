package web_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web"
	"github.com/curate/curate/web/webtest"
)

// Servers on one database must share the session key and the secret key:
// a second server with another key refuses to start, naming the setting
// and the fix; one with the same keys starts, and a sign-in on the first
// works on it.
func TestKeysMustMatchAcrossServers(t *testing.T) {
	t.Parallel()
	first := webtest.New(t, webtest.Options{})
	org := first.Org("acme")
	first.User(org, "ada@acme.test", "curator")

	start := func(configure func(*config.Config)) error {
		cfg := config.Defaults()
		cfg.DataDir, cfg.Workers, cfg.MetricsAddr = t.TempDir(), 0, ""
		cfg.SessionKey, cfg.SecretKey = webtest.SessionKey, webtest.SecretKey
		configure(&cfg)
		_, err := web.New(cfg, first.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
		return err
	}
	err := start(func(c *config.Config) { c.SecretKey = "another-secret-key-0123456789abcdef0123456" })
	if err == nil || !strings.Contains(err.Error(), "CURATE_SECRET_KEY differs") || !strings.Contains(err.Error(), "set CURATE_SECRET_KEY to the same value") {
		t.Fatalf("another secret key: %v, want a refusal naming CURATE_SECRET_KEY", err)
	}
	if strings.Contains(err.Error(), "CURATE_SESSION_KEY") {
		t.Errorf("the matching session key is blamed: %v", err)
	}
	// Neither key set: this server generated its own in its data directory,
	// and is told where they are and what to copy.
	dir := t.TempDir()
	err = start(func(c *config.Config) { c.DataDir, c.SessionKey, c.SecretKey = dir, "", "" })
	for _, want := range []string{"CURATE_SESSION_KEY differs", dir + "/session.key", "CURATE_SECRET_KEY differs", dir + "/secret.key", "copy secret.key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("generated keys: %v, want it to say %q", err, want)
		}
	}

	second := webtest.New(t, webtest.Options{Pool: first.Pool})
	ada := first.SignedIn("ada@acme.test")
	res, err := ada.HTTP.Get(second.URL + "/feedback")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("a session from the first server on the second: %d, want 200", res.StatusCode)
	}
}

// Two servers on one database share each API key's limit and each end
// user's: once both have beaten, each allows half the burst, so that
// together they allow the configured burst whichever server the requests
// reach; when one stops, the other takes the whole limit again.
func TestRateLimitSharedAcrossServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := func(c *config.Config) {
		c.APIRate, c.APIBurst = 0.001, 10 // no refill worth counting during the test
		c.FeedbackPerUser = 4
	}
	a := webtest.New(t, webtest.Options{Configure: limits})
	b := webtest.New(t, webtest.Options{Pool: a.Pool, Configure: limits})
	// Each server's first beat runs as it starts serving, which may be
	// after New returns: beat both here so each has seen the other.
	for _, s := range []*webtest.Server{a, b, a} {
		if err := s.App.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	org := a.Org("acme")

	allowed := func(key string, servers ...*webtest.Server) (n int) {
		t.Helper()
		for i := range 20 {
			res := servers[i%len(servers)].API(key, http.MethodGet, "/api/me", nil)
			switch res.Status {
			case http.StatusOK:
				n++
			case http.StatusTooManyRequests:
				if res.Header.Get("Retry-After") == "" {
					t.Fatal("429 without Retry-After")
				}
			default:
				t.Fatalf("GET /api/me: %d %s", res.Status, res.Body)
			}
		}
		return n
	}
	if n := allowed(a.APIKey(org, "spread", "viewer"), a, b); n != 10 {
		t.Errorf("one key over two servers: %d of 20 allowed, want the burst of 10 in all", n)
	}
	if n := allowed(a.APIKey(org, "pinned", "viewer"), b); n != 5 {
		t.Errorf("one key on one of two servers: %d of 20 allowed, want that server's share of 5", n)
	}

	// The per-user feedback limit (4 a minute) is shared the same way.
	key := a.APIKey(org, "ingest", "curator")
	stored := 0
	for i := range 8 {
		item := map[string]any{"external_id": "m" + string(rune('a'+i)), "user_id": "u-17", "query": "q", "response": "r", "feedback_type": "thumbs_down"}
		switch res := []*webtest.Server{a, b}[i%2].API(key, http.MethodPost, "/api/feedback", item); res.Status {
		case http.StatusCreated:
			stored++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("POST /api/feedback: %d %s", res.Status, res.Body)
		}
	}
	if stored != 4 {
		t.Errorf("one end user over two servers: %d of 8 items stored, want the limit of 4 in all", stored)
	}

	b.Stop()
	if err := a.App.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if n := allowed(a.APIKey(org, "alone", "viewer"), a); n != 10 {
		t.Errorf("one key on the only server left: %d of 20 allowed, want the whole burst of 10", n)
	}
}

// A server whose stop is asked for while its workers are still starting
// (a test that ends at once, a signal during start) stops quietly: the
// cancelled start is the stop it was asked for, not an error.
func TestRunStoppedWhileWorkersStart(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.DataDir, cfg.Workers, cfg.MetricsAddr = t.TempDir(), 1, "off"
	cfg.SessionKey, cfg.SecretKey = webtest.SessionKey, webtest.SecretKey
	app, err := web.New(cfg, pgtest.NewDB(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := app.Run(ctx, ln, nil); err != nil {
		t.Errorf("Run stopped before its workers started: %v; want nil", err)
	}
}
