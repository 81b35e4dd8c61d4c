package jobs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/jobs"
)

// The sweep puts back in the queue the running long jobs whose heartbeat
// stopped (or never came) 30 seconds ago, and only those: a job beating,
// a short job, a job of a live attempt are left alone. A job out of
// attempts is discarded and its import run failed, its upload removed.
func TestHeartbeatSweep(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	log := slog.New(slog.DiscardHandler)
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := blobstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	imp := imports.New(pool, feedback.New(pool), pairs.New(pool), inserter, secretBox(t), bucket, nil, log)
	insert := func(args river.JobArgs) int64 {
		t.Helper()
		res, err := inserter.Insert(ctx, args, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	// running marks a job as an attempt's worker took it, started ago.
	running := func(id int64, attempt int, ago string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = $2, attempted_at = now() - $3::interval WHERE id = $1`, id, attempt, ago); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(id int64, attempt int, ago string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO job_heartbeats (job_id, attempt, beat_at) VALUES ($1, $2, now() - $3::interval)`, id, attempt, ago); err != nil {
			t.Fatal(err)
		}
	}

	neverBeat := insert(datasets.ExportArgs{ExportID: uuid.New()})
	running(neverBeat, 1, "2 minutes")
	stopped := insert(datasets.ExportArgs{ExportID: uuid.New()})
	running(stopped, 2, "10 minutes")
	beat(stopped, 2, "50 seconds")
	alive := insert(datasets.ExportArgs{ExportID: uuid.New()})
	running(alive, 1, "2 hours")
	beat(alive, 1, "5 seconds")
	starting := insert(datasets.ExportArgs{ExportID: uuid.New()})
	running(starting, 1, "2 seconds")
	// The row of an earlier, dead attempt does not vouch for this one.
	oldRow := insert(datasets.ExportArgs{ExportID: uuid.New()})
	running(oldRow, 2, "1 minute")
	beat(oldRow, 1, "1 second")
	short := insert(jobs.MaintenanceArgs{})
	running(short, 1, "2 minutes")
	// Evaluations and agreement runs beat too.
	evaluation := insert(eval.EvaluateArgs{RunID: uuid.New()})
	running(evaluation, 1, "40 seconds")
	agreement := insert(judge.AgreementArgs{ID: uuid.New()})
	running(agreement, 1, "2 hours")
	beat(agreement, 1, "31 seconds")
	// So do fine-tuning jobs (their status poll) and deployments (their
	// adapter load): before, they waited for River's rescue after their
	// 30- and 5-minute timeouts.
	fineTune := insert(finetune.JobArgs{JobID: uuid.New()})
	running(fineTune, 1, "3 minutes")
	beat(fineTune, 1, "40 seconds")
	deployment := insert(models.DeployArgs{DeploymentID: uuid.New()})
	running(deployment, 1, "1 minute")
	beat(deployment, 1, "35 seconds")

	// An import on its last attempt: given up.
	run, err := imp.Start(ctx, audit.System, imports.NewRun{OrgID: org.ID, Kind: imports.KindJSONL, FileName: "f.jsonl",
		Body: strings.NewReader(`{"query":"q","response":"r","feedback_type":"thumbs_up"}` + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	if err := pool.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = 'import_run'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	running(last, 5, "3 minutes")
	if _, err := pool.Exec(ctx, `UPDATE import_runs SET status = 'running' WHERE id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}

	services := &app.Services{Imports: imp, Datasets: datasets.New(pool, nil, nil, nil), Eval: eval.New(pool, eval.NewGates(pool), nil, nil),
		Judge: judge.New(pool, nil, nil, 0), FineTune: &finetune.Service{Pool: pool}, Models: models.New(pool, nil, nil, nil)}
	w := &jobs.HeartbeatSweepWorker{Heartbeats: jobq.NewHeartbeats(pool), Kinds: jobs.LongKinds(services), Log: log}
	if err := w.Work(ctx, &river.Job[jobs.HeartbeatSweepArgs]{JobRow: &rivertype.JobRow{}}); err != nil {
		t.Fatal(err)
	}

	for id, want := range map[int64]string{
		neverBeat: "available", stopped: "available", oldRow: "available", last: "discarded", evaluation: "available", agreement: "available",
		fineTune: "available", deployment: "available",
		alive: "running", starting: "running", short: "running",
	} {
		var state string
		var errs []json.RawMessage
		if err := pool.QueryRow(ctx, `SELECT state::text, coalesce(errors, '{}') FROM river_job WHERE id = $1`, id).Scan(&state, &errs); err != nil {
			t.Fatal(err)
		}
		if state != want {
			t.Errorf("job %d: %s, want %s", id, state, want)
			continue
		}
		if want == "running" {
			continue
		}
		var e rivertype.AttemptError
		if len(errs) != 1 || json.Unmarshal(errs[0], &e) != nil || !strings.Contains(e.Error, "stopped sending heartbeats") || e.At.IsZero() {
			t.Errorf("job %d: errors %s", id, errs)
		}
	}
	// The given-up attempts' rows are gone, the live one's stays.
	var rows []int64
	r, _ := pool.Query(ctx, `SELECT job_id FROM job_heartbeats ORDER BY job_id`)
	for r.Next() {
		var id int64
		_ = r.Scan(&id)
		rows = append(rows, id)
	}
	if len(rows) != 1 || rows[0] != alive {
		t.Errorf("heartbeat rows of jobs %v, want only %d", rows, alive)
	}

	got, err := imp.GetRun(ctx, org.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != imports.StatusFailed || !strings.Contains(got.Error, "stopped on its last attempt") {
		t.Errorf("given-up run: %s %q", got.Status, got.Error)
	}
	if kept, err := bucket.Exists(ctx, imports.UploadKey(org.ID, run.ID)); kept || err != nil {
		t.Errorf("the given-up run's upload is still there (%v)", err)
	}
}
