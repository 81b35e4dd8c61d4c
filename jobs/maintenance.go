package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/accounts"
)

// MaintenanceArgs asks for the hourly clean-up of expired rows.
type MaintenanceArgs struct{}

// Kind names the job in River's table.
func (MaintenanceArgs) Kind() string { return "maintenance" }

// InsertOpts keeps at most one clean-up waiting at a time.
func (MaintenanceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: 10 * time.Minute}}
}

// MaintenanceWorker deletes sign-in failures past the lockout window and
// expired sessions.
type MaintenanceWorker struct {
	river.WorkerDefaults[MaintenanceArgs]
	Accounts *accounts.Service
}

// Work runs the clean-up; it is idempotent.
func (w *MaintenanceWorker) Work(ctx context.Context, job *river.Job[MaintenanceArgs]) error {
	return w.Accounts.Prune(ctx)
}
