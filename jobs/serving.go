package jobs

import (
	"cmp"
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
)

// ServingCheckArgs asks for one serving check: every vLLM target of every
// organisation is asked what it serves, and what something calls that a
// target stopped listing is reloaded (models.Service.CheckServing).
// NewClient queues it twice per CURATE_SERVING_POLL from the leader
// alone, so that no target's last check is older than the interval; the
// unique period keeps one check per half interval even when a new leader
// queues one early.
type ServingCheckArgs struct {
	// Every is the interval the check is queued at, for its unique
	// period and its timeout.
	Every time.Duration `json:"every"`
}

// Kind names the job in River's table.
func (ServingCheckArgs) Kind() string { return "serving_check" }

// InsertOpts: one check per half interval; a failed check is not retried,
// the next one comes soon.
func (a ServingCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: checkEvery(a.Every)}}
}

// checkEvery is how often the check is queued for a poll interval.
func checkEvery(poll time.Duration) time.Duration {
	return max(cmp.Or(poll, serving.DefaultPoll)/2, 500*time.Millisecond)
}

// ServingCheckWorker runs the check. It is short (each target is asked
// once, within a few seconds) and idempotent: a check killed midway is
// the next one's to finish, and a reload it started is a deployment with
// its own job.
type ServingCheckWorker struct {
	river.WorkerDefaults[ServingCheckArgs]
	Models *models.Service
}

// Timeout: a check outlives no interval.
func (w *ServingCheckWorker) Timeout(job *river.Job[ServingCheckArgs]) time.Duration {
	return min(max(cmp.Or(job.Args.Every, serving.DefaultPoll), 20*time.Second), time.Minute)
}

// Work checks once.
func (w *ServingCheckWorker) Work(ctx context.Context, job *river.Job[ServingCheckArgs]) error {
	return w.Models.CheckServing(ctx)
}
