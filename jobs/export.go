package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/datasets"
)

// ExportWorker writes an export's files to blob storage; datasets.Service
// inserts its job (datasets.ExportArgs) with the export's row.
type ExportWorker struct {
	river.WorkerDefaults[datasets.ExportArgs]
	Datasets *datasets.Service
}

// Timeout allows for large datasets; progress is recorded as rows go. It
// bounds a live export only: one whose worker died is retried within about
// a minute, when its heartbeat stops (see heartbeat.go).
func (w *ExportWorker) Timeout(*river.Job[datasets.ExportArgs]) time.Duration { return 2 * time.Hour }

// Work writes the files; a cancelled job returns the context's error.
func (w *ExportWorker) Work(ctx context.Context, job *river.Job[datasets.ExportArgs]) error {
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
