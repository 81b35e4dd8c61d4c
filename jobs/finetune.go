package jobs

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
)

// FineTuneArgs drives one fine-tuning job at its provider to the end.
type FineTuneArgs struct {
	JobID uuid.UUID `json:"job_id"`
}

// Kind names the job in River's table.
func (FineTuneArgs) Kind() string { return "finetune" }

// InsertOpts keeps one worker per fine-tuning job.
func (a FineTuneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// FineTuneWorker takes the job's steps one after another, storing each
// result before the next (finetune.Service.Advance), and snoozes while the
// provider works rather than sleeping. A retried attempt resumes from the
// stored steps.
type FineTuneWorker struct {
	river.WorkerDefaults[FineTuneArgs]
	FineTune *finetune.Service
}

// Timeout leaves room for uploading a large training file.
func (w *FineTuneWorker) Timeout(*river.Job[FineTuneArgs]) time.Duration { return 30 * time.Minute }

// Work advances the job until it ends or has to wait.
func (w *FineTuneWorker) Work(ctx context.Context, job *river.Job[FineTuneArgs]) error {
	for {
		out, err := w.FineTune.Advance(ctx, job.Args.JobID)
		if err != nil {
			if job.Attempt >= job.MaxAttempts || provider.IsPermanent(err) {
				// Out of retries: the job ends failed, with the reason.
				if ferr := w.FineTune.Fail(ctx, job.Args.JobID, err.Error()); ferr != nil {
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
