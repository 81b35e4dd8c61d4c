package alerts_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/curate/curate/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a database with two organisations and a curator in the first.
type fixture struct {
	pool       *pgxpool.Pool
	org, other uuid.UUID
	curator    audit.Actor
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	acc := accounts.New(pool)
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
	return fixture{pool: pool, org: org.ID, other: other.ID, curator: audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}}
}

// open stores an open alert as the evaluation would.
func (f fixture) open(t *testing.T, org uuid.UUID, key string, at time.Time) db.Alert {
	t.Helper()
	a, err := db.New(f.pool).AlertOpen(context.Background(), db.AlertOpenParams{OrgID: org, Kind: alerts.KindSafety, Severity: alerts.SeverityBad,
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
	svc := &alerts.Service{Pool: f.pool}
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
	svc := &alerts.Service{Pool: f.pool}
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
	svc := &alerts.Service{Pool: f.pool}
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
	svc := &alerts.Service{Pool: f.pool, Jobs: inserter}
	// An unreviewed item tagged safety is a safety report.
	report := feedback.Item{Query: "How do I reset the alarm?", Response: "Cut the red wire.", FeedbackType: "thumbs_down", Tags: []string{"safety"}}
	if _, _, err := (&feedback.Service{Pool: f.pool}).Ingest(ctx, f.org, "api", report); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Evaluate(ctx, f.org, time.Now())
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("evaluate: %+v, %v", res, err)
	}
	if _, err := svc.Evaluate(ctx, f.org, time.Now()); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(ctx, "SELECT args FROM river_job WHERE kind = 'alert_webhook'")
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
	svc := &alerts.Service{Pool: f.pool, Webhooks: &webhook.Sender{MaxAttempts: 1}}
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
	var status *webhook.StatusError
	if err := svc.Deliver(ctx, f.org, refused.ID); !errors.As(err, &status) || status.StatusCode != http.StatusGone {
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
