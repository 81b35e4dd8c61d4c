package health_test

import (
	"context"
	"errors"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/health"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A migrated database is ready; without River's migrations the queue is
// named; a database that does not answer is named before anything else.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	svc := health.New(pool)
	if err := svc.Check(ctx); err != nil {
		t.Fatalf("fresh database: %v", err)
	}

	if _, err := pool.Exec(ctx, "DELETE FROM river_migration"); err != nil {
		t.Fatal(err)
	}
	var down *health.Down
	if err := svc.Check(ctx); !errors.As(err, &down) || down.Part != health.Queue {
		t.Errorf("without River's migrations: %v, want the queue down", err)
	}

	pool.Close()
	if err := svc.Check(ctx); !errors.As(err, &down) || down.Part != health.Database {
		t.Errorf("closed pool: %v, want the database down", err)
	}
}
