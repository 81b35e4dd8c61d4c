// Package app is Curate's composition root: it builds every domain service
// once, from the configuration and one database pool, for `serve`, `worker`
// and the CLI alike. Handlers and job workers receive these services; they
// never build their own.
package app

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/bestofn"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/compare"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/health"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/monitors"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/overview"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/retention"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/rlaif"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/internal/rubrics"
	"github.com/curate/curate/internal/scratch"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/shadow"
)

// Services are the domain services of one process, built once by New.
// Handlers and job workers hold these; a new service is added here, and
// in New, and nowhere else.
type Services struct {
	Config config.Config
	Log    *slog.Logger
	// Jobs inserts River jobs; services start their work through it.
	Jobs *river.Client[pgx.Tx]
	// Outbound makes every call to a server a user named (Langfuse, alert
	// webhooks, judge and chat endpoints, serving targets), under the
	// operator's CURATE_OUTBOUND_ALLOW.
	Outbound *outbound.Client
	// Scratch is this process's directory for files still being written
	// (<data dir>/tmp/...); Close it on exit.
	Scratch *scratch.Dir
	// Heartbeats keeps the long jobs' heartbeats and sweeps up the jobs
	// whose worker stopped beating.
	Heartbeats *jobq.Heartbeats

	Accounts *accounts.Service
	Feedback *feedback.Service
	Pairs    *pairs.Service
	Imports  *imports.Service
	Datasets *datasets.Service
	FineTune *finetune.Service

	Alerts        *alerts.Service
	FeedbackStats *feedbackstats.Service
	AuditLog      *audit.Service
	Health        *health.Service
	// Servers checks the keys servers must share and counts the live ones.
	Servers *servers.Service

	// Models is the model registry; Serving the targets versions are
	// deployed to.
	Models  *models.Service
	Serving *serving.Service
	// Eval evaluates models on golden sets and keeps the promotion gate.
	Eval *eval.Service
	// Compare sets two versions side by side.
	Compare *compare.Service
	// Reward keeps the reward formulas evaluations combine scores with.
	Reward *reward.Service
	// Endpoints are the OpenAI-compatible chat endpoints admins register;
	// Judge grades answers through one of them.
	Endpoints *endpoints.Service
	Judge     *judge.Service
	// BestOfN selects the best of several answers to a query.
	BestOfN *bestofn.Service
	// Experiments runs A/B experiments between model versions.
	Experiments *experiments.Service
	// Codebooks keeps the rules assistants retrieve at inference time.
	Codebooks *codebook.Service
	// Overview counts the start page's waiting work.
	Overview *overview.Service
	// RewardModels scores answers with served reward models, for
	// best-of-N, evaluations and experiments' live scoring.
	RewardModels *rewardmodel.Service
	// RLAIF scores a policy-training run's samples with the reward formula
	// (rules, the judge as the teacher, reward models), keeps them and
	// queues teacher-versus-rules conflicts.
	RLAIF *rlaif.Service
	// Review hands items to several reviewers, measures their agreement
	// and settles their disagreements.
	Review *review.Service
	// Rubrics are the questions a team asks of an item, versioned, and
	// the answers reviewers give them.
	Rubrics *rubrics.Service
	// LiveScore scores sampled live answers for experiments and aliases.
	LiveScore *livescore.Service
	// Monitors watch every served version; the alert rules' evaluation
	// opens an alert on a breach.
	Monitors *monitors.Service
	// Hygiene keeps spam, bots and floods out of training data; Routing
	// hands new items to curators; Loops run the loop by themselves.
	Hygiene *hygiene.Service
	Routing *routing.Service
	Loops   *loops.Service
	// Demo seeds dev mode's demo organisation through the services above.
	Demo *demo.Seeder
	// Shadows mirror a share of an alias's queries to a candidate version
	// and score both answers, with no user seeing the candidate's.
	Shadows *shadow.Service
	// Retention removes feedback past an organisation's retention and
	// keeps feedback's month partitions (the maintenance job runs it).
	Retention *retention.Service
}

// New builds the services on an open, migrated database, each once, in
// the order they need each other.
func New(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*Services, error) {
	inserter, err := jobq.New(pool)
	if err != nil {
		return nil, err
	}
	bucket, err := blobstore.Open(context.Background(), cfg.BlobURL, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// Opening scratch also clears what processes killed on this data
	// directory left there.
	tmp, err := scratch.Open(filepath.Join(cfg.DataDir, "tmp"))
	if err != nil {
		return nil, err
	}
	// One outbound client, under the operator's policy, for every call to a
	// server a user named.
	policy, err := outbound.ParsePolicy(cfg.OutboundAllow)
	if err != nil {
		return nil, err
	}
	out := &outbound.Client{Policy: policy}
	// One key seals every secret Curate stores: Langfuse secret keys,
	// webhook signing secrets, the API keys of endpoints and targets.
	key, err := cfg.Secret()
	if err != nil {
		return nil, err
	}
	box, err := secrets.New(key)
	if err != nil {
		return nil, err
	}

	fb := feedback.New(pool)
	ps := pairs.New(pool)
	ds := datasets.New(pool, inserter, bucket, tmp)
	// A provider target with no address of its own calls what the
	// server's OpenAI fine-tuning jobs made, with the server's key.
	srv := serving.New(pool, box, out, cfg.OpenAIAPIKey, cfg.OpenAIBaseURL)
	eps := endpoints.New(pool, box, out)
	jd := judge.New(pool, eps, inserter, pricing.Dollars(cfg.JudgeBudgetUSD))
	rw := reward.New(pool)
	// The registry asks the promotion gate before production moves; the
	// evaluations that the gate reads ask the registry's versions.
	gates := eval.NewGates(pool)
	reg := models.New(pool, inserter, srv, gates)
	rms := rewardmodel.New(pool, reg)
	exp := experiments.New(pool, reg)
	acc := accounts.New(pool, cfg.SessionTTL)
	svs := servers.New(pool)
	mon := monitors.New(pool)
	al := alerts.New(pool, inserter, box, out, mon, log)
	// The serving check opens an alert for a version missing from its
	// target, and resolving trusts only a check younger than its interval.
	reg.Alerts, reg.ServingPoll = al, cfg.ServingPoll
	// A local launch is taken when a live worker of the GPU queue can run
	// it.
	ft := finetune.New(pool, cfg, inserter, &datasets.FineTuneSource{Service: ds}, reg, svs, log)
	// A GRPO or PPO launch with RLAIF has its reward checked as it will score.
	rl := rlaif.New(pool, jd, eps, rw, rms)
	ft.RLAIF, rl.RedTeam = rl, ft
	ev := eval.New(pool, gates, inserter, eval.NewRuns(eps, jd, reg, rw, rms))
	rv := review.New(pool)
	hy := hygiene.New(pool)
	// A shadow asks its candidate and scores both answers as an
	// evaluation does; a loop's gate may read its result.
	shs := shadow.New(pool, inserter, ev)
	// A loop's steps call the services that own each piece of work.
	lp := loops.New(pool, inserter, loops.Services{Datasets: ds, Pairs: ps, FineTune: ft, Models: reg, Eval: ev, Experiments: exp, Review: rv,
		Shadows: shs},
		hy, al, cfg.LoopPoll, log)
	return &Services{
		Config: cfg, Log: log, Jobs: inserter, Outbound: out, Scratch: tmp, Heartbeats: jobq.NewHeartbeats(pool),

		Accounts: acc,
		Feedback: fb,
		Pairs:    ps,
		Imports:  imports.New(pool, fb, ps, inserter, box, bucket, out, log),
		Datasets: ds,
		FineTune: ft,

		Alerts:        al,
		FeedbackStats: feedbackstats.New(pool),
		AuditLog:      audit.New(pool),
		Health:        health.New(pool),
		Servers:       svs,

		Models:      reg,
		Serving:     srv,
		Eval:        ev,
		Compare:     compare.New(ev, reg, ft),
		Reward:      rw,
		Endpoints:   eps,
		Judge:       jd,
		BestOfN:     bestofn.New(pool, jd, eps, reg, rms),
		Experiments: exp,
		Codebooks:   codebook.New(pool, jd, inserter),
		// The start page recommends for running experiments as their
		// panels do.
		Overview:     overview.New(pool, exp),
		RewardModels: rms,
		RLAIF:        rl,
		Review:       rv,
		LiveScore:    livescore.New(pool, inserter, livescore.JudgeScorer{Judge: jd}, jd),
		Monitors:     mon,
		Hygiene:      hy,
		Routing:      routing.New(pool),
		Loops:        lp,
		Demo:         demo.New(pool, acc, fb, al, ds),
		Rubrics:      &rubrics.Service{Pool: pool, Judge: jd},
		Shadows:      shs,
		Retention:    retention.New(pool),
	}, nil
}
