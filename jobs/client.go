// Package jobs holds Curate's background work: one file per job kind (its
// args and worker) and the River client that runs them.
package jobs

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/finetune"
)

// Deps are what workers need: the process's services (a nil service
// leaves its workers out, for tests).
type Deps struct {
	*app.Services
}

// Options size the client.
type Options struct {
	// Workers is how many jobs run at once on the default queue; 0 makes an
	// insert-only client for a web-only process.
	Workers int
	// GPUSlots is how many local trainers may run at once: the workers of
	// the "gpu" queue (default 1), when Workers is not 0.
	GPUSlots int
}

// Register adds every worker to a River worker set.
func Register(d Deps) *river.Workers {
	w := river.NewWorkers()
	river.AddWorker(w, &MaintenanceWorker{Accounts: d.Accounts, Imports: d.Imports})
	if d.Datasets != nil {
		river.AddWorker(w, &ExportWorker{Datasets: d.Datasets})
	}
	if d.Imports != nil {
		river.AddWorker(w, &ImportWorker{Imports: d.Imports})
		river.AddWorker(w, &LangfuseSyncWorker{Imports: d.Imports})
		river.AddWorker(w, &LangfuseSyncAllWorker{Imports: d.Imports})
	}
	if d.Alerts != nil {
		river.AddWorker(w, &AlertsEvaluateWorker{Alerts: d.Alerts, Log: d.Log})
		river.AddWorker(w, &AlertWebhookWorker{Alerts: d.Alerts})
	}
	if d.FineTune != nil {
		river.AddWorker(w, &FineTuneWorker{FineTune: d.FineTune})
	}
	return w
}

// NewClient builds the River client for serve and worker.
func NewClient(d Deps, opts Options) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{
		Logger:  d.Log.With("component", "river"),
		Workers: Register(d),
	}
	if opts.Workers > 0 {
		cfg.Queues = map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: opts.Workers},
			finetune.QueueGPU:  {MaxWorkers: max(opts.GPUSlots, 1)},
		}
		cfg.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return MaintenanceArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		}
	}
	if opts.Workers > 0 && d.Alerts != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(5*time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return AlertsEvaluateArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.Imports != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(LangfuseSyncEvery),
			func() (river.JobArgs, *river.InsertOpts) { return LangfuseSyncAllArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	return river.NewClient(riverpgxv5.New(d.Pool), cfg)
}
