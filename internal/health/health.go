// Package health answers whether this process can do its work: the
// database answers and River's tables are in place.
package health

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
)

// timeout bounds a check: a probe that waits longer than its caller
// would is no answer.
const timeout = 2 * time.Second

// Parts that a check names when they do not answer.
const (
	Database = "database"
	Queue    = "queue"
)

// Down says which part did not answer, and why.
type Down struct {
	Part string // Database or Queue
	Err  error
}

func (d *Down) Error() string {
	if d.Err == nil {
		return d.Part + " unreachable"
	}
	return d.Part + " unreachable: " + d.Err.Error()
}

func (d *Down) Unwrap() error { return d.Err }

// Service checks the process's dependencies.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the readiness check of pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Check returns nil when the database answers and River's schema is
// migrated, or a *Down naming the first part that does not.
func (s *Service) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.Pool.Ping(ctx); err != nil {
		return &Down{Part: Database, Err: err}
	}
	v, err := db.New(s.Pool).RiverMigrationGetVersion(ctx)
	if err == nil && v == 0 {
		err = errors.New("no River migration applied")
	}
	if err != nil {
		return &Down{Part: Queue, Err: err}
	}
	return nil
}
