package jobq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
)

// Heartbeats keeps the heartbeat of each running attempt of a long job
// (one row in job_heartbeats) and sweeps up the jobs whose worker stopped
// beating: River rescues a job only once its own timeout has passed, which
// for a long job is long after its worker died. The jobs package beats and
// sweeps on a schedule; this is where both touch the database.
type Heartbeats struct {
	pool *pgxpool.Pool
}

// NewHeartbeats keeps heartbeats in pool's database.
func NewHeartbeats(pool *pgxpool.Pool) *Heartbeats { return &Heartbeats{pool: pool} }

// Attempt names one attempt of a job.
type Attempt struct {
	JobID   int64
	Attempt int
}

func (a Attempt) key() (int64, int32) { return a.JobID, int32(a.Attempt) }

// Start records that a worker started the attempt; a row an earlier
// attempt of the job left is taken over.
func (h *Heartbeats) Start(ctx context.Context, a Attempt) error {
	id, n := a.key()
	return db.New(h.pool).JobHeartbeatInsert(ctx, db.JobHeartbeatInsertParams{JobID: id, Attempt: n})
}

// Beat records that the attempt is alive. False: the sweep gave the
// attempt up (another worker may be running the job now), and its worker
// must stop.
func (h *Heartbeats) Beat(ctx context.Context, a Attempt) (bool, error) {
	id, n := a.key()
	rows, err := db.New(h.pool).JobHeartbeatUpdate(ctx, db.JobHeartbeatUpdateParams{JobID: id, Attempt: n})
	return rows > 0, err
}

// Stop clears the attempt's row as its worker finishes.
func (h *Heartbeats) Stop(ctx context.Context, a Attempt) error {
	id, n := a.key()
	return db.New(h.pool).JobHeartbeatDelete(ctx, db.JobHeartbeatDeleteParams{JobID: id, Attempt: n})
}

// Stale is a job the sweep took from a worker that stopped beating.
type Stale struct {
	ID   int64
	Kind string
	Args json.RawMessage
	// GivenUp: the attempt was the job's last, so River discarded it and
	// nothing will retry it; otherwise it is queued again.
	GivenUp bool
}

// Sweep takes back the running jobs of kinds whose current attempt has not
// beaten for stale (or never beat, and started that long ago): each is
// queued again at once, or discarded when out of attempts, with reason
// recorded as the attempt's error in River's own shape, as River's rescuer
// would after the job's timeout. It also clears the rows of attempts that
// no longer run. A job taken back is reported even when clearing fails.
func (h *Heartbeats) Sweep(ctx context.Context, kinds []string, stale time.Duration, reason string) ([]Stale, error) {
	q := db.New(h.pool)
	rows, err := q.JobUpdateStale(ctx, db.JobUpdateStaleParams{Kinds: kinds, StaleSeconds: stale.Seconds(), Error: reason})
	if err != nil {
		return nil, err
	}
	out := make([]Stale, len(rows))
	for i, r := range rows {
		out[i] = Stale{ID: r.ID, Kind: r.Kind, Args: r.Args, GivenUp: r.State == db.RiverJobStateDiscarded}
	}
	return out, q.JobHeartbeatDeleteOrphans(ctx)
}
