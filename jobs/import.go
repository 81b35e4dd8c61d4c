package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/importer"
)

// ImportArgs asks for an uploaded file to be imported.
type ImportArgs struct {
	OrgID uuid.UUID `json:"org_id"`
	RunID uuid.UUID `json:"run_id"`
}

// Kind names the job in River's table.
func (ImportArgs) Kind() string { return "import_file" }

// InsertOpts: a failure other than bad input (the database going away) is
// worth a few more tries; each starts the file over.
func (ImportArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 5} }

// ImportWorker imports an uploaded file; see importer.Service.Run.
type ImportWorker struct {
	river.WorkerDefaults[ImportArgs]
	Imports *importer.Service
}

// Timeout allows for the largest upload, read twice.
func (w *ImportWorker) Timeout(*river.Job[ImportArgs]) time.Duration { return time.Hour }

// Work imports the file. A bad file fails the run for good: trying again
// would read the same bytes.
func (w *ImportWorker) Work(ctx context.Context, job *river.Job[ImportArgs]) error {
	_, err := w.Imports.RunUpload(ctx, job.Args.OrgID, job.Args.RunID)
	if importer.IsBadInput(err) || errors.Is(err, errs.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}
