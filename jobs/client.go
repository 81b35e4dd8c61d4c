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
	"github.com/curate/curate/internal/shadow"
)

// ShortJobLimit is the longest timeout of a job kind that does not beat:
// River's rescue takes such a job back this long after its attempt began.
const ShortJobLimit = time.Minute

// Options size the client.
type Options struct {
	// Workers is how many jobs run at once on the default queue; 0 makes an
	// insert-only client for a web-only process.
	Workers int
	// GPUSlots is how many local trainers may run at once: the workers of
	// the "gpu" queue (default 1), when Workers is not 0.
	GPUSlots int
}

// Registered is a job kind Register adds, with its worker's timeout for
// a job of that kind (0: River's default, a minute).
type Registered struct {
	Kind    string
	Timeout time.Duration
}

// registry adds workers to a River worker set and lists their kinds.
type registry struct {
	workers *river.Workers
	kinds   []Registered
}

func add[T river.JobArgs](r *registry, w river.Worker[T]) {
	river.AddWorker(r.workers, w)
	var zero T
	r.kinds = append(r.kinds, Registered{Kind: zero.Kind(), Timeout: w.Timeout(&river.Job[T]{JobRow: &rivertype.JobRow{}})})
}

// Register adds every worker to a River worker set. Workers hold the
// process's services (app.New builds them); a nil service leaves its
// workers out, for tests.
func Register(d *app.Services) *river.Workers { return register(d).workers }

// Kinds lists the job kinds Register adds for d's services.
func Kinds(d *app.Services) []Registered { return register(d).kinds }

func register(d *app.Services) *registry {
	w := &registry{workers: river.NewWorkers()}
	add(w, &MaintenanceWorker{Accounts: d.Accounts, Imports: d.Imports, Datasets: d.Datasets, Retention: d.Retention})
	add(w, &HeartbeatSweepWorker{Heartbeats: d.Heartbeats, Kinds: LongKinds(d), Log: d.Log})
	if d.Datasets != nil {
		add(w, &ExportWorker{Datasets: d.Datasets})
		add(w, &ReportWorker{Datasets: d.Datasets})
	}
	if d.Imports != nil {
		add(w, &ImportWorker{Imports: d.Imports})
		add(w, &LangfuseSyncWorker{Imports: d.Imports})
		add(w, &LangfuseSyncAllWorker{Imports: d.Imports})
	}
	if d.Alerts != nil {
		add(w, &AlertsEvaluateWorker{Alerts: d.Alerts, Log: d.Log})
		add(w, &AlertWebhookWorker{Alerts: d.Alerts})
	}
	if d.FineTune != nil {
		add(w, &FineTuneWorker{FineTune: d.FineTune})
	}
	if d.Models != nil {
		add(w, &DeployWorker{Models: d.Models})
		add(w, &UnloadWorker{Models: d.Models})
		add(w, &ServingCheckWorker{Models: d.Models})
	}
	if d.Eval != nil {
		add(w, &EvaluateWorker{Eval: d.Eval})
	}
	if d.Judge != nil {
		add(w, &AgreementWorker{Judge: d.Judge})
	}
	if d.Codebooks != nil && d.Codebooks.Judge != nil {
		add(w, &SuggestWorker{Codebooks: d.Codebooks})
	}
	if d.Experiments != nil {
		add(w, &RolloutWorker{Experiments: d.Experiments})
		add(w, &SumsWorker{Experiments: d.Experiments})
	}
	if d.LiveScore != nil {
		add(w, &LiveSampleWorker{LiveScore: d.LiveScore})
		add(w, &LiveScoreWorker{LiveScore: d.LiveScore})
	}
	if d.Loops != nil {
		add(w, &LoopStepWorker{Loops: d.Loops})
		add(w, &LoopTriggerWorker{Loops: d.Loops})
	}
	if d.Routing != nil {
		add(w, &RouteWorker{Routing: d.Routing})
	}
	if d.Hygiene != nil {
		add(w, &HygieneWorker{Hygiene: d.Hygiene})
	}
	if d.Shadows != nil {
		add(w, &ShadowSampleWorker{Shadows: d.Shadows})
		add(w, &ShadowRunWorker{Shadows: d.Shadows})
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
		// long and its own timeout has passed: the short jobs (at most a
		// minute's timeout, River's default) come back within 90 s of the
		// death (this, plus up to River's 30 s between rescues) instead of
		// River's default hour. Kinds with a long timeout are left alone
		// by this rescue until that timeout: they all beat and are
		// rescued by the heartbeat sweep instead (kinds_test.go holds
		// every kind to one or the other).
		RescueStuckJobsAfter: ShortJobLimit,
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
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(experiments.SumsEvery),
			func() (river.JobArgs, *river.InsertOpts) { return experiments.SumsArgs{}, nil }, nil))
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
	if opts.Workers > 0 && d.Shadows != nil {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(shadow.SampleEvery),
			func() (river.JobArgs, *river.InsertOpts) { return shadow.SampleArgs{}, nil }, nil))
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}
