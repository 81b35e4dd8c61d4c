package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

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
