package jobq

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
)

// Long jobs beat: while a worker runs an attempt of one, it updates the
// attempt's heartbeat every BeatEvery, and a job running without a beat
// for StaleAfter has lost its worker (the jobs package beats and sweeps;
// a service resuming a run asks Revive).
const (
	BeatEvery  = 5 * time.Second
	StaleAfter = 30 * time.Second
)

// StaleError is recorded as the error of an attempt whose worker stopped
// beating.
const StaleError = "the worker stopped sending heartbeats (its process ended)"

// Revive makes sure a job carries on the work of a run that has not
// finished, in the caller's transaction, and returns that job's id:
// jobID itself while it is live (queued, or running in a worker that
// beats), ErrLive then; jobID put back in the queue at once when its
// worker stopped beating; otherwise (the job ended, was given up, or is
// gone) a new job of args. It is for the kinds that beat.
func Revive(ctx context.Context, tx pgx.Tx, ins Inserter, jobID int64, args river.JobArgs) (int64, error) {
	q := db.New(tx)
	if jobID != 0 {
		live, err := q.JobGetLiveForUpdate(ctx, db.JobGetLiveForUpdateParams{ID: jobID, StaleSeconds: StaleAfter.Seconds()})
		switch {
		case err == nil && live.Live:
			return jobID, ErrLive
		case err == nil && live.State == "running":
			// Its worker is gone: the sweep would put it back within a
			// minute; it goes now.
			rows, err := q.JobUpdateStale(ctx, db.JobUpdateStaleParams{Kinds: Kinds(args), StaleSeconds: StaleAfter.Seconds(),
				Error: StaleError, JobID: pgtype.Int8{Int64: jobID, Valid: true}})
			if err != nil {
				return 0, err
			}
			if len(rows) == 1 && rows[0].State == db.RiverJobStateAvailable {
				return jobID, nil
			}
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return 0, err
		}
	}
	res, err := ins.InsertTx(ctx, tx, args, nil)
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

// ErrLive is Revive's answer for a job that carries its run on already.
var ErrLive = errors.New("the job is queued or running in a live worker")

// Stalled reports whether no job carries a run on: jobID (0 for none) has
// ended, is gone, or runs in a worker that stopped beating. A stalled run
// that has not finished waits for the sweep, or for an admin to resume it.
func Stalled(ctx context.Context, q *db.Queries, jobID int64) (bool, error) {
	if jobID == 0 {
		return true, nil
	}
	live, err := q.JobGetLive(ctx, db.JobGetLiveParams{ID: jobID, StaleSeconds: StaleAfter.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return !live.Live, err
}
