package alerts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a database with two organisations and a curator in the first.
type fixture struct {
	pool       *pgxpool.Pool
	org, other uuid.UUID
	curator    audit.Actor
	box        *secrets.Box
}

// service is an alerts service with the key that seals webhook secrets,
// whose webhooks go out under the policy CURATE_OUTBOUND_ALLOW=allow, one
// try per delivery.
func (f fixture) service(t *testing.T, allow string) *alerts.Service {
	t.Helper()
	p, err := outbound.ParsePolicy(allow)
	if err != nil {
		t.Fatal(err)
	}
	out := &outbound.Client{Policy: p}
	svc := alerts.New(f.pool, nil, f.box, out, nil, nil)
	svc.Webhooks = &webhook.Sender{MaxAttempts: 1, Outbound: out}
	return svc
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := acc.EnsureOrg(ctx, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	u, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "cora@acme.test", Role: "curator", Password: "a long enough password"})
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", secrets.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	return fixture{pool: pool, org: org.ID, other: other.ID, curator: audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}, box: box}
}

// open stores an open alert as the evaluation would.
func (f fixture) open(t *testing.T, org uuid.UUID, key string, at time.Time) db.Alert {
	t.Helper()
	a, err := db.New(f.pool).AlertInsert(context.Background(), db.AlertInsertParams{OrgID: org, Kind: alerts.KindSafety, Severity: alerts.SeverityBad,
		DedupKey: key, Title: "Safety reports", Message: "1 safety report awaits review.", Details: []byte(`{"reports":1}`), Now: at})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f fixture) auditCount(t *testing.T, action string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = $1", action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Dismissing hides the banner, keeps the alert open, records who did it
// once, and knows nothing of another organisation's alerts.
func TestDismiss(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	svc := alerts.New(f.pool, nil, nil, nil, nil, nil)
	a := f.open(t, f.org, "safety", time.Now())
	theirs := f.open(t, f.other, "safety", time.Now())

	if b, err := svc.Banners(ctx, f.org); err != nil || len(b) != 1 || b[0].ID != a.ID {
		t.Fatalf("banners before dismissing: %v, %v", b, err)
	}
	if err := svc.Dismiss(ctx, f.curator, f.org, a.ID); err != nil {
		t.Fatal(err)
	}
	if b, err := svc.Banners(ctx, f.org); err != nil || len(b) != 0 {
		t.Errorf("banners after dismissing: %v, %v", b, err)
	}
	page, err := svc.List(ctx, f.org, nil, 10)
	if err != nil || len(page.Rows) != 1 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	if r := page.Rows[0]; r.DismissedByEmail != "cora@acme.test" || r.ResolvedAt != nil {
		t.Errorf("dismissed by %q, resolved %v; want cora and still open", r.DismissedByEmail, r.ResolvedAt)
	}
	// Again: nothing changes and nothing more is audited.
	if err := svc.Dismiss(ctx, f.curator, f.org, a.ID); err != nil {
		t.Errorf("dismissing twice: %v", err)
	}
	if n := f.auditCount(t, "alert.dismiss"); n != 1 {
		t.Errorf("%d alert.dismiss entries, want 1", n)
	}
	for _, id := range []uuid.UUID{theirs.ID, uuid.New()} {
		if err := svc.Dismiss(ctx, f.curator, f.org, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("dismissing %s: %v, want not found", id, err)
		}
	}
	if b, _ := svc.Banners(ctx, f.other); len(b) != 1 {
		t.Error("the other organisation's banner went away")
	}
}

// The list pages newest first with the keyset cursor, across alerts opened
// at the same instant, and shows only the organisation's own.
func TestListPages(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	svc := alerts.New(f.pool, nil, nil, nil, nil, nil)
	base := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	oldest := f.open(t, f.org, "k1", base)
	tie1 := f.open(t, f.org, "k2", base.Add(time.Hour))
	tie2 := f.open(t, f.org, "k3", base.Add(time.Hour))
	newest := f.open(t, f.org, "k4", base.Add(2*time.Hour))
	f.open(t, f.other, "k1", base.Add(3*time.Hour))

	// Equal times are ordered by id, descending.
	first, second := tie1, tie2
	if first.ID.String() < second.ID.String() {
		first, second = second, first
	}
	want := []uuid.UUID{newest.ID, first.ID, second.ID, oldest.ID}
	var got []uuid.UUID
	var cursor *keyset.Cursor
	for pages := 0; ; pages++ {
		if pages > 2 {
			t.Fatal("more pages than rows")
		}
		p, err := svc.List(ctx, f.org, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			got = append(got, r.ID)
		}
		if p.Next == nil {
			break
		}
		// Through the text the page links carry.
		if cursor, err = keyset.Parse(alerts.ListName, p.Next.Encode(alerts.ListName)); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
}

// Settings start at the defaults; invalid ones store nothing; valid ones
// are stored and audited; the secret is replaced, never read back.
func TestSettings(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	svc := f.service(t, "")
	admin := audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}

	got, hasSecret, err := svc.Settings(ctx, f.org)
	if err != nil || got != alerts.Defaults() || hasSecret {
		t.Fatalf("fresh settings %+v, secret %v, %v; want the defaults and no secret", got, hasSecret, err)
	}

	bad := alerts.Defaults()
	bad.RatingThreshold = 0.5
	bad.WebhookURL = "ftp://hooks.example.com"
	err = svc.SaveSettings(ctx, admin, f.org, bad)
	var invalid *errs.Invalid
	if !errors.As(err, &invalid) || invalid.ByField()["rating_threshold"] == "" || invalid.ByField()["webhook_url"] == "" {
		t.Fatalf("saving %+v: %v; want rating_threshold and webhook_url named", bad, err)
	}
	if got, _, _ := svc.Settings(ctx, f.org); got != alerts.Defaults() || f.auditCount(t, "alerts.settings") != 0 {
		t.Fatalf("refused settings changed something: %+v", got)
	}

	good := alerts.Defaults()
	good.RatingThreshold, good.Window, good.WebhookURL = 3.8, 12*time.Hour, "https://hooks.example.com/curate"
	if err := svc.SaveSettings(ctx, admin, f.org, good); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := svc.Settings(ctx, f.org); got != good {
		t.Errorf("stored %+v, want %+v", got, good)
	}
	if got, _, _ := svc.Settings(ctx, f.other); got != alerts.Defaults() {
		t.Errorf("the other organisation's settings changed: %+v", got)
	}
	var details string
	if err := f.pool.QueryRow(ctx, "SELECT details::text FROM audit_log WHERE action = 'alerts.settings' AND actor_label = $1", admin.Label).Scan(&details); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(details), &d); err != nil || d["window_hours"] != 12.0 || d["webhook_url"] != good.WebhookURL {
		t.Errorf("audit details %s", details)
	}

	s1, err := svc.RotateSecret(ctx, admin, f.org)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := svc.RotateSecret(ctx, admin, f.org)
	if err != nil || s1 == s2 {
		t.Fatalf("second secret %q (%v), first %q; want a new one", s2, err, s1)
	}
	got, hasSecret, err = svc.Settings(ctx, f.org)
	if err != nil || !hasSecret || got != good {
		t.Errorf("after rotating: %+v, secret %v, %v; want the same rules and a secret", got, hasSecret, err)
	}
	if n := f.auditCount(t, "alerts.webhook_secret"); n != 2 {
		t.Errorf("%d alerts.webhook_secret entries, want 2", n)
	}
	// The secret is stored sealed, like the Langfuse secret key.
	if found := pgtest.TablesContaining(t, f.pool, strings.TrimPrefix(s2, "whsec_")); len(found) > 0 {
		t.Errorf("the webhook secret is stored in the clear in %v", found)
	}
}

// An evaluation that opens an alert queues its delivery in the same
// transaction; a later one, while the condition holds, queues nothing.
func TestEvaluateQueuesDelivery(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	inserter, err := jobq.New(f.pool)
	if err != nil {
		t.Fatal(err)
	}
	svc := alerts.New(f.pool, inserter, nil, nil, nil, nil)
	// An unreviewed item tagged safety is a safety report.
	report := feedback.Item{Query: "How do I reset the alarm?", Response: "Cut the red wire.", FeedbackType: "thumbs_down", Tags: []string{"safety"}}
	if _, _, err := (feedback.New(f.pool)).Ingest(ctx, f.org, "api", report); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Evaluate(ctx, f.org, time.Now())
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("evaluate: %+v, %v", res, err)
	}
	if _, err := svc.Evaluate(ctx, f.org, time.Now()); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(ctx, "SELECT args FROM river_job WHERE kind = 'alert_deliver'")
	if err != nil {
		t.Fatal(err)
	}
	var queued []alerts.WebhookArgs
	for rows.Next() {
		var raw []byte
		var a alerts.WebhookArgs
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		queued = append(queued, a)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(queued) != 1 || queued[0].AlertID != res.Opened[0].ID || queued[0].OrgID != f.org {
		t.Errorf("queued %+v, want one delivery of alert %s", queued, res.Opened[0].ID)
	}
}

// receiver is a webhook endpoint that answers with a fixed status.
type receiver struct {
	status int
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rv.mu.Lock()
	rv.got, rv.bodies = append(rv.got, r), append(rv.bodies, body)
	status := rv.status
	rv.mu.Unlock()
	w.WriteHeader(status)
}

func (rv *receiver) answer(status int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.status = status
}

func (rv *receiver) count() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.got)
}

// A delivery is signed, carries the alert, is marked delivered and never
// sent twice; a refusal leaves it undelivered; a missing alert is not
// found; an organisation without a webhook is sent nothing.
func TestDeliver(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	rv := &receiver{status: http.StatusNoContent}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	svc := f.service(t, "127.0.0.0/8")
	settings := alerts.Defaults()
	settings.WebhookURL = srv.URL + "/hook"
	if err := svc.SaveSettings(ctx, audit.System, f.org, settings); err != nil {
		t.Fatal(err)
	}
	secret, err := svc.RotateSecret(ctx, audit.System, f.org)
	if err != nil {
		t.Fatal(err)
	}
	a := f.open(t, f.org, "safety", time.Now())

	if err := svc.Deliver(ctx, f.org, a.ID); err != nil {
		t.Fatal(err)
	}
	if rv.count() != 1 {
		t.Fatalf("%d requests, want 1", rv.count())
	}
	req, body := rv.got[0], rv.bodies[0]
	if err := webhook.Verify(secret, req.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
		t.Errorf("signature: %v", err)
	}
	var p alerts.WebhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "alert.opened" || p.Data.ID != a.ID || p.Data.Details["reports"] != 1.0 || req.Header.Get("webhook-id") != "alert_"+a.ID.String() {
		t.Errorf("payload %+v under id %s", p, req.Header.Get("webhook-id"))
	}
	stored, err := db.New(f.pool).AlertGet(ctx, db.AlertGetParams{OrgID: f.org, ID: a.ID})
	if err != nil || stored.WebhookDeliveredAt == nil {
		t.Fatalf("not marked delivered: %v", err)
	}
	if err := svc.Deliver(ctx, f.org, a.ID); err != nil || rv.count() != 1 {
		t.Errorf("delivering again: %v, %d requests; want nothing sent", err, rv.count())
	}

	rv.answer(http.StatusGone)
	refused := f.open(t, f.org, "low_rating:m1", time.Now())
	var status *outbound.StatusError
	if err := svc.Deliver(ctx, f.org, refused.ID); !errors.As(err, &status) || status.Status != http.StatusGone {
		t.Errorf("refused delivery: %v, want the receiver's 410", err)
	}
	if stored, _ := db.New(f.pool).AlertGet(ctx, db.AlertGetParams{OrgID: f.org, ID: refused.ID}); stored.WebhookDeliveredAt != nil {
		t.Error("a refused delivery is marked delivered")
	}

	if err := svc.Deliver(ctx, f.org, uuid.New()); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("missing alert: %v, want not found", err)
	}
	sent := rv.count()
	theirs := f.open(t, f.other, "safety", time.Now())
	if err := svc.Deliver(ctx, f.other, theirs.ID); err != nil || rv.count() != sent {
		t.Errorf("organisation without a webhook: %v, %d requests; want nothing sent", err, rv.count()-sent)
	}
}

// A webhook address on a loopback, private, link-local or metadata address
// is refused when saved, beside its field, with outbound's sentence;
// nothing is stored or audited. Link-local and metadata addresses stay
// refused when the operator allows loopback and private networks.
func TestSaveSettingsRefusesInternalAddresses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cases := []struct{ url, allow, want string }{
		{"http://127.0.0.1:9000/hook", "", "CURATE_OUTBOUND_ALLOW"},
		{"http://localhost:9000/hook", "", "CURATE_OUTBOUND_ALLOW"},
		{"http://[::1]:9000/hook", "", "CURATE_OUTBOUND_ALLOW"},
		{"http://10.20.30.40/hook", "", "CURATE_OUTBOUND_ALLOW"},
		{"https://172.16.0.9/hook", "127.0.0.0/8", "CURATE_OUTBOUND_ALLOW"},
		{"http://169.254.169.254/latest/meta-data/", "127.0.0.0/8,10.0.0.0/8", "link-local or cloud metadata"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "127.0.0.0/8,fc00::/7", "link-local or cloud metadata"},
	}
	for _, c := range cases {
		st := alerts.Defaults()
		st.WebhookURL = c.url
		err := f.service(t, c.allow).SaveSettings(ctx, audit.System, f.org, st)
		var invalid *errs.Invalid
		if !errors.As(err, &invalid) || !strings.Contains(invalid.ByField()["webhook_url"], c.want) {
			t.Errorf("saving %s under %q: %v; want a webhook_url error saying %q", c.url, c.allow, err, c.want)
		}
	}
	// Allowed by the operator, a loopback address is saved.
	st := alerts.Defaults()
	st.WebhookURL = "http://127.0.0.1:9000/hook"
	if err := f.service(t, "127.0.0.0/8").SaveSettings(ctx, audit.System, f.org, st); err != nil {
		t.Fatalf("an allowed address: %v", err)
	}
	if n := f.auditCount(t, "alerts.settings"); n != 1 {
		t.Errorf("%d alerts.settings entries, want the allowed one only", n)
	}
}

// A delivery that fails records outbound's sentence on the alert, where
// the alerts page shows it: never what the receiver answered, which is
// stored nowhere. A success clears it. Each delivery checks the address
// again: one refused since it was saved, or a redirect from an allowed
// host to a refused address, fails without reaching the receiver.
func TestDeliveryFailures(t *testing.T) {
	const marker = "REMOTE-BODY-MARKER-c0de"
	ctx := context.Background()
	f := newFixture(t)
	var mu sync.Mutex
	status, got := http.StatusInternalServerError, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got++
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "internal detail: "+marker)
	}))
	defer srv.Close()
	requests := func() int { mu.Lock(); defer mu.Unlock(); return got }
	svc := f.service(t, "127.0.0.0/8")
	st := alerts.Defaults()
	st.WebhookURL = srv.URL + "/hook"
	if err := svc.SaveSettings(ctx, audit.System, f.org, st); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RotateSecret(ctx, audit.System, f.org); err != nil {
		t.Fatal(err)
	}
	webhookError := func(id uuid.UUID) string {
		t.Helper()
		a, err := db.New(f.pool).AlertGet(ctx, db.AlertGetParams{OrgID: f.org, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return a.WebhookError
	}

	a := f.open(t, f.org, "safety", time.Now())
	err := svc.Deliver(ctx, f.org, a.ID)
	var fail *alerts.DeliveryError
	if !errors.As(err, &fail) || strings.Contains(err.Error(), marker) {
		t.Fatalf("Deliver = %v, want a DeliveryError without the answer's body", err)
	}
	if got := webhookError(a.ID); got != "The webhook delivery failed: The server answered 500 Internal Server Error." {
		t.Errorf("recorded %q", got)
	}
	if found := pgtest.TablesContaining(t, f.pool, marker); len(found) > 0 {
		t.Errorf("the receiver's answer is stored in %v", found)
	}

	// The operator no longer allows loopback: the saved address is refused.
	before := requests()
	strict := f.service(t, "")
	var refused *outbound.RefusedError
	if err := strict.Deliver(ctx, f.org, a.ID); !errors.As(err, &refused) {
		t.Fatalf("Deliver under a policy refusing loopback = %v", err)
	}
	if got := webhookError(a.ID); !strings.Contains(got, "CURATE_OUTBOUND_ALLOW") || strings.Contains(got, "127.0.0.1") {
		t.Errorf("recorded %q", got)
	}

	// Allowed by name, the host redirects to an address that is not.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/hook", http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	fu, _ := url.Parse(front.URL)
	byName := f.service(t, "localhost")
	st.WebhookURL = "http://localhost:" + fu.Port() + "/hook"
	if err := byName.SaveSettings(ctx, audit.System, f.org, st); err != nil {
		t.Fatal(err)
	}
	if err := byName.Deliver(ctx, f.org, a.ID); !errors.As(err, &refused) {
		t.Fatalf("Deliver through a redirect to a refused address = %v", err)
	}
	if requests() != before {
		t.Errorf("refused deliveries reached the receiver %d times", requests()-before)
	}

	// Delivered at last: the error is cleared.
	mu.Lock()
	status = http.StatusNoContent
	mu.Unlock()
	st.WebhookURL = srv.URL + "/hook"
	if err := svc.SaveSettings(ctx, audit.System, f.org, st); err != nil {
		t.Fatal(err)
	}
	if err := svc.Deliver(ctx, f.org, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := webhookError(a.ID); got != "" {
		t.Errorf("after a delivery the alert still records %q", got)
	}
}

// A secret stored in the clear before the secrets were sealed is sealed
// the first time it is read, by the periodic evaluation or by the settings
// page, and keeps signing deliveries: receivers need no new secret. A
// sealed secret copied to another organisation's row does not open.
func TestPlaintextSecretIsSealedOnFirstRead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var mu sync.Mutex
	var signed error = errors.New("no delivery")
	old, otherOld := webhook.NewSecret(), webhook.NewSecret()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		signed = webhook.Verify(old, r.Header, body, time.Now(), webhook.DefaultTolerance)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	// Rows as they were before migration 00014.
	for org, secret := range map[uuid.UUID]string{f.org: old, f.other: otherOld} {
		if _, err := f.pool.Exec(ctx, "INSERT INTO alert_settings (org_id, webhook_url, webhook_secret) VALUES ($1, $2, $3)",
			org, srv.URL+"/hook", secret); err != nil {
			t.Fatal(err)
		}
	}
	svc := f.service(t, "127.0.0.0/8")
	if _, err := svc.EvaluateAll(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{old, otherOld} {
		if found := pgtest.TablesContaining(t, f.pool, strings.TrimPrefix(secret, "whsec_")); len(found) > 0 {
			t.Errorf("after the first evaluation a secret is still in the clear in %v", found)
		}
	}
	var sealed int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM alert_settings WHERE webhook_secret = '' AND webhook_secret_ciphertext IS NOT NULL").Scan(&sealed); err != nil || sealed != 2 {
		t.Fatalf("%d sealed rows (%v), want 2", sealed, err)
	}
	if _, has, err := svc.Settings(ctx, f.org); err != nil || !has {
		t.Errorf("Settings: secret %v, %v; want one", has, err)
	}
	a := f.open(t, f.org, "safety", time.Now())
	if err := svc.Deliver(ctx, f.org, a.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if signed != nil {
		t.Errorf("the delivery is not signed with the old secret: %v", signed)
	}
	mu.Unlock()

	// The settings page reads first: it seals too.
	if _, err := f.pool.Exec(ctx, "UPDATE alert_settings SET webhook_secret = $2, webhook_secret_ciphertext = NULL, webhook_secret_nonce = NULL WHERE org_id = $1", f.other, otherOld); err != nil {
		t.Fatal(err)
	}
	if _, has, err := svc.Settings(ctx, f.other); err != nil || !has {
		t.Fatalf("Settings: secret %v, %v; want one", has, err)
	}
	if found := pgtest.TablesContaining(t, f.pool, strings.TrimPrefix(otherOld, "whsec_")); len(found) > 0 {
		t.Errorf("after the settings page a secret is still in the clear in %v", found)
	}

	// One organisation's sealed secret does not open as another's.
	if _, err := f.pool.Exec(ctx, `UPDATE alert_settings o SET webhook_secret_ciphertext = a.webhook_secret_ciphertext,
		webhook_secret_nonce = a.webhook_secret_nonce FROM alert_settings a WHERE o.org_id = $1 AND a.org_id = $2`, f.other, f.org); err != nil {
		t.Fatal(err)
	}
	theirs := f.open(t, f.other, "safety", time.Now())
	if err := svc.Deliver(ctx, f.other, theirs.ID); !errors.Is(err, secrets.ErrDecrypt) {
		t.Errorf("delivering with a secret copied from another organisation: %v, want it not to open", err)
	}
}

// Low ratings are one alert per registered version, named as registered:
// feedback naming the two adapters one version was served under, and its
// model id, is one alert for "assist 1.0.0"; a model Curate does not know
// keeps its own name.
func TestLowRatingsByVersion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var version uuid.UUID
	if err := f.pool.QueryRow(ctx, `WITH m AS (INSERT INTO registered_models (org_id, name) VALUES ($1, 'assist') RETURNING id)
		INSERT INTO model_versions (org_id, registered_model_id, version, kind, model_id)
		SELECT $1, m.id, '1.0.0', 'lora', '/adapters/assist-1.0.0' FROM m RETURNING id`, f.org).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO deployments (org_id, registered_model_id, version_id, alias, action, status, served_name)
		SELECT $1, registered_model_id, id, alias, 'deploy', 'succeeded', name FROM model_versions,
		(VALUES ('candidate', 'assist-1.0.0-545e043d'), ('production', 'assist-1.0.0-779206ae')) AS d (alias, name) WHERE id = $2`, f.org, version); err != nil {
		t.Fatal(err)
	}
	var items []feedback.Item
	for i, model := range []string{"assist-1.0.0-545e043d", "assist-1.0.0-779206ae", "/adapters/assist-1.0.0", "legacy-bot"} {
		for j := range 10 {
			items = append(items, feedback.Item{Query: fmt.Sprintf("Question %d.%d?", i, j), Response: "No.", FeedbackType: "rating",
				Rating: ptrInt(2), Model: model})
		}
	}
	if _, err := feedback.New(f.pool).IngestBatch(ctx, f.org, "api", items); err != nil {
		t.Fatal(err)
	}
	res, err := alerts.New(f.pool, nil, nil, nil, nil, nil).Evaluate(ctx, f.org, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, a := range res.Opened {
		if a.Kind == alerts.KindLowRating {
			titles = append(titles, a.Title+" ("+a.DedupKey+")")
		}
	}
	slices.Sort(titles)
	want := []string{"Low ratings for assist 1.0.0 (low_rating:version:" + version.String() + ")", "Low ratings for legacy-bot (low_rating:legacy-bot)"}
	if !slices.Equal(titles, want) {
		t.Errorf("low-rating alerts %q, want %q", titles, want)
	}
	for _, a := range res.Opened {
		if a.DedupKey == "low_rating:version:"+version.String() && !strings.Contains(a.Message, "over 30 ratings") {
			t.Errorf("the version's alert counts %q, want its three names' 30 ratings", a.Message)
		}
	}
}

func ptrInt(n int) *int { return &n }
