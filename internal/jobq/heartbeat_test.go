package jobq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/jobq"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// longArgs is a job of a kind that beats.
type longArgs struct {
	N int `json:"n"`
}

func (longArgs) Kind() string { return "jobq_test_long" }

type longWorker struct {
	river.WorkerDefaults[longArgs]
}

func (longWorker) Work(context.Context, *river.Job[longArgs]) error { return nil }

// riverSchema is the last of River's migrations that the sweep's query
// (JobUpdateStale) was checked against, with the columns of river_job it
// reads and writes.
const riverSchema = 8

var riverJobColumns = map[string]string{
	"id": "int8", "kind": "text", "args": "jsonb", "state": "river_job_state", "attempt": "int2", "max_attempts": "int2",
	"attempted_at": "timestamptz", "scheduled_at": "timestamptz", "finalized_at": "timestamptz", "errors": "_jsonb",
}

// The sweep rewrites River's own rows, so it is pinned to River's schema:
// the migrations River ships end where the sweep was checked, its columns
// are those the sweep writes, River reads each row the sweep wrote (the
// state, and the attempt's error in River's shape), and a River worker
// takes the job it queued again and finishes it.
func TestSweepOnRiversSchema(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if all := migrator.AllVersions(); all[len(all)-1].Version != riverSchema {
		t.Fatalf("River's migrations now end at version %d, not %d: check db/queries/jobs.sql (JobUpdateStale, JobHeartbeatDeleteOrphans) against River's river_job, then update riverSchema",
			all[len(all)-1].Version, riverSchema)
	}
	for col, typ := range riverJobColumns {
		var got string
		if err := pool.QueryRow(ctx, `SELECT udt_name FROM information_schema.columns WHERE table_name = 'river_job' AND column_name = $1`, col).Scan(&got); err != nil || got != typ {
			t.Errorf("river_job.%s is %q (%v), the sweep writes it as %s", col, got, err, typ)
		}
	}

	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(n, maxAttempts int) int64 {
		t.Helper()
		res, err := inserter.Insert(ctx, longArgs{N: n}, &river.InsertOpts{MaxAttempts: maxAttempts})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	// running marks a job as a worker's fetch does: running, attempt
	// counted, attempted ago.
	running := func(id int64, attempt int, ago time.Duration) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = $2, attempted_at = now() - make_interval(secs => $3)
			WHERE id = $1`, id, attempt, ago.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	beats := jobq.NewHeartbeats(pool)

	dead := insert(1, 5)
	running(dead, 1, time.Minute)
	last := insert(2, 2)
	running(last, 2, time.Minute)
	alive := insert(3, 5)
	running(alive, 1, time.Hour)
	if err := beats.Start(ctx, jobq.Attempt{JobID: alive, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if ok, err := beats.Beat(ctx, jobq.Attempt{JobID: alive, Attempt: 1}); !ok || err != nil {
		t.Fatalf("a live attempt's beat: %v, %v", ok, err)
	}
	// A row left by an attempt that ended is cleared by the sweep.
	if err := beats.Start(ctx, jobq.Attempt{JobID: 999999, Attempt: 1}); err != nil {
		t.Fatal(err)
	}

	const reason = "the worker stopped sending heartbeats"
	stale, err := beats.Sweep(ctx, []string{longArgs{}.Kind()}, 30*time.Second, reason)
	if err != nil {
		t.Fatal(err)
	}
	swept := map[int64]bool{}
	for _, s := range stale {
		if s.Kind != (longArgs{}).Kind() || !strings.Contains(string(s.Args), `"n"`) {
			t.Errorf("swept %+v", s)
		}
		swept[s.ID] = s.GivenUp
	}
	if len(swept) != 2 || swept[dead] || !swept[last] {
		t.Fatalf("swept %v: want job %d queued again and job %d given up", swept, dead, last)
	}
	var orphans int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM job_heartbeats WHERE job_id = 999999`).Scan(&orphans); err != nil || orphans != 0 {
		t.Errorf("an ended attempt's heartbeat row is left (%v)", err)
	}

	// River reads the rows as the sweep left them.
	for id, want := range map[int64]rivertype.JobState{dead: rivertype.JobStateAvailable, last: rivertype.JobStateDiscarded, alive: rivertype.JobStateRunning} {
		j, err := inserter.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != want {
			t.Errorf("job %d: %s, want %s", id, j.State, want)
			continue
		}
		if want == rivertype.JobStateRunning {
			if len(j.Errors) != 0 {
				t.Errorf("the live job got errors %+v", j.Errors)
			}
			continue
		}
		if len(j.Errors) != 1 || j.Errors[0].Error != reason || j.Errors[0].Attempt != j.Attempt || time.Since(j.Errors[0].At) > time.Minute {
			t.Errorf("job %d: errors %+v", id, j.Errors)
		}
		if given := j.FinalizedAt != nil; given != (want == rivertype.JobStateDiscarded) {
			t.Errorf("job %d: finalized at %v", id, j.FinalizedAt)
		}
	}

	// A River worker takes the job queued again and finishes it.
	workers := river.NewWorkers()
	river.AddWorker(workers, longWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}}, Workers: workers, FetchPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	select {
	case ev := <-events:
		if ev.Job.ID != dead || ev.Job.Attempt != 2 {
			t.Errorf("River finished job %d at attempt %d, want job %d at its second", ev.Job.ID, ev.Job.Attempt, dead)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("River did not work the job the sweep queued again")
	}
}
