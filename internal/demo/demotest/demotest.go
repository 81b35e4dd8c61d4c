// Package demotest seeds the demo organisation for tests that build their
// own services: the seeder stores through services as app.New builds
// them, less the jobs they would start.
package demotest

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/internal/feedback"
)

// Seeder seeds the demo organisation in pool's database.
func Seeder(pool *pgxpool.Pool) *demo.Seeder {
	return demo.New(pool, accounts.New(pool, accounts.DefaultSessionTTL), feedback.New(pool), alerts.New(pool, nil, nil, nil, nil, nil),
		datasets.New(pool, nil, nil, nil))
}
