package web_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// resultsFloor is the plain GROUP BY results are measured against: each
// unit's mean of the four metrics over its feedback in the phase and over
// its feedback in the 14 days before its first exposure (the CUPED
// covariate), summed per arm into the moments the statistics read.
const resultsFloor = `
WITH post AS (
    SELECT x.arm, x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency
    FROM experiment_exposures x JOIN feedback f ON f.org_id = $1 AND f.experiment_id = $2 AND f.end_user_id = x.unit_id
    WHERE x.experiment_id = $2 AND x.phase = $3 AND f.created_at >= $4
    GROUP BY x.arm, x.unit_id
), pre AS (
    SELECT x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency
    FROM experiment_exposures x JOIN feedback f ON f.org_id = $1 AND f.end_user_id = x.unit_id
        AND f.created_at >= x.first_seen - interval '14 days' AND f.created_at < x.first_seen
    WHERE x.experiment_id = $2 AND x.phase = $3
    GROUP BY x.unit_id
)
SELECT post.arm, count(post.thumbs), sum(post.thumbs), sum(post.thumbs * post.thumbs), sum(pre.thumbs), sum(pre.thumbs * post.thumbs),
       count(post.rating), sum(post.rating), sum(post.rating * post.rating), sum(pre.rating), sum(pre.rating * post.rating),
       count(post.corrected), sum(post.corrected), sum(post.corrected * post.corrected), sum(pre.corrected), sum(pre.corrected * post.corrected),
       count(post.latency), sum(post.latency), sum(post.latency * post.latency), sum(pre.latency), sum(pre.latency * post.latency)
FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id
GROUP BY post.arm ORDER BY post.arm`

// BenchmarkResults times GET /api/experiments/:key/results over
// CURATE_BENCH_RESULTS_ROWS feedback rows (default 200,000; the issue's
// scale is 10,000,000), sent by a tenth as many units over four metrics,
// nine in ten in the running phase and one in ten in the units' CUPED
// window before it, against the plain GROUP BY that computes the same
// per-unit sums (resultsFloor), the two taking turns. Run with
// -benchtime=Nx (N of each, at least 5). The first read, which makes the
// units' kept values from every answer, is timed apart (first_results_ms).
func BenchmarkResults(b *testing.B) {
	rows := 200_000
	if s := os.Getenv("CURATE_BENCH_RESULTS_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows < 1000 {
			b.Fatalf("CURATE_BENCH_RESULTS_ROWS=%q: give a number of rows, at least 1000", s)
		}
	}
	units := rows / 10
	s, key, expID := benchExperiment(b, "thumbs_up_rate", "avg_rating", "correction_rate", "latency")
	ctx := context.Background()
	var org uuid.UUID
	var phase int32
	var phaseStart time.Time
	// The phase began at the top of the hour, so its feedback falls in one
	// bucket of the timeline; each unit was first exposed in its first
	// minute.
	err := s.Pool.QueryRow(ctx, `UPDATE experiments SET phase_started_at = date_trunc('hour', now()) WHERE id = $1
		RETURNING org_id, phase, phase_started_at`, expID).Scan(&org, &phase, &phaseStart)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Pool.Exec(ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, $2, 'u-' || i, i % 2, $3::timestamptz + (i % 60) * interval '1 second', $3 FROM generate_series(0, $4 - 1) AS i`,
		expID, phase, phaseStart, units); err != nil {
		b.Fatal(err)
	}
	// The rows go in without feedback's secondary indexes, which are built
	// again after the load: the same table and indexes (built by a sort
	// rather than row by row), in a fraction of the time fifteen indexes
	// take row by row at 10M rows.
	rebuild := withoutIndexes(b, s.Pool, "feedback")
	// In slices, so that no one statement holds millions of rows.
	const slice = 500_000
	for from := 0; from < rows; from += slice {
		if _, err := s.Pool.Exec(ctx, `
			INSERT INTO feedback (org_id, experiment_id, end_user_id, query, response, model, feedback_type, rating, latency_ms,
			                      correction, source, content_hash, created_at)
			SELECT $1, CASE WHEN pre THEN NULL ELSE $2::uuid END, 'u-' || (i % $3),
			       'How do I configure feature ' || i || '?', 'Open Settings and enable item ' || (i % 977) || '.',
			       'support', (ARRAY['thumbs_up','thumbs_down','rating','correction']::feedback_type[])[1 + (i * 7) % 4],
			       1 + (i + (i % $3) % 2) % 5, 200 + (i * 13) % 900, CASE WHEN i % 17 = 0 THEN 'Better answer' ELSE '' END,
			       'api', sha256(i::text::bytea),
			       CASE WHEN pre THEN $4::timestamptz - (1 + i % 300) * interval '1 hour'
			            ELSE $4::timestamptz + interval '1 minute' + (now() - $4::timestamptz - interval '1 minute') * ((i % 997) / 997.0) END
			FROM generate_series($5::int, $6::int - 1) AS i, LATERAL (SELECT i % 10 = 9 AS pre) p`,
			org, expID, units, phaseStart, from, min(from+slice, rows)); err != nil {
			b.Fatal(err)
		}
	}
	rebuild()
	if _, err := s.Pool.Exec(ctx, "VACUUM (ANALYZE) feedback, experiment_exposures"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d feedback rows from %d units in %s", rows, units, time.Since(start).Round(time.Second))
	if os.Getenv("CURATE_BENCH_EXPLAIN") != "" {
		autoExplain(b, s.Pool)
	}

	client := &http.Client{Timeout: 10 * time.Minute}
	var res struct {
		Metrics []struct {
			Metric string `json:"metric"`
			Arms   []struct {
				N    int      `json:"n"`
				Mean *float64 `json:"mean"`
			} `json:"arms"`
		} `json:"metrics"`
	}
	get := func() {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/api/experiments/bench/results", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != http.StatusOK {
			b.Fatalf("results: status %d", r.StatusCode)
		}
		if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
			b.Fatal(err)
		}
	}
	// floor holds per arm the GROUP BY's five sums of each metric.
	var floor [2][20]float64
	group := func() {
		rs, err := s.Pool.Query(ctx, resultsFloor, org, expID, phase, phaseStart)
		if err != nil {
			b.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var arm int
			var v [20]*float64
			dest := []any{&arm}
			for i := range v {
				dest = append(dest, &v[i])
			}
			if err := rs.Scan(dest...); err != nil {
				b.Fatal(err)
			}
			for i, p := range v {
				if p != nil {
					floor[arm][i] = *p
				}
			}
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
	}
	// The first read makes the units' kept values (migration 00170), as
	// the first read of a phase does; it is reported apart. The rounds
	// after it fold in what changed (nothing here) and sum the values.
	t0 := time.Now()
	get()
	first := time.Since(t0)
	n := max(b.N, 5)
	b.ResetTimer()
	api, sql := timeAlternately(n, get, group)
	b.StopTimer()

	// Both computed the same thing: each metric's units and mean per arm.
	if len(res.Metrics) != 4 {
		b.Fatalf("results answered %d metrics, want 4", len(res.Metrics))
	}
	for _, m := range res.Metrics {
		k := slices.Index([]string{"thumbs_up_rate", "avg_rating", "correction_rate", "latency"}, m.Metric)
		if k < 0 {
			b.Fatalf("results answered the metric %q", m.Metric)
		}
		for arm := range 2 {
			got, units, sum := m.Arms[arm], floor[arm][5*k], floor[arm][5*k+1]
			if float64(got.N) != units || got.Mean == nil || math.Abs(*got.Mean-sum/units) > 1e-9*math.Max(1, math.Abs(sum/units)) {
				b.Fatalf("%s arm %d: results n=%d mean=%v, the GROUP BY n=%.0f mean=%v", m.Metric, arm, got.N, got.Mean, units, sum/units)
			}
		}
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(units), "units")
	b.ReportMetric(ms(median(api)), "results_ms")
	b.ReportMetric(ms(median(sql)), "groupby_ms")
	b.ReportMetric(float64(median(api))/float64(median(sql)), "results/groupby")
	b.ReportMetric(ms(first), "first_results_ms")
	b.Logf("first results (making the units' kept values) %v; results %v, GROUP BY %v", first, api, sql)
}

// withoutIndexes drops table's indexes that no constraint owns and returns
// what builds them again, each partition's part named as the migrations
// name it (partition_indexes_name). The builds go one at a time: two at
// once may pick the same name for a partition's part.
func withoutIndexes(b *testing.B, pool *pgxpool.Pool, table string) func() {
	b.Helper()
	ctx := context.Background()
	type index struct{ Name, Def string }
	rows, err := pool.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indrelid = $1::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`, table)
	if err != nil {
		b.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[index])
	if err != nil {
		b.Fatal(err)
	}
	for _, ix := range indexes {
		if _, err := pool.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix.Name}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		b.Helper()
		for _, ix := range indexes {
			if _, err := pool.Exec(ctx, "SET maintenance_work_mem = '256MB'; "+strings.Replace(ix.Def, " ON ONLY ", " ON ", 1)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `SELECT partition_indexes_name(c.oid::regclass::text, substr(c.relname, length($1) + 2))
			FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`, table); err != nil {
			b.Fatal(err)
		}
	}
}
