package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/routing"
)

// LoopStepWorker takes one step of a loop's run (loops.Service.Advance):
// the step's result is stored before the next step's job is queued, and a
// step that waits (on training, a deployment, an evaluation, a rollout)
// snoozes instead of sleeping.
type LoopStepWorker struct {
	river.WorkerDefaults[loops.StepArgs]
	Loops *loops.Service
}

// Timeout leaves room for a large dataset's pairs and freeze.
func (w *LoopStepWorker) Timeout(*river.Job[loops.StepArgs]) time.Duration { return 30 * time.Minute }

// Work takes the step; its last attempt's error fails the run with the
// reason.
func (w *LoopStepWorker) Work(ctx context.Context, job *river.Job[loops.StepArgs]) error {
	wait, err := w.Loops.Advance(ctx, job.Args.RunID, job.Args.Step)
	if err != nil {
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			if ferr := w.Loops.Fail(ctx, job.Args.RunID, err); ferr != nil {
				return ferr
			}
			return river.JobCancel(err)
		}
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// LoopTriggerWorker starts the runs whose loops' triggers are met.
type LoopTriggerWorker struct {
	river.WorkerDefaults[loops.TriggerArgs]
	Loops *loops.Service
}

// Work looks at every active loop once.
func (w *LoopTriggerWorker) Work(ctx context.Context, _ *river.Job[loops.TriggerArgs]) error {
	return w.Loops.CheckTriggers(ctx)
}

// RouteArgs asks for one pass of every organisation's routing rules.
type RouteArgs struct{}

// Kind names the job in River's table.
func (RouteArgs) Kind() string { return "routing_rule_run" }

// InsertOpts: a failed pass is not retried, the next one comes soon.
func (RouteArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// RouteWorker runs the routing rules.
type RouteWorker struct {
	river.WorkerDefaults[RouteArgs]
	Routing *routing.Service
}

// Work routes once.
func (w *RouteWorker) Work(ctx context.Context, _ *river.Job[RouteArgs]) error {
	return w.Routing.RouteAll(ctx)
}

// HygieneArgs asks for one hygiene check of every organisation's recent
// feedback.
type HygieneArgs struct{}

// Kind names the job in River's table.
func (HygieneArgs) Kind() string { return "feedback_hygiene_check" }

// InsertOpts: a failed check is not retried, the next one comes soon.
func (HygieneArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// HygieneWorker flags spam, bots and floods in new feedback, so that
// datasets leave them out without waiting for a loop to collect.
type HygieneWorker struct {
	river.WorkerDefaults[HygieneArgs]
	Hygiene *hygiene.Service
}

// Work checks once.
func (w *HygieneWorker) Work(ctx context.Context, _ *river.Job[HygieneArgs]) error {
	return w.Hygiene.CheckAll(ctx, time.Now())
}
