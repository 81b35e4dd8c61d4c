package jobs_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/jobs"
)

// feedbackScans is how many sequential scans feedback's partitions (the
// DEFAULT one included) have had, and how many rows they read.
func feedbackScans(t *testing.T, pool *pgxpool.Pool) (scans, rows int64) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(s.seq_scan), 0)::bigint, coalesce(sum(s.seq_tup_read), 0)::bigint
		FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid
		WHERE i.inhparent = 'feedback'::regclass`).Scan(&scans, &rows); err != nil {
		t.Fatal(err)
	}
	return scans, rows
}

// envInt is the environment's integer name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// An idle server, its periodic jobs running (maintenance with retention,
// rollout, live-score sampling, loops, routing, serving checks; alerts
// and hygiene, due every 5 and 10 minutes, run once at its start), reads no
// feedback row by a sequential scan. The organisation has
// CURATE_IDLE_ROWS rows (20,000 here; the README gives the figure for
// 1,000,000), a running experiment and a live scorer on it, and keeps its
// feedback for 400 days; the idle period is CURATE_IDLE_SECONDS (20 s
// here, 120 s for the figure). A sequential scan of an empty partition
// reads no row and is reported, not counted as a failure.
func TestIdleServerReadsNoFeedbackSequentially(t *testing.T) {
	ctx := context.Background()
	rows, idle := envInt("CURATE_IDLE_ROWS", 20000), time.Duration(envInt("CURATE_IDLE_SECONDS", 20))*time.Second
	pool := pgtest.NewDB(t)
	org, model, exp, scorer := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	for _, s := range []string{
		`INSERT INTO organizations (id, slug, name, retention_days) VALUES ($1, 'idle', 'Idle', 400)`,
		`INSERT INTO registered_models (id, org_id, name) VALUES ($2, $1, 'support')`,
		`INSERT INTO model_versions (org_id, registered_model_id, version, kind, model_id)
		 VALUES ($1, $2, '1.0.0', 'full', 'm-1'), ($1, $2, '1.1.0', 'full', 'm-2')`,
		`INSERT INTO experiments (id, org_id, key, name, registered_model_id, seed, status, started_at, metrics)
		 VALUES ($3, $1, 'idle', 'Idle', $2, 'idle', 'running', now() - interval '30 days', '{thumbs_up,rating}')`,
		`INSERT INTO experiment_arms (experiment_id, idx, name, model_version_id, weight)
		 SELECT $3, row_number() OVER (ORDER BY version) - 1, version, id, 0.5 FROM model_versions WHERE org_id = $1`,
		// Most of it this month and the last, the rest over the year.
		`INSERT INTO feedback (org_id, query, response, model, feedback_type, rating, status, source, content_hash,
		                       end_user_id, session_id, experiment_id, experiment_arm, created_at)
		 SELECT $1, 'How do I configure feature ' || i || '?', 'Open Settings and choose ' || i || '.', 'm-' || (1 + i % 2),
		        'rating', 1 + i % 5, (ARRAY['pending','approved','rejected']::review_status[])[1 + i % 3], 'api', sha256(i::text::bytea),
		        'u' || (i % 5000), 's' || (i / 20), CASE WHEN i % 100 = 0 THEN $3::uuid END,
		        CASE WHEN i % 100 = 0 THEN (ARRAY['1.0.0','1.1.0'])[1 + i % 2] ELSE '' END,
		        CASE WHEN i % 10 = 0 THEN now() - (i % 365) * interval '1 day' ELSE now() - (i % 40) * interval '1 day' - interval '1 minute' END
		 FROM generate_series(1, $5::int) AS i`,
		`INSERT INTO live_scorers (id, org_id, experiment_id, endpoint, rate, cursor_at) VALUES ($4, $1, $3, 'http://scorer.invalid', 0.01, now() - interval '1 hour')`,
	} {
		// Each statement is given the arguments it names, in a CTE that
		// types them all.
		sql := `WITH args AS (SELECT $1::uuid AS a1, $2::uuid AS a2, $3::uuid AS a3, $4::uuid AS a4, $5::int AS a5) ` + s
		if _, err := pool.Exec(ctx, sql, org, model, exp, scorer, rows); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// The maintenance splits the months the load put in DEFAULT; then the
	// tables are at rest, as a server's are after a while.
	cfg := config.Defaults()
	cfg.DataDir, cfg.SessionKey, cfg.SecretKey = t.TempDir(), "idle-session-key-0123456789abcdef0123", "idle-secret-key-0123456789abcdef01234"
	svc, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Scratch.Close() //nolint:errcheck
	if _, err := pool.Exec(ctx, `ANALYZE; SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Retention.Run(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE feedback`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // other backends' statistics reach the views
	scans0, read0 := feedbackScans(t, pool)

	client, err := jobs.NewClient(pool, svc, jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The alerts' and hygiene's periodic jobs come every 5 and 10 minutes,
	// after the two minutes: they run once at the window's start.
	for _, args := range []river.JobArgs{jobs.AlertsEvaluateArgs{}, jobs.HygieneArgs{}} {
		if _, err := client.Insert(ctx, args, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(idle)
	stop, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Stop(stop); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	scans1, read1 := feedbackScans(t, pool)
	var done int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&done); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d feedback rows, idle %s, %d jobs completed: %d sequential scans of feedback partitions, %d rows read by them",
		rows, idle, done, scans1-scans0, read1-read0)
	if read1 > read0 {
		t.Errorf("the idle server read %d feedback rows by %d sequential scans in %s", read1-read0, scans1-scans0, idle)
	}
	if done == 0 {
		t.Error("no periodic job completed")
	}
	// The counters see a sequential scan when there is one.
	if _, err := pool.Exec(ctx, `SET enable_indexscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM feedback WHERE comment = 'none'; SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, read2 := feedbackScans(t, pool); read2-read1 < int64(rows) {
		t.Errorf("a sequential scan of feedback read %d rows by the counters, want %d", read2-read1, rows)
	}
}
