package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/web/webtest"
)

// alertForm is a valid alert settings form with the given webhook address.
func alertForm(webhookURL string) url.Values {
	return url.Values{"enabled": {"true"}, "rating_threshold": {"3.5"}, "min_ratings": {"10"}, "window_hours": {"24"},
		"baseline_days": {"7"}, "spike_factor": {"2"}, "spike_min_count": {"5"}, "webhook_url": {webhookURL}}
}

// refusedOnSave posts a Langfuse host and an alert webhook address and
// expects each refused beside its field with want, and nothing stored.
func refusedOnSave(t *testing.T, s *webtest.Server, admin *webtest.Client, org uuid.UUID, addr, want string) {
	t.Helper()
	page := admin.PostForm("/imports/langfuse", url.Values{"host": {addr}, "public_key": {langfusetest.DefaultPublicKey},
		"secret_key": {langfusetest.DefaultSecretKey}}).Must(t, http.StatusUnprocessableEntity).Body
	if msg := regexpFind(t, `id="err-host">([^<]*)<`, page); !strings.Contains(msg, want) {
		t.Errorf("Langfuse host %s: message %q, want %q", addr, msg, want)
	}
	page = admin.PostForm("/alerts/settings", alertForm(addr+"/hook")).Must(t, http.StatusUnprocessableEntity).Body
	if msg := regexpFind(t, `id="err-webhook_url">([^<]*)<`, page); !strings.Contains(msg, want) {
		t.Errorf("webhook %s: message %q, want %q", addr, msg, want)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM langfuse_connections WHERE org_id = $1)
		+ (SELECT count(*) FROM alert_settings WHERE org_id = $1)`, org).Scan(&n); err != nil || n != 0 {
		t.Errorf("after refusing %s: %d rows stored (%v)", addr, n, err)
	}
}

// With no CURATE_OUTBOUND_ALLOW, a Langfuse host or webhook on a loopback,
// private or other special-purpose address, by address or by a name
// resolving to one, is refused when it is saved, as is a host that is not
// a plain name or address; a link-local or metadata address always is.
func TestOutboundAddressesRefusedOnSave(t *testing.T) {
	s := webtest.New(t, webtest.Options{Configure: func(c *config.Config) { c.OutboundAllow = "" }})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.SignedIn("ada@acme.test")
	lf := langfusetest.NewServer(t, langfusetest.Options{})
	u, _ := url.Parse(lf.URL)
	const private = "private or loopback network"
	for _, addr := range []string{lf.URL, "http://localhost:" + u.Port(), "http://[::1]:" + u.Port(), "http://10.0.0.7:3000", "https://192.168.1.5"} {
		refusedOnSave(t, s, admin, org, addr, private)
	}
	for _, addr := range []string{"http://169.254.169.254", "http://[fe80::1]:8080"} {
		refusedOnSave(t, s, admin, org, addr, "link-local or cloud metadata")
	}
	// Special-purpose ranges, and IPv6 forms that lead to a loopback
	// IPv4 address (NAT64, 6to4, IPv4-compatible), are refused like it.
	for _, addr := range []string{"http://[64:ff9b::7f00:1]:" + u.Port(), "http://[2002:7f00:1::1]", "http://[::7f00:1]", "http://192.0.0.8",
		"http://[fec0::1]", "http://[2001::1]", "http://198.51.100.7"} {
		refusedOnSave(t, s, admin, org, addr, "special-purpose range")
	}
	// A host that is neither a plain name nor an address literal.
	for _, addr := range []string{"http://127.0.0.1%2509:" + u.Port(), "http://127.1:" + u.Port()} {
		refusedOnSave(t, s, admin, org, addr, "Curate does not call this address")
	}
	if n := lf.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("saving called the refused Langfuse %d times", n)
	}
}

// The operator allows localhost by name: it is saved, but a redirect from
// it to 127.0.0.1, which is not allowed, is followed neither by the
// Langfuse client nor by the webhook sender, and the pages say why. The
// metadata address stays refused.
func TestOutboundRedirectToARefusedAddress(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *config.Config) { c.OutboundAllow = "localhost" }})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.SignedIn("ada@acme.test")
	refusedOnSave(t, s, admin, org, "http://169.254.169.254", "link-local or cloud metadata")

	lf := langfusetest.NewServer(t, langfusetest.Options{})
	var mu sync.Mutex
	hooks := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hooks++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := lf.URL + r.URL.RequestURI()
		if r.Method == http.MethodPost {
			to = receiver.URL
		}
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	fu, _ := url.Parse(front.URL)
	host := "http://localhost:" + fu.Port()

	admin.PostForm("/imports/langfuse", url.Values{"host": {host}, "public_key": {lf.PublicKey}, "secret_key": {lf.SecretKey}}).Must(t, http.StatusSeeOther)
	page := admin.Get("/imports/langfuse").Must(t, http.StatusOK).Body
	if !strings.Contains(page, "Testing the connection failed: This address is on a private or loopback network") ||
		strings.Contains(page, "127.0.0.1") || strings.Contains(page, "dial tcp") {
		t.Errorf("the Langfuse page does not say the redirect was refused, or shows the address: %s", page)
	}
	if n := lf.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}

	admin.PostForm("/alerts/settings", alertForm(host+"/hook")).Must(t, http.StatusSeeOther)
	admin.PostForm("/alerts/settings/secret", nil).Must(t, http.StatusCreated)
	a := openAlert(t, s, org)
	errText := waitWebhookError(t, s, org, a)
	if !strings.Contains(errText, "private or loopback network") {
		t.Errorf("recorded %q", errText)
	}
	if page := admin.Get("/alerts").Must(t, http.StatusOK).Body; !strings.Contains(page, "The webhook delivery failed: This address is on a private or loopback network") {
		t.Errorf("the alerts page does not show why the delivery failed: %s", page)
	}
	mu.Lock()
	defer mu.Unlock()
	if hooks != 0 {
		t.Errorf("the redirect's target got %d deliveries", hooks)
	}
}

// A Langfuse and a webhook receiver that fail with 500 and a body: the
// pages show the status and what Curate was doing, never the body, which
// no table holds either (River's job records included).
func TestOutboundAnswersStayOffPagesAndRows(t *testing.T) {
	const marker = "REMOTE-BODY-MARKER-5e11"
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.SignedIn("ada@acme.test")

	lf := langfusetest.NewServer(t, langfusetest.Options{FailMessage: marker})
	lf.FailNext(langfusetest.EndpointProjects, http.StatusInternalServerError, 100)
	lf.FailNext(langfusetest.EndpointScoresV3, http.StatusInternalServerError, 100)
	admin.PostForm("/imports/langfuse", url.Values{"host": {lf.URL}, "public_key": {lf.PublicKey}, "secret_key": {lf.SecretKey}}).Must(t, http.StatusSeeOther)
	page := admin.Get("/imports/langfuse").Must(t, http.StatusOK).Body
	if !strings.Contains(page, "Testing the connection failed: The server answered 500 Internal Server Error.") {
		t.Errorf("the Langfuse page does not say what failed: %s", page)
	}
	admin.PostForm("/imports/langfuse/sync", nil).Must(t, http.StatusSeeOther)
	deadline := time.Now().Add(30 * time.Second)
	for {
		page = admin.Get("/imports/langfuse").Body
		if strings.Contains(page, "Reading scores failed: The server answered 500 Internal Server Error.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sync's failure never showed: %s", page)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(page, marker) {
		t.Error("the Langfuse page shows the remote body")
	}

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("<pre>" + marker + "</pre>"))
	}))
	defer receiver.Close()
	admin.PostForm("/alerts/settings", alertForm(receiver.URL+"/hook")).Must(t, http.StatusSeeOther)
	admin.PostForm("/alerts/settings/secret", nil).Must(t, http.StatusCreated)
	a := openAlert(t, s, org)
	if got := waitWebhookError(t, s, org, a); got != "The webhook delivery failed: The server answered 500 Internal Server Error." {
		t.Errorf("recorded %q", got)
	}
	alertsPage := admin.Get("/alerts").Must(t, http.StatusOK).Body
	if !strings.Contains(alertsPage, "The webhook delivery failed: The server answered 500 Internal Server Error.") || strings.Contains(alertsPage, marker) {
		t.Errorf("the alerts page does not say the delivery failed, or shows the remote body: %s", alertsPage)
	}
	// River records the failed job attempt before the row is checked.
	deadline = time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE kind = 'alert_deliver' AND errors IS NOT NULL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("River never recorded the failed delivery")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if found := pgtest.TablesContaining(t, s.Pool, marker); len(found) > 0 {
		t.Errorf("the remote body is stored in %v", found)
	}
}

// openAlert opens an alert as the evaluation would, and queues its delivery.
func openAlert(t *testing.T, s *webtest.Server, org uuid.UUID) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	a, err := db.New(s.Pool).AlertInsert(ctx, db.AlertInsertParams{OrgID: org, Kind: alerts.KindSafety, Severity: alerts.SeverityBad,
		DedupKey: "safety", Title: "Safety reports", Message: "1 safety report awaits review.", Details: []byte(`{"reports":1}`), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.River.Insert(ctx, alerts.WebhookArgs{OrgID: org, AlertID: a.ID}, nil); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// waitWebhookError waits for the alert's delivery to fail and returns why.
func waitWebhookError(t *testing.T, s *webtest.Server, org, id uuid.UUID) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := db.New(s.Pool).AlertGet(context.Background(), db.AlertGetParams{OrgID: org, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if a.WebhookError != "" {
			return a.WebhookError
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivery never failed")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
