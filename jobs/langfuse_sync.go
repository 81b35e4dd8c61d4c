package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/importer"
)

// LangfuseSyncEvery is how often every Langfuse connection is synced.
const LangfuseSyncEvery = 15 * time.Minute

// LangfuseSyncArgs asks for one organisation's Langfuse scores to be synced.
type LangfuseSyncArgs struct {
	OrgID uuid.UUID `json:"org_id"`
}

// Kind names the job in River's table.
func (LangfuseSyncArgs) Kind() string { return "langfuse_sync" }

// InsertOpts keeps one sync per organisation waiting or running at a time,
// so "Sync now" during the periodic sync does not run a second one.
func (LangfuseSyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// LangfuseSyncWorker syncs one organisation; see importer.Service.Sync.
type LangfuseSyncWorker struct {
	river.WorkerDefaults[LangfuseSyncArgs]
	Imports *importer.Service
}

// Timeout allows for a first sync of a large project.
func (w *LangfuseSyncWorker) Timeout(*river.Job[LangfuseSyncArgs]) time.Duration {
	return 30 * time.Minute
}

// Work syncs. A Langfuse-side failure is recorded on the connection, where
// the page shows it, and waits for the next periodic sync instead of
// retrying at once.
func (w *LangfuseSyncWorker) Work(ctx context.Context, job *river.Job[LangfuseSyncArgs]) error {
	_, err := w.Imports.Sync(ctx, job.Args.OrgID)
	var se *importer.SyncError
	if errors.As(err, &se) || errors.Is(err, errs.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// LangfuseSyncAllArgs is the periodic job that queues a sync per connection.
type LangfuseSyncAllArgs struct{}

// Kind names the job in River's table.
func (LangfuseSyncAllArgs) Kind() string { return "langfuse_sync_all" }

// LangfuseSyncAllWorker queues LangfuseSyncArgs for every connection.
type LangfuseSyncAllWorker struct {
	river.WorkerDefaults[LangfuseSyncAllArgs]
	Imports *importer.Service
}

// Work queues the syncs; an organisation whose sync is still waiting or
// running is skipped by the unique options.
func (w *LangfuseSyncAllWorker) Work(ctx context.Context, job *river.Job[LangfuseSyncAllArgs]) error {
	orgs, err := w.Imports.ConnectedOrgs(ctx)
	if err != nil {
		return err
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	for _, org := range orgs {
		if _, err := client.Insert(ctx, LangfuseSyncArgs{OrgID: org}, nil); err != nil {
			return fmt.Errorf("queueing the Langfuse sync of %s: %w", org, err)
		}
	}
	return nil
}
