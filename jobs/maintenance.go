package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/retention"
)

// MaintenanceArgs asks for the hourly clean-up of expired rows and
// abandoned uploads.
type MaintenanceArgs struct{}

// Kind names the job in River's table.
func (MaintenanceArgs) Kind() string { return "maintenance_run" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (MaintenanceArgs) KindAliases() []string { return []string{"maintenance"} }

// InsertOpts keeps at most one clean-up waiting at a time.
func (MaintenanceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: 10 * time.Minute}}
}

// MaintenanceWorker deletes sign-in failures past the lockout window,
// expired sessions, uploads that no import will read (see
// imports.Service.SweepUploads) and expired validation facts.
type MaintenanceWorker struct {
	river.WorkerDefaults[MaintenanceArgs]
	Accounts *accounts.Service
	// Imports, when set, has its abandoned uploads swept.
	Imports *imports.Service
	// Datasets, when set, has its expired validation facts dropped.
	Datasets *datasets.Service
	// Retention, when set, removes feedback past its organisation's
	// retention and keeps feedback's month partitions.
	Retention *retention.Service
}

// Work runs the clean-up; it is idempotent. Each part runs whatever the
// other's outcome.
func (w *MaintenanceWorker) Work(ctx context.Context, job *river.Job[MaintenanceArgs]) error {
	err := w.Accounts.Prune(ctx)
	if w.Imports != nil {
		_, serr := w.Imports.SweepUploads(ctx, time.Now().Add(-imports.UploadGrace))
		err = errors.Join(err, serr)
	}
	if w.Datasets != nil {
		_, perr := w.Datasets.PruneFacts(ctx, time.Now().Add(-datasets.FactsKeep))
		err = errors.Join(err, perr)
	}
	if w.Retention != nil {
		_, rerr := w.Retention.Run(ctx, time.Now())
		err = errors.Join(err, rerr)
	}
	return err
}
