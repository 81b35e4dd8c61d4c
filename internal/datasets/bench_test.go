package datasets_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/scratch"
)

// BenchmarkExport freezes a version of N preference pairs (CURATE_BENCH_ROWS,
// default 100000, loaded with COPY), computes its validation report once (as
// the job queued by the freeze does), and exports it as trl_preference JSON
// Lines with PII masking, the stored report read back first as the export
// job does, next to Postgres writing the same rows as JSON
// itself (COPY (SELECT json_build_object(...)) TO STDOUT), which bounds what
// any exporter reading from this database can do. It reports rows/s for
// both, the freeze time, the report's time (computing every item's facts,
// then again from the stored facts), the largest HeapInuse sampled
// during the export and the process's peak RSS (VmHWM) from the export's
// start. Run it alone:
//
//	go test -run '^$' -bench BenchmarkExport -benchtime 1x ./internal/datasets/
func BenchmarkExport(b *testing.B) {
	n := 100000
	if s := os.Getenv("CURATE_BENCH_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("CURATE_BENCH_ROWS=%q: want a positive number", s)
		}
	}
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "bench", "Bench")
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, 0, n)
	for i := range n {
		query := fmt.Sprintf("How do I check the deployment status of service %d in the staging cluster before the release window closes?", i)
		prompt, _ := json.Marshal([]export.Message{{Role: "user", Content: query}})
		chosen := fmt.Sprintf("Open Deployments > Status and filter by service %d. The panel lists every rollout with its health checks; "+
			"a green tick means all replicas passed. If a check failed, open the rollout to see the failing pod's logs, "+
			"and write to oncall-%d@example.com when it blocks the release. Rollbacks are one click from the same page.", i, i%97)
		rejected := fmt.Sprintf("Click the deployments tab for service %d and look around.", i)
		sum := sha256.Sum256([]byte(chosen + rejected))
		rows = append(rows, []any{org.ID, prompt, query, chosen, rejected, "manual", sum[:]})
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"preference_pairs"},
		[]string{"org_id", "prompt", "query", "chosen_response", "rejected_response", "method", "content_hash"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	rows = nil
	svc := datasets.New(pool, nil, nil, nil)
	d, err := svc.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeDPO, Settings: datasets.Settings{Name: "bench", ValidationPercent: 10, SplitSeed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO training_dataset_members (dataset_id, org_id, pair_id) SELECT $1, org_id, id FROM preference_pairs WHERE org_id = $2`, d.ID, org.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		b.Fatal(err)
	}
	// The tables at rest, as curated data is when someone freezes it: not
	// a million rows loaded a moment ago, with autovacuum about to start on
	// them in the middle of the freeze.
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) preference_pairs, training_dataset_members`); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	ver, err := svc.Freeze(ctx, audit.System, org.ID, d.ID)
	if err != nil {
		b.Fatal(err)
	}
	freeze := time.Since(t0)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE dataset_version_items"); err != nil {
		b.Fatal(err)
	}
	// The validation report is computed once per frozen version (a job
	// does it after the freeze) and read back by every export.
	t0 = time.Now()
	if _, err := svc.Report(ctx, org.ID, d.ID, datasets.ReportRequest{Format: string(export.TRLPreference), MaskPII: true}); err != nil {
		b.Fatal(err)
	}
	report := time.Since(t0)
	// The same report again without the stored whole report: every item's
	// facts read back, only the checks across items run.
	if _, err := pool.Exec(ctx, "DELETE FROM dataset_version_reports"); err != nil {
		b.Fatal(err)
	}
	t0 = time.Now()
	if _, err := svc.Report(ctx, org.ID, d.ID, datasets.ReportRequest{Format: string(export.TRLPreference), MaskPII: true}); err != nil {
		b.Fatal(err)
	}
	reportFromFacts := time.Since(t0)
	bucket, err := blobstore.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer bucket.Close()
	tmp, err := scratch.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer tmp.Close()

	// Postgres alone: the same rows, as TRL-shaped JSON, to nowhere.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	copySQL := fmt.Sprintf(`COPY (SELECT json_build_object(
		'prompt', (CASE WHEN content->>'system' <> '' THEN jsonb_build_array(jsonb_build_object('role', 'system', 'content', content->>'system')) ELSE '[]'::jsonb END) || (content->'prompt'),
		'chosen', json_build_array(json_build_object('role', 'assistant', 'content', content->>'chosen')),
		'rejected', json_build_array(json_build_object('role', 'assistant', 'content', content->>'rejected')))
		FROM dataset_version_items WHERE version_id = '%s' ORDER BY split, content_sha, source_id) TO STDOUT`, ver.ID)

	var exportSecs, copySecs float64
	var peakHeap, baseHeap uint64
	// What loading the rows and computing the report took is not the
	// export's: free it and start the peak resident set again from here.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap = ms.HeapInuse
	for b.Loop() {
		runtime.GC()
		var high atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var ms runtime.MemStats
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > high.Load() {
					high.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		// As the export job does: the preflight report (stored), then the
		// files.
		start := time.Now()
		rep, err := svc.Report(ctx, org.ID, d.ID, datasets.ReportRequest{Format: string(export.TRLPreference), MaskPII: true})
		if err != nil || rep.Examples != n {
			b.Fatalf("report: %v", err)
		}
		m, err := datasets.WriteFiles(ctx, pool, bucket, tmp, "bench/", ver, export.TRLPreference, true, nil)
		exportSecs += time.Since(start).Seconds()
		close(stop)
		<-sampled
		peakHeap = max(peakHeap, high.Load())
		if err != nil {
			b.Fatal(err)
		}
		if m.Counts["train"]+m.Counts["validation"] != n {
			b.Fatalf("exported %v rows, want %d", m.Counts, n)
		}

		start = time.Now()
		tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, copySQL)
		copySecs += time.Since(start).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		if tag.RowsAffected() != int64(n) {
			b.Fatalf("COPY wrote %d rows", tag.RowsAffected())
		}
	}
	conn.Release()
	iters := float64(b.N)
	b.ReportMetric(float64(n)*iters/exportSecs, "export_rows/s")
	b.ReportMetric(float64(n)*iters/copySecs, "pg_copy_json_rows/s")
	b.ReportMetric(100*copySecs/exportSecs, "export_%_of_copy")
	b.ReportMetric(freeze.Seconds(), "freeze_s")
	b.ReportMetric(report.Seconds(), "report_once_s")
	b.ReportMetric(reportFromFacts.Seconds(), "report_from_facts_s")
	b.ReportMetric(float64(baseHeap)/(1<<20), "heap_before_MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak_heap_inuse_MiB")
	b.ReportMetric(vmHWM()/(1<<10), "vmhwm_MiB")
	b.ReportMetric(float64(n), "rows")
}

// resetPeakRSS starts the process's peak resident set (VmHWM) again from
// its current size (Linux: 5 written to /proc/self/clear_refs).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// vmHWM is the process's peak resident set in KiB, from /proc/self/status
// (0 where there is none).
func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb
		}
	}
	return 0
}
