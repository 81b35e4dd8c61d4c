package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/web/webtest"
)

// BenchmarkQueuePage measures the queue page (50 rows) over
// CURATE_BENCH_ROWS feedback rows (default 1,000,000) for a typical filter
// (pending thumbs-down, newest first) and a few others, reporting its p95
// server time (and the client's round trip) next to the p95 of the raw list
// query it runs, in the same run. The counts per status load after the page
// and are not in its time.
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

	// Server time: measured inside the server, from before routing to the
	// last byte handed to the connection, so the benchmark's own client
	// (reading and scanning 50 KB of HTML) is not counted.
	var mu sync.Mutex
	var served []time.Duration
	s.App.Echo.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if c.Request().URL.Path == "/feedback" {
				mu.Lock()
				served = append(served, time.Since(start))
				mu.Unlock()
			}
			return err
		}
	})
	c := s.SignedIn("curator@bench.test")
	q := db.New(s.Pool)
	var mid keyset.Cursor
	if err := s.Pool.QueryRow(context.Background(),
		"SELECT created_at, id FROM feedback ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1", rows/2).Scan(&mid.At, &mid.ID); err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 200)
	b.ResetTimer()
	for _, bc := range []struct{ name, query string }{
		{"typical", "status=pending&type=thumbs_down"}, // the "typical filter"
		{"middle_page", "status=pending&cursor=" + mid.Encode(feedback.ListName)},
		{"search", "q=configure+team&status=pending"},
		{"tag_model", "tag=billing&model=support-v2"},
	} {
		values, _ := url.ParseQuery(bc.query)
		f, err := feedback.ParseFilter(values)
		if err != nil {
			b.Fatal(err)
		}
		cursor, _ := keyset.Parse(feedback.ListName, values.Get("cursor"))
		list := func() {
			if _, err := q.FeedbackList(context.Background(), f.ListParams(org, cursor, handlers.QueuePageSize+1)); err != nil {
				b.Fatal(err)
			}
		}
		get := func() {
			if res := c.Get("/feedback?" + bc.query); res.Status != http.StatusOK {
				b.Fatalf("queue page: %d", res.Status)
			}
		}
		for range 5 { // warm both paths
			get()
			list()
		}
		mu.Lock()
		served = served[:0]
		mu.Unlock()
		client, raw := timeAlternately(n, get, list)
		mu.Lock()
		page := append([]time.Duration(nil), served...)
		mu.Unlock()
		b.ReportMetric(ms(p95(page)), bc.name+"_server_p95_ms")
		b.ReportMetric(ms(p95(client)), bc.name+"_client_p95_ms")
		b.ReportMetric(ms(p95(raw)), bc.name+"_sql_p95_ms")
		b.ReportMetric(float64(p95(page))/float64(p95(raw)), bc.name+"_server/sql")
	}
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
	// Vacuumed as well as analysed: a table at rest, so autovacuum does not
	// start on the million new rows in the middle of the measurement.
	if _, err := s.Pool.Exec(context.Background(), "VACUUM (ANALYZE) feedback"); err != nil {
		b.Fatal(err)
	}
}

// timeAlternately times a and b n times each, one after the other, so
// whatever else the machine is doing (autovacuum, the other tests' work)
// weighs on both alike.
func timeAlternately(n int, a, b func()) (ta, tb []time.Duration) {
	ta, tb = make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		t := time.Now()
		a()
		ta[i] = time.Since(t)
		t = time.Now()
		b()
		tb[i] = time.Since(t)
	}
	return ta, tb
}

func p95(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*95/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// autoExplain has Postgres log the plan, with its timings and buffers, of
// every statement the benchmark's database runs for longer than 100 ms
// (auto_explain, in the server's log), from the pool's next connections
// on: CURATE_BENCH_EXPLAIN=1 shows where a benchmark's time goes.
func autoExplain(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	for _, set := range []string{"session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = '100ms'",
		"auto_explain.log_analyze = on", "auto_explain.log_buffers = on", "auto_explain.log_nested_statements = on"} {
		if _, err := pool.Exec(ctx, "DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET "+strings.ReplaceAll(set, "'", "''")+"', current_database()); END$$"); err != nil {
			b.Fatal(err)
		}
	}
	pool.Reset()
}
