package retention

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// EnsureMonths makes the month partitions for rows about to be written
// with these times (history, or dates set afterwards), in one short
// statement of its own before the rows go in. A row of a month without its
// partition lands in DEFAULT and would be moved out by the maintenance
// later, a move a read planned while it commits does not see through.
// This month's partition always exists: times in it cost nothing. While
// long reads hold the DEFAULT partition, the rows are left to it.
func EnsureMonths(ctx context.Context, pool *pgxpool.Pool, times []time.Time) error {
	now := monthStart(time.Now())
	var months []time.Time
	for _, t := range times {
		if m := monthStart(t); !t.IsZero() && !m.Equal(now) && !slices.ContainsFunc(months, m.Equal) {
			months = append(months, m)
		}
	}
	if len(months) == 0 {
		return nil
	}
	err := db.New(pool).PartitionInsertMonths(ctx, months)
	if errs.IsLockTimeout(err) {
		// Busy: the rows wait in DEFAULT for the maintenance instead.
		return nil
	}
	return err
}
