package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/eval"
)

// EvaluateWorker carries an evaluation run out (eval.Service.Advance):
// each item is stored as it is scored, so a retried attempt resumes at the
// next item and never pays twice for one.
type EvaluateWorker struct {
	river.WorkerDefaults[eval.EvaluateArgs]
	Eval *eval.Service
}

// Timeout leaves room for a large golden set at a slow endpoint. It bounds
// a live run only: one whose worker died is retried within about a minute,
// when its heartbeat stops (see heartbeat.go), and goes on at its next
// unscored item.
func (w *EvaluateWorker) Timeout(*river.Job[eval.EvaluateArgs]) time.Duration { return time.Hour }

// Work advances the run; its last attempt's error fails it with the
// reason.
func (w *EvaluateWorker) Work(ctx context.Context, job *river.Job[eval.EvaluateArgs]) error {
	err := w.Eval.Advance(ctx, job.Args.RunID)
	if err != nil && ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
		if ferr := w.Eval.Fail(ctx, job.Args.RunID, err); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	}
	return err
}
