package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/jobq"
)

// A job of a beating kind has a heartbeat row while it runs, refreshed as
// it goes; when the sweep gives the attempt up (removes the row) the work
// is cancelled, and the row is cleared when the work returns. Other kinds
// do not beat.
func TestHeartbeatMiddleware(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	h := &heartbeat{beats: jobq.NewHeartbeats(pool), kinds: []string{"long"}, every: 20 * time.Millisecond, stale: 5 * time.Second}
	beatAt := func() (time.Time, bool) {
		var at time.Time
		err := pool.QueryRow(ctx, `SELECT beat_at FROM job_heartbeats WHERE job_id = 7 AND attempt = 2`).Scan(&at)
		return at, err == nil
	}

	err := h.Work(ctx, &rivertype.JobRow{ID: 7, Kind: "long", Attempt: 2}, func(ctx context.Context) error {
		first, ok := beatAt()
		if !ok {
			t.Fatal("no heartbeat row while the job runs")
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if at, _ := beatAt(); at.After(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the heartbeat is not refreshed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The sweep gives the attempt up.
		if _, err := pool.Exec(ctx, `DELETE FROM job_heartbeats WHERE job_id = 7`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			t.Fatal("the work was not cancelled")
			return nil
		}
	})
	if !errors.Is(err, errLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Work returned %v", err)
	}

	// A finished attempt clears its row; a short kind never has one.
	for _, kind := range []string{"long", "short"} {
		err := h.Work(ctx, &rivertype.JobRow{ID: 8, Kind: kind, Attempt: 1}, func(context.Context) error {
			var n int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM job_heartbeats WHERE job_id = 8`).Scan(&n)
			if want := map[string]int{"long": 1, "short": 0}[kind]; n != want {
				t.Errorf("%s job: %d heartbeat rows while it runs, want %d", kind, n, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM job_heartbeats`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d heartbeat rows left (%v)", n, err)
	}
}
