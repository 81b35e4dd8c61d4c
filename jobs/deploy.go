package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/models"
)

// DeployWorker carries a deployment out (models.Service.Advance): each
// step's result is stored before the next, so a retried attempt resumes
// where the killed one stopped and never loads a version twice.
type DeployWorker struct {
	river.WorkerDefaults[models.DeployArgs]
	Models *models.Service
}

// Timeout leaves room for the target's retries with backoff.
func (w *DeployWorker) Timeout(*river.Job[models.DeployArgs]) time.Duration { return 5 * time.Minute }

// Work advances the deployment; a refusal, or the last attempt's error,
// ends it failed with the reason, the alias where it was.
func (w *DeployWorker) Work(ctx context.Context, job *river.Job[models.DeployArgs]) error {
	err := w.Models.Advance(ctx, job.Args.DeploymentID)
	if err == nil {
		return nil
	}
	if job.Attempt >= job.MaxAttempts || models.Permanent(err) {
		if ferr := w.Models.Fail(ctx, job.Args.DeploymentID, err); ferr != nil {
			return ferr
		}
		return river.JobCancel(err)
	}
	return err
}

// UnloadWorker unloads what a deployment loaded once its alias has moved
// on (or the experiment calling it ended) and the grace period is over;
// a deployment something still uses is left loaded.
type UnloadWorker struct {
	river.WorkerDefaults[models.UnloadArgs]
	Models *models.Service
}

// Work unloads the adapter; an answer that may change is retried.
func (w *UnloadWorker) Work(ctx context.Context, job *river.Job[models.UnloadArgs]) error {
	err := w.Models.Unload(ctx, job.Args.DeploymentID)
	if err != nil && models.Permanent(err) {
		return river.JobCancel(err)
	}
	return err
}
