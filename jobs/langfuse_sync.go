package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/imports"
)

// LangfuseSyncEvery is how often every Langfuse connection is synced.
const LangfuseSyncEvery = 15 * time.Minute

// LangfuseSyncWorker syncs one organisation; see imports.Service.Sync.
type LangfuseSyncWorker struct {
	river.WorkerDefaults[imports.LangfuseSyncArgs]
	Imports *imports.Service
}

// Timeout allows for a first sync of a large project.
func (w *LangfuseSyncWorker) Timeout(*river.Job[imports.LangfuseSyncArgs]) time.Duration {
	return 30 * time.Minute
}

// Work syncs. A Langfuse-side failure is recorded on the connection, where
// the page shows it, and waits for the next periodic sync instead of
// retrying at once.
func (w *LangfuseSyncWorker) Work(ctx context.Context, job *river.Job[imports.LangfuseSyncArgs]) error {
	_, err := w.Imports.Sync(ctx, job.Args.OrgID)
	var se *imports.LangfuseError
	if errors.As(err, &se) || errors.Is(err, errs.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// LangfuseSyncAllArgs is the periodic job that queues a sync per connection.
type LangfuseSyncAllArgs struct{}

// Kind names the job in River's table.
func (LangfuseSyncAllArgs) Kind() string { return "langfuse_sync_all" }

// LangfuseSyncAllWorker queues a sync for every connection; see
// imports.Service.QueueSyncs.
type LangfuseSyncAllWorker struct {
	river.WorkerDefaults[LangfuseSyncAllArgs]
	Imports *imports.Service
}

// Work queues the syncs.
func (w *LangfuseSyncAllWorker) Work(ctx context.Context, job *river.Job[LangfuseSyncAllArgs]) error {
	return w.Imports.QueueSyncs(ctx)
}
