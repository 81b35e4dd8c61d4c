// Package jobs holds Curate's background work: one file per job kind (its
// args and worker) and the River client that runs them.
package jobs

import (
	"cmp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/routing"
)

// Options size the client.
type Options struct {
	// Workers is how many jobs run at once on the default queue; 0 makes an
	// insert-only client for a web-only process.
	Workers int
	// GPUSlots is how many local trainers may run at once: the workers of
	// the "gpu" queue (default 1), when Workers is not 0.
	GPUSlots int
}

// Register adds every worker to a River worker set. Workers hold the
// process's services (app.New builds them); a nil service leaves its
// workers out, for tests.
func Register(d *app.Services) *river.Workers {
	w := river.NewWorkers()
	river.AddWorker(w, &MaintenanceWorker{Accounts: d.Accounts, Imports: d.Imports, Datasets: d.Datasets})
	river.AddWorker(w, &HeartbeatSweepWorker{Heartbeats: d.Heartbeats, Kinds: LongKinds(d), Log: d.Log})
	if d.Datasets != nil {
		river.AddWorker(w, &ExportWorker{Datasets: d.Datasets})
		river.AddWorker(w, &ReportWorker{Datasets: d.Datasets})
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
	if d.Models != nil {
		river.AddWorker(w, &DeployWorker{Models: d.Models})
		river.AddWorker(w, &UnloadWorker{Models: d.Models})
		river.AddWorker(w, &ServingCheckWorker{Models: d.Models})
	}
	if d.Eval != nil {
		river.AddWorker(w, &EvaluateWorker{Eval: d.Eval})
	}
	if d.Judge != nil {
		river.AddWorker(w, &AgreementWorker{Judge: d.Judge})
	}
	if d.Codebooks != nil && d.Codebooks.Judge != nil {
		river.AddWorker(w, &SuggestWorker{Codebooks: d.Codebooks})
	}
	if d.Experiments != nil {
		river.AddWorker(w, &RolloutWorker{Experiments: d.Experiments})
	}
	if d.LiveScore != nil {
		river.AddWorker(w, &LiveSampleWorker{LiveScore: d.LiveScore})
		river.AddWorker(w, &LiveScoreWorker{LiveScore: d.LiveScore})
	}
	if d.Loops != nil {
		river.AddWorker(w, &LoopStepWorker{Loops: d.Loops})
		river.AddWorker(w, &LoopTriggerWorker{Loops: d.Loops})
	}
	if d.Routing != nil {
		river.AddWorker(w, &RouteWorker{Routing: d.Routing})
	}
	if d.Hygiene != nil {
		river.AddWorker(w, &HygieneWorker{Hygiene: d.Hygiene})
	}
	return w
}

// NewClient builds the River client for serve and worker on pool's
// database.
func NewClient(pool *pgxpool.Pool, d *app.Services, opts Options) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{
		Logger:  d.Log.With("component", "river"),
		Workers: Register(d),
		// Long jobs beat while they run (see heartbeat.go).
		Middleware: []rivertype.Middleware{newHeartbeat(d.Heartbeats, LongKinds(d))},
		// A job whose worker died is retried once it has been running this
		// long and its own timeout has passed: the short jobs (a minute's
		// timeout, River's default) come back within about two minutes
		// instead of River's default hour. Kinds with a long timeout are
		// left alone by this rescue until that timeout: the long ones beat
		// and are rescued by the heartbeat sweep instead.
		RescueStuckJobsAfter: 90 * time.Second,
	}
	if opts.Workers > 0 {
		cfg.Queues = map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: opts.Workers},
			finetune.QueueGPU:  {MaxWorkers: max(opts.GPUSlots, 1)},
			QueueHeartbeat:     {MaxWorkers: 1},
		}
		cfg.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return MaintenanceArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(sweepEvery),
				func() (river.JobArgs, *river.InsertOpts) { return HeartbeatSweepArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		}
	}
	if opts.Workers > 0 && d.Alerts != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(5*time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return AlertsEvaluateArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.Models != nil {
		// Every target is asked what it serves twice per interval, so that
		// its last check is never older than the interval.
		poll := d.Config.ServingPoll
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(checkEvery(poll)),
			func() (river.JobArgs, *river.InsertOpts) { return ServingCheckArgs{Every: poll}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	if opts.Workers > 0 && d.Imports != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(LangfuseSyncEvery),
			func() (river.JobArgs, *river.InsertOpts) { return LangfuseSyncAllArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	if opts.Workers > 0 && d.Experiments != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(experiments.RolloutEvery),
			func() (river.JobArgs, *river.InsertOpts) { return experiments.RolloutArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.LiveScore != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(livescore.SampleEvery),
			func() (river.JobArgs, *river.InsertOpts) { return livescore.SampleArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.Loops != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(cmp.Or(d.Config.LoopCheckEvery, time.Minute)),
			func() (river.JobArgs, *river.InsertOpts) { return loops.TriggerArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.Routing != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(routing.RouteEvery),
			func() (river.JobArgs, *river.InsertOpts) { return RouteArgs{}, nil }, nil))
	}
	if opts.Workers > 0 && d.Hygiene != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(hygiene.CheckEvery),
			func() (river.JobArgs, *river.InsertOpts) { return HygieneArgs{}, nil }, nil))
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}
