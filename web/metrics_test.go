package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

// /metrics is served on its own address, not the public one, and names
// routes, never an organisation or an id.
func TestMetricsOnTheirOwnAddress(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("initech")
	key := s.APIKey(org, "scraper", "viewer")
	s.API(key, http.MethodGet, "/api/feedback/"+org.String(), nil).Must(t, http.StatusNotFound)
	s.Client().Get("/login").Must(t, http.StatusOK)

	s.Client().Get("/metrics").Must(t, http.StatusNotFound)
	if !strings.HasPrefix(s.MetricsURL, "http://127.0.0.1:") {
		t.Fatalf("metrics at %q, want a loopback address", s.MetricsURL)
	}
	body := get(t, s.MetricsURL+"/metrics", http.StatusOK)
	for _, want := range []string{
		`curate_http_requests_total{code="200",method="GET",route="/login"}`,
		`curate_http_requests_total{code="404",method="GET",route="/api/feedback/:id"}`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	for _, secret := range []string{org.String(), "initech", "scraper"} {
		if strings.Contains(body, secret) {
			t.Errorf("metrics name %q", secret)
		}
	}
	get(t, s.MetricsURL+"/", http.StatusNotFound)

	off := webtest.New(t, webtest.Options{Configure: func(c *config.Config) { c.MetricsAddr = "off" }})
	if off.MetricsURL != "" {
		t.Errorf("CURATE_METRICS_ADDR=off serves metrics at %s", off.MetricsURL)
	}
	off.Client().Get("/metrics").Must(t, http.StatusNotFound)
}

func get(t *testing.T, url string, status int) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %.300s", url, res.StatusCode, status, b)
	}
	return string(b)
}
