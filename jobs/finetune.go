package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// slotWait is how long a local job waits before trying again for a GPU
// slot when every slot has a trainer.
const slotWait = 30 * time.Second

// FineTuneWorker takes the job's steps one after another, storing each
// result before the next (finetune.Service.Advance), and snoozes while the
// provider works rather than sleeping. A retried attempt resumes from the
// stored steps.
type FineTuneWorker struct {
	river.WorkerDefaults[finetune.JobArgs]
	FineTune *finetune.Service
}

// Timeout leaves room for uploading a large training file.
func (w *FineTuneWorker) Timeout(*river.Job[finetune.JobArgs]) time.Duration { return 30 * time.Minute }

// Work advances the job until it ends or has to wait.
func (w *FineTuneWorker) Work(ctx context.Context, job *river.Job[finetune.JobArgs]) error {
	for {
		out, err := w.FineTune.Advance(ctx, job.Args.JobID)
		if errors.Is(err, local.ErrSlotsBusy) {
			// Another process's trainer holds the GPU: not a failure.
			return river.JobSnooze(slotWait)
		}
		if err != nil {
			if job.Attempt >= job.MaxAttempts || provider.IsPermanent(err) {
				// Out of retries: the job ends failed, with the reason.
				if ferr := w.FineTune.Fail(ctx, job.Args.JobID, err); ferr != nil {
					return ferr
				}
				return river.JobCancel(err)
			}
			return err
		}
		if out.Done {
			return nil
		}
		if out.Wait > 0 {
			return river.JobSnooze(out.Wait)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
