package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// An admin can resume any run that has not finished. A run whose job is
// queued, or running in a worker that beats, needs no resuming (409). A
// run whose worker stopped beating (killed) has its job put back in the
// queue at once, not a second one beside it; a run whose job was given up
// gets a new job. A run whose last attempt was given up is paused with the
// reason, and resumes like any paused one. A finished run is not resumed.
func TestResumeStalledRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	run, err := f.svc.Start(ctx, audit.System, f.org, f.config())
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	if err := f.pool.QueryRow(ctx, `SELECT river_job_id FROM evaluation_runs WHERE id = $1`, run.ID).Scan(&first); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	state := func() (status string, jobID int64, jobState string, jobs int) {
		t.Helper()
		if err := f.pool.QueryRow(ctx, `SELECT r.status::text, r.river_job_id, j.state::text,
			(SELECT count(*) FROM river_job WHERE kind = 'evaluation_run' AND args->>'run_id' = r.id::text)
			FROM evaluation_runs r JOIN river_job j ON j.id = r.river_job_id WHERE r.id = $1`, run.ID).Scan(&status, &jobID, &jobState, &jobs); err != nil {
			t.Fatal(err)
		}
		return
	}
	stalled := func() bool {
		t.Helper()
		r, err := f.svc.GetRun(ctx, f.org, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.svc.Stalled(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var conflict *errs.Conflict

	// Queued: its job carries it on.
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); !errors.As(err, &conflict) || stalled() {
		t.Errorf("resuming a queued run: %v", err)
	}
	// Running in a worker that beats.
	exec(`UPDATE evaluation_runs SET status = 'running' WHERE id = $1`, run.ID)
	exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '10 minutes' WHERE id = $1`, first)
	exec(`INSERT INTO job_heartbeats (job_id, attempt, beat_at) VALUES ($1, 1, now() - interval '3 seconds')`, first)
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); !errors.As(err, &conflict) || stalled() {
		t.Errorf("resuming a run whose worker beats: %v", err)
	}
	// The worker was killed 40 seconds ago: the same job goes back in the
	// queue.
	exec(`UPDATE job_heartbeats SET beat_at = now() - interval '40 seconds' WHERE job_id = $1`, first)
	if !stalled() {
		t.Error("a run whose worker stopped beating is not stalled")
	}
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); err != nil {
		t.Fatal(err)
	}
	if status, jobID, jobState, jobs := state(); status != "queued" || jobID != first || jobState != "available" || jobs != 1 {
		t.Errorf("after resuming a killed run: %s, job %d (%s), %d jobs; want queued under job %d, available, alone", status, jobID, jobState, jobs, first)
	}
	var recorded string
	if err := f.pool.QueryRow(ctx, `SELECT errors[1]->>'error' FROM river_job WHERE id = $1`, first).Scan(&recorded); err != nil || !strings.Contains(recorded, "heartbeats") {
		t.Errorf("the killed attempt's error: %q (%v)", recorded, err)
	}
	// The job was given up (discarded) while the run says running: a new
	// job.
	exec(`UPDATE evaluation_runs SET status = 'running' WHERE id = $1`, run.ID)
	exec(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = $1`, first)
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); err != nil {
		t.Fatal(err)
	}
	status, second, jobState, jobs := state()
	if status != "queued" || second == first || jobState != "available" || jobs != 2 {
		t.Errorf("after resuming a run whose job was given up: %s, job %d (%s), %d jobs", status, second, jobState, jobs)
	}
	// Given up by the sweep on its last attempt: paused with the reason.
	if err := f.svc.Abandon(ctx, run.ID, "Its worker stopped on the job's last attempt."); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.GetRun(ctx, f.org, run.ID)
	if err != nil || got.Status != "paused" || got.Summary.PausedReason != "Its worker stopped on the job's last attempt." || !stalled() {
		t.Errorf("abandoned: %s %q %v", got.Status, got.Summary.PausedReason, err)
	}
	// Resumed and carried out by a worker: it finishes, and a finished
	// run is not resumed.
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Advance(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "finished") || stalled() {
		t.Errorf("resuming a finished run: %v", err)
	}
	if err := f.svc.Abandon(ctx, run.ID, "late"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.svc.GetRun(ctx, f.org, run.ID); got.Status != "succeeded" {
		t.Errorf("a finished run was paused: %s", got.Status)
	}
	if err := f.svc.Resume(ctx, audit.System, f.org, run.ID); !errors.As(err, &conflict) {
		t.Errorf("resumed: %v", err)
	}
}
