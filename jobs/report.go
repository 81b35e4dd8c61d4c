package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/datasets"
)

// ReportWorker computes a newly frozen version's validation report once
// and stores it, so reports and exports of the version read it back.
type ReportWorker struct {
	river.WorkerDefaults[datasets.ReportArgs]
	Datasets *datasets.Service
}

// Timeout leaves room for a million items.
func (w *ReportWorker) Timeout(*river.Job[datasets.ReportArgs]) time.Duration {
	return 30 * time.Minute
}

// Work stores the report; a report already stored is left as it is.
func (w *ReportWorker) Work(ctx context.Context, job *river.Job[datasets.ReportArgs]) error {
	return w.Datasets.StoreReport(ctx, job.Args.VersionID)
}
