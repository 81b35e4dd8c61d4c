package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/webhook"
	"github.com/curate/curate/jobs"
)

// loopback is an outbound client that may call the test servers, which
// listen on loopback addresses.
func loopback(t *testing.T) *outbound.Client {
	t.Helper()
	p, err := outbound.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return &outbound.Client{Policy: p}
}

// delivery is one request the webhook receiver got.
type delivery struct {
	header http.Header
	body   []byte
	at     time.Time
}

// The periodic evaluation against a real database: ten ratings averaging
// 3.2 and a safety report open two alerts, each delivered to the webhook
// with a valid Standard Webhooks signature (the first attempt is refused
// with a 503 and retried under the same id); once better ratings arrive and
// the report is reviewed, a second run resolves both and sends nothing more.
func TestAlertsJobOpensDeliversAndResolves(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []delivery
	refusedOnce := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, delivery{header: r.Header.Clone(), body: body, at: time.Now()})
		if !refusedOnce {
			refusedOnce = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", secrets.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	out := loopback(t)
	svc := alerts.New(pool, inserter, box, out, nil, nil)
	svc.Webhooks = &webhook.Sender{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, Outbound: out}
	settings := alerts.Defaults()
	settings.WebhookURL = srv.URL + "/hook"
	if err := svc.SaveSettings(ctx, audit.System, org.ID, settings); err != nil {
		t.Fatal(err)
	}
	secret, err := svc.RotateSecret(ctx, audit.System, org.ID)
	if err != nil {
		t.Fatal(err)
	}

	store := feedback.New(pool)
	// 3,3,3,3,3,3,3,3,4,4: sum 32, average 3.2.
	var items []feedback.Item
	for i, r := range []int{3, 3, 3, 3, 3, 3, 3, 3, 4, 4} {
		items = append(items, rated("m1", r, i))
	}
	safety := feedback.Item{Query: "How do I reset the alarm?", Response: "Cut the red wire.", FeedbackType: "thumbs_down",
		Model: "m1", Tags: []string{"safety"}}
	items = append(items, safety)
	res, err := store.IngestBatch(ctx, org.ID, "api", items)
	if err != nil || res.Inserted != 11 {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	safetyID := res.IDs[10]

	client, err := jobs.NewClient(pool, &app.Services{Heartbeats: jobq.NewHeartbeats(pool), Accounts: acc, Alerts: svc, Log: slog.New(slog.DiscardHandler)},
		jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck

	evaluate := func() {
		t.Helper()
		if _, err := client.Insert(ctx, jobs.AlertsEvaluateArgs{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// wait collects finished jobs until want of each kind completed.
	wait := func(want map[string]int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			done := true
			for _, n := range want {
				done = done && n <= 0
			}
			if done {
				return
			}
			select {
			case ev := <-events:
				if _, watched := want[ev.Job.Kind]; !watched {
					continue
				}
				if ev.Kind != river.EventKindJobCompleted {
					t.Fatalf("%s: %s %v", ev.Job.Kind, ev.Kind, ev.Job.Errors)
				}
				want[ev.Job.Kind]--
			case <-deadline:
				t.Fatalf("jobs still outstanding: %v", want)
			}
		}
	}

	evaluate()
	wait(map[string]int{"alert_evaluate": 1, "alert_deliver": 2})
	open, err := q.AlertListOpen(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]db.Alert{}
	for _, a := range open {
		keys[a.DedupKey] = a
	}
	low, safe := keys["low_rating:m1"], keys["safety"]
	if len(open) != 2 || low.ID == uuid.Nil || safe.ID == uuid.Nil {
		t.Fatalf("open alerts %v, want low_rating:m1 and safety", keys)
	}
	if low.Message != "average 3.20 over 10 ratings in the last 24 hours, below 3.50." || low.Severity != "warn" {
		t.Errorf("low-rating alert %q (%s)", low.Message, low.Severity)
	}

	mu.Lock()
	deliveries := append([]delivery(nil), got...)
	mu.Unlock()
	if len(deliveries) != 3 {
		t.Fatalf("%d requests, want 3 (one refused and retried, one accepted)", len(deliveries))
	}
	ids := map[string]int{}
	for _, d := range deliveries {
		if err := webhook.Verify(secret, d.header, d.body, d.at, webhook.DefaultTolerance); err != nil {
			t.Errorf("delivery %s: %v", d.header.Get("webhook-id"), err)
		}
		ids[d.header.Get("webhook-id")]++
		var p alerts.WebhookPayload
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != "alert.opened" || "alert_"+p.Data.ID.String() != d.header.Get("webhook-id") {
			t.Errorf("payload %+v under id %s", p, d.header.Get("webhook-id"))
		}
	}
	retried := ids["alert_"+low.ID.String()] + ids["alert_"+safe.ID.String()]
	if len(ids) != 2 || retried != 3 {
		t.Errorf("webhook ids %v, want the two alert ids, one of them twice", ids)
	}

	// A second run while the conditions hold opens nothing new.
	evaluate()
	wait(map[string]int{"alert_evaluate": 1})
	if again, _ := q.AlertListOpen(ctx, org.ID); len(again) != 2 || again[0].ID != open[0].ID {
		t.Fatalf("after a second run: %d open alerts", len(again))
	}

	// Ten 5-star ratings lift the average to (32+50)/20 = 4.1; the report
	// is reviewed.
	items = nil
	for i := range 10 {
		items = append(items, rated("m1", 5, 100+i))
	}
	if _, err := store.IngestBatch(ctx, org.ID, "api", items); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE feedback SET status = 'approved' WHERE id = $1", safetyID); err != nil {
		t.Fatal(err)
	}
	evaluate()
	wait(map[string]int{"alert_evaluate": 1})
	if still, _ := q.AlertListOpen(ctx, org.ID); len(still) != 0 {
		t.Fatalf("%d alerts still open", len(still))
	}
	for _, id := range []uuid.UUID{low.ID, safe.ID} {
		a, err := q.AlertGet(ctx, db.AlertGetParams{OrgID: org.ID, ID: id})
		if err != nil || a.ResolvedAt == nil || a.WebhookDeliveredAt == nil {
			t.Errorf("alert %s: resolved %v, delivered %v, err %v", a.DedupKey, a.ResolvedAt, a.WebhookDeliveredAt, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Errorf("%d requests after resolving, want still 3", len(got))
	}
}

func rated(model string, rating, n int) feedback.Item {
	return feedback.Item{Query: "question " + strconv.Itoa(n), Response: "answer " + strconv.Itoa(n), FeedbackType: "rating",
		Rating: &rating, Model: model}
}
