package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/judge"
)

// AgreementWorker runs the judge over human-rated feedback
// (judge.Service.AdvanceAgreement). Judgements are cached, so a retried
// attempt pays for none twice.
type AgreementWorker struct {
	river.WorkerDefaults[judge.AgreementArgs]
	Judge *judge.Service
}

// Timeout leaves room for thousands of items at a slow judge. It bounds a
// live run only: one whose worker died is retried within about a minute,
// when its heartbeat stops (see heartbeat.go).
func (w *AgreementWorker) Timeout(*river.Job[judge.AgreementArgs]) time.Duration { return time.Hour }

// Work advances the run; its last attempt's error fails it with the
// reason.
func (w *AgreementWorker) Work(ctx context.Context, job *river.Job[judge.AgreementArgs]) error {
	err := w.Judge.AdvanceAgreement(ctx, job.Args.ID)
	if err != nil && ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
		if ferr := w.Judge.FailAgreement(ctx, job.Args.ID, err); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	}
	return err
}
