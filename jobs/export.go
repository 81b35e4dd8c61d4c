package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/datasets"
)

// ExportArgs asks for one recorded dataset export to be written.
type ExportArgs struct {
	ExportID uuid.UUID `json:"export_id"`
}

// Kind names the job in River's table.
func (ExportArgs) Kind() string { return "dataset_export" }

// InsertOpts: a failed write is retried a few times; each try starts the
// files afresh, so a retry never leaves a mix of two tries.
func (ExportArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3}
}

// ExportWorker writes an export's files to blob storage.
type ExportWorker struct {
	river.WorkerDefaults[ExportArgs]
	Datasets *datasets.Service
}

// Timeout allows for large datasets; progress is recorded as rows go.
func (w *ExportWorker) Timeout(*river.Job[ExportArgs]) time.Duration { return 2 * time.Hour }

// Work writes the files; a cancelled job returns the context's error.
func (w *ExportWorker) Work(ctx context.Context, job *river.Job[ExportArgs]) error {
	err := w.Datasets.RunExport(ctx, job.Args.ExportID)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, datasets.ErrBlocked):
		return river.JobCancel(err) // retrying cannot fix the data
	}
	return err
}
