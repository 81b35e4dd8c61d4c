package web_test

import (
	"context"
	"net/http"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// BenchmarkQueuePage measures the queue page (50 rows, a typical filter:
// pending thumbs-down, newest first) over CURATE_BENCH_ROWS feedback rows
// (default 1,000,000), against the raw list query it runs, in the same run.
func BenchmarkQueuePage(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("CURATE_BENCH_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	s := webtest.New(b, webtest.Options{})
	org := s.Org("bench")
	s.User(org, "curator@bench.test", "curator")
	start := time.Now()
	seedQueue(b, s, org, rows)
	b.Logf("seeded %d rows in %s", rows, time.Since(start).Round(time.Second))

	c := s.SignedIn("curator@bench.test")
	const path = "/feedback?status=pending&type=thumbs_down"
	f, _ := feedback.ParseFilter(map[string][]string{"status": {"pending"}, "type": {"thumbs_down"}})
	q := db.New(s.Pool)
	n := max(b.N, 200)
	// Warm both paths so neither pays for a cold cache.
	for range 5 {
		c.Get(path).Must(b, http.StatusOK)
		if _, err := q.FeedbackList(context.Background(), f.ListParams(org, nil, 51)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	page := timeEach(n, func() {
		if res := c.Get(path); res.Status != http.StatusOK {
			b.Fatalf("queue page: %d", res.Status)
		}
	})
	raw := timeEach(n, func() {
		if _, err := q.FeedbackList(context.Background(), f.ListParams(org, nil, 51)); err != nil {
			b.Fatal(err)
		}
	})
	b.StopTimer()
	b.ReportMetric(ms(p95(page)), "page_p95_ms")
	b.ReportMetric(ms(p95(raw)), "sql_p95_ms")
	b.ReportMetric(float64(p95(page))/float64(p95(raw)), "page/sql")
}

// seedQueue fills the feedback table with a realistic spread: five models,
// every type and status, 90 days of timestamps.
func seedQueue(b *testing.B, s *webtest.Server, org uuid.UUID, n int) {
	b.Helper()
	_, err := s.Pool.Exec(context.Background(), `
		INSERT INTO feedback (org_id, query, response, model, feedback_type, rating, dim_accuracy, status, source,
		                      content_hash, tags, created_at)
		SELECT $1,
		       'How do I configure feature ' || i || ' for my team?',
		       'Open Settings, choose Features, and enable item ' || (i % 977) || '. Then save.',
		       (ARRAY['support-v1','support-v2','support-v3','triage-v1','kb-v2'])[1 + i % 5],
		       (ARRAY['thumbs_up','thumbs_down','rating','correction','detailed']::feedback_type[])[1 + (i * 7) % 5],
		       1 + i % 5, 1 + (i * 3) % 5,
		       (ARRAY['pending','pending','pending','approved','rejected','needs_correction','corrected']::review_status[])[1 + (i * 11) % 7],
		       'api', sha256(i::text::bytea), ARRAY[(ARRAY['billing','login','export','safety'])[1 + i % 4]],
		       now() - (i % 7776000) * interval '1 second'
		FROM generate_series(1, $2) AS i`, org, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool.Exec(context.Background(), "ANALYZE feedback"); err != nil {
		b.Fatal(err)
	}
}

func timeEach(n int, fn func()) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		t := time.Now()
		fn()
		out[i] = time.Since(t)
	}
	return out
}

func p95(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*95/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
