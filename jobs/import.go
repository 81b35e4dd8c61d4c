package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/imports"
)

// ImportWorker imports an uploaded file; see imports.Service.Run.
type ImportWorker struct {
	river.WorkerDefaults[imports.ImportArgs]
	Imports *imports.Service
}

// Timeout allows for the largest upload, read twice. It bounds a live
// import only: one whose worker died is retried within about a minute,
// when its heartbeat stops (see heartbeat.go).
func (w *ImportWorker) Timeout(*river.Job[imports.ImportArgs]) time.Duration { return time.Hour }

// Work imports the file. A bad file fails the run for good: trying again
// would read the same bytes. The last attempt's failure ends the run too,
// so the upload is deleted with it.
func (w *ImportWorker) Work(ctx context.Context, job *river.Job[imports.ImportArgs]) error {
	final := job.Attempt >= job.MaxAttempts
	_, err := w.Imports.RunUpload(ctx, job.Args.OrgID, job.Args.RunID, final)
	if imports.IsBadInput(err) || errors.Is(err, errs.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}
