package imports

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/db"
)

// The jobs this service starts. Their workers live in package jobs and call
// back into the service (RunUpload, Sync).

// ImportArgs asks for an uploaded file to be imported (Start queues it).
type ImportArgs struct {
	OrgID uuid.UUID `json:"org_id"`
	RunID uuid.UUID `json:"run_id"`
}

// Kind names the job in River's table.
func (ImportArgs) Kind() string { return "import_run" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (ImportArgs) KindAliases() []string { return []string{"import_file"} }

// InsertOpts: a failure other than bad input (the database going away) is
// worth a few more tries; each starts the file over.
func (ImportArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 5} }

// LangfuseSyncArgs asks for one organisation's Langfuse scores to be synced
// (RequestSync and QueueSyncs queue it).
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

// QueueSyncs queues a sync of every organisation with a Langfuse
// connection, for the periodic job; one whose sync is still waiting or
// running is left alone (LangfuseSyncArgs' unique options).
func (s *Service) QueueSyncs(ctx context.Context) error {
	orgs, err := s.Q.LangfuseConnectionListOrgIDs(ctx)
	if err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
		for _, org := range orgs {
			if _, err := s.Jobs.InsertTx(ctx, tx, LangfuseSyncArgs{OrgID: org}, nil); err != nil {
				return fmt.Errorf("queueing the Langfuse sync of %s: %w", org, err)
			}
		}
		return nil
	})
}
