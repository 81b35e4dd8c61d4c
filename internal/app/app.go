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
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/datasets"
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
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/internal/scratch"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/internal/serving"
)

// Services are the domain services of one process.
type Services struct {
	Config config.Config
	Pool   *pgxpool.Pool
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
	Models *models.Service
	// Eval evaluates models on golden sets.
	Eval    *eval.Service
	Serving *serving.Service
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
	// Review hands items to several reviewers, measures their agreement
	// and settles their disagreements.
	Review *review.Service
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
}

// New builds the services on an open, migrated database.
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
	fb := &feedback.Service{Pool: pool}
	ps := &pairs.Service{Pool: pool}
	imp, err := imports.New(cfg, pool, fb, ps, inserter, bucket, log)
	if err != nil {
		return nil, err
	}
	imp.Outbound = out
	ds := &datasets.Service{Pool: pool, Bucket: bucket, Scratch: tmp, Jobs: inserter}
	ft := finetune.FromConfig(pool, cfg)
	ft.Jobs = inserter
	ft.Log = log
	ft.SetDataSource(&datasets.FineTuneSource{Service: ds})
	srv := &serving.Service{Pool: pool, Secrets: imp.Secrets, Outbound: out, ProviderKey: cfg.OpenAIAPIKey, ProviderBaseURL: cfg.OpenAIBaseURL}
	eps := &endpoints.Service{Pool: pool, Secrets: imp.Secrets, Outbound: out}
	jd := &judge.Service{Pool: pool, Endpoints: eps, Jobs: inserter, DefaultBudget: pricing.Dollars(cfg.JudgeBudgetUSD)}
	ev := &eval.Service{Pool: pool, Jobs: inserter}
	reg := &models.Service{Pool: pool, Jobs: inserter, Serving: srv, Gate: ev}
	rw := &reward.Service{Pool: pool}
	rms := &rewardmodel.Service{Pool: pool, Models: reg}
	ev.Runner = &eval.Runs{Endpoints: eps, Judge: jd, Models: reg, Reward: rw, RewardModels: rms}
	ft.Registry = reg
	svs := &servers.Service{Pool: pool}
	ft.Workers = svs
	mon := &monitors.Service{Pool: pool}
	acc := accounts.New(pool)
	acc.SessionTTL = cfg.SessionTTL
	svc := &Services{
		Config: cfg, Pool: pool, Log: log, Jobs: inserter, Outbound: out, Scratch: tmp,
		Accounts: acc,
		Feedback: fb,
		Pairs:    ps,
		Imports:  imp,
		Datasets: ds,
		FineTune: ft,

		// The webhook secrets are sealed with the key of the Langfuse
		// secrets: one key for every secret Curate stores.
		Alerts:        &alerts.Service{Pool: pool, Jobs: inserter, Secrets: imp.Secrets, Outbound: out, Log: log, Monitors: mon},
		FeedbackStats: &feedbackstats.Service{Pool: pool},
		AuditLog:      &audit.Service{Pool: pool},
		Health:        &health.Service{Pool: pool},
		Servers:       svs,
		Models:        reg,
		Eval:          ev,
		Serving:       srv,
		Reward:        rw,
		Endpoints:     eps,
		Judge:         jd,
		BestOfN:       &bestofn.Service{Pool: pool, Judge: jd, Endpoints: eps, Models: reg, RewardModels: rms},
		Experiments:   &experiments.Service{Pool: pool, Models: reg},
		Codebooks:     &codebook.Service{Pool: pool, Judge: jd, Jobs: inserter},
		Overview:      &overview.Service{Pool: pool},
		RewardModels:  rms,
		Review:        &review.Service{Pool: pool},
		LiveScore:     &livescore.Service{Pool: pool, Jobs: inserter, Scorer: livescore.JudgeScorer{Judge: jd}, Judge: jd},
		Monitors:      mon,
	}
	// The start page recommends for running experiments as their panels do.
	svc.Overview.Experiments = svc.Experiments
	svc.Hygiene = &hygiene.Service{Pool: pool}
	svc.Routing = &routing.Service{Pool: pool}
	svc.Loops = &loops.Service{Pool: pool, Jobs: inserter, Hygiene: svc.Hygiene, Alerts: svc.Alerts, Poll: cfg.LoopPoll, Log: log,
		Services: loops.Services{Datasets: ds, Pairs: ps, FineTune: ft, Models: reg, Eval: ev, Experiments: svc.Experiments, Review: svc.Review}}
	return svc, nil
}
