package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// FineTuneArgs drives one fine-tuning job at its provider to the end.
type FineTuneArgs struct {
	JobID uuid.UUID `json:"job_id"`
	// Local puts the worker on the GPU queue: a job trained on this
	// machine waits there for a slot rather than holding a default worker.
	Local bool `json:"local,omitempty"`
}

// QueueGPU is the queue of local training jobs; it has one worker per GPU
// slot.
const QueueGPU = "gpu"

// slotWait is how long a local job waits before trying again for a GPU
// slot when every slot has a trainer.
const slotWait = 30 * time.Second

// Kind names the job in River's table.
func (FineTuneArgs) Kind() string { return "finetune" }

// InsertOpts keeps one worker per fine-tuning job.
func (a FineTuneArgs) InsertOpts() river.InsertOpts {
	opts := river.InsertOpts{MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
	if a.Local {
		opts.Queue = QueueGPU
	}
	return opts
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
		if errors.Is(err, local.ErrSlotsBusy) {
			// Another process's trainer holds the GPU: not a failure.
			return river.JobSnooze(slotWait)
		}
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
