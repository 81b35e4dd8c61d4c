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
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/health"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/scratch"
)

// Services are the domain services of one process.
type Services struct {
	Config config.Config
	Pool   *pgxpool.Pool
	Log    *slog.Logger
	// Jobs inserts River jobs; services start their work through it.
	Jobs *river.Client[pgx.Tx]
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
	fb := &feedback.Service{Pool: pool}
	ps := &pairs.Service{Pool: pool}
	imp, err := imports.New(cfg, pool, fb, ps, inserter, log)
	if err != nil {
		return nil, err
	}
	ds := &datasets.Service{Pool: pool, Bucket: bucket, Scratch: tmp, Jobs: inserter}
	ft := finetune.FromConfig(pool, cfg)
	ft.Jobs = inserter
	ft.SetDataSource(&datasets.FineTuneSource{Service: ds})
	return &Services{
		Config: cfg, Pool: pool, Log: log, Jobs: inserter, Scratch: tmp,
		Accounts: accounts.New(pool),
		Feedback: fb,
		Pairs:    ps,
		Imports:  imp,
		Datasets: ds,
		FineTune: ft,

		Alerts:        &alerts.Service{Pool: pool, Jobs: inserter},
		FeedbackStats: &feedbackstats.Service{Pool: pool},
		AuditLog:      &audit.Service{Pool: pool},
		Health:        &health.Service{Pool: pool},
	}, nil
}
