package db_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exposureRows is every exposure as text, by experiment, phase and unit.
func exposureRows(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT experiment_id::text || '/' || phase || '/' || unit_id,
		ROW(arm, first_seen, seen_in_other_arm)::text FROM experiment_exposures`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// Migration 180 on a database in use: the exposures of a long-running
// experiment and of one in its third phase move into the months of their
// phases' starts with every row kept, one first exposure per unit and
// phase still, and come back whole when the migration is rolled back.
func TestExposurePartitionsMigration(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 174)
	exec := execer(t, pool)
	org, model := uuid.New(), uuid.New()
	exec(`INSERT INTO organizations (id, slug, name) VALUES ($1, 'a', 'A')`, org)
	exec(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, 'support')`, model, org)
	now := time.Now().UTC()
	long, phased := uuid.New(), uuid.New()
	longStart, phasedStart, phase3Start := now.AddDate(0, -7, 0), now.AddDate(0, -5, 0), now.AddDate(0, -1, 0)
	exec(`INSERT INTO experiments (id, org_id, key, name, registered_model_id, seed, status, started_at)
		VALUES ($1, $2, 'long', 'long', $3, 's', 'running', $4)`, long, org, model, longStart)
	exec(`INSERT INTO experiments (id, org_id, key, name, registered_model_id, seed, status, started_at, phase, phase_started_at)
		VALUES ($1, $2, 'phased', 'phased', $3, 's', 'paused', $4, 3, $5)`, phased, org, model, phasedStart, phase3Start)
	// The long experiment's units came over seven months; the phased one's
	// in each of its phases, the same units again.
	exec(`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, seen_in_other_arm)
		SELECT $1, 1, 'u' || i, i % 2, $2::timestamptz + i * interval '10 days', i % 7 = 0 FROM generate_series(0, 20) i`, long, longStart)
	exec(`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen)
		SELECT $1, p, 'u' || i, (i + p) % 2, $2::timestamptz + (p - 1) * interval '62 days' + i * interval '1 hour'
		FROM generate_series(1, 3) p, generate_series(0, 9) i`, phased, phasedStart)
	before := exposureRows(t, pool)
	if len(before) != 51 {
		t.Fatalf("set-up: %d exposures", len(before))
	}

	if _, err := provider.UpTo(ctx, 180); err != nil {
		t.Fatal(err)
	}
	if after := exposureRows(t, pool); !maps.Equal(after, before) {
		t.Errorf("after the migration: %d exposures, want %d as they were", len(after), len(before))
	}
	// Each phase's rows carry its start: the experiment's for a first
	// phase, the phase's own for a current one, the first exposure's for a
	// phase before (whose start was not kept).
	for _, c := range []struct {
		experiment uuid.UUID
		phase      int
		want       time.Time
	}{{long, 1, longStart}, {phased, 1, phasedStart}, {phased, 2, phasedStart.Add(62 * 24 * time.Hour)}, {phased, 3, phase3Start}} {
		var starts int
		var at time.Time
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT phase_started_at), min(phase_started_at) FROM experiment_exposures
			WHERE experiment_id = $1 AND phase = $2`, c.experiment, c.phase).Scan(&starts, &at); err != nil {
			t.Fatal(err)
		}
		if starts != 1 || !at.Equal(c.want.Truncate(time.Microsecond)) {
			t.Errorf("phase %d of %s: %d starts, %s, want %s", c.phase, c.experiment, starts, at, c.want)
		}
	}
	// Every row sits in its phase's month.
	var misplaced, parts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tableoid::regclass::text
			<> 'experiment_exposures_y' || to_char(phase_started_at AT TIME ZONE 'UTC', 'YYYY"m"MM')),
		count(DISTINCT tableoid) FROM experiment_exposures`).Scan(&misplaced, &parts); err != nil || misplaced != 0 || parts != 4 {
		t.Errorf("%d rows outside their month's partition, %d partitions used (%v), want 0 and 4", misplaced, parts, err)
	}
	// A unit's first exposure of a phase is still one: recording it again
	// fails, and the assignment's lookup finds its arm in the partition.
	var pg *pgconn.PgError
	_, err := pool.Exec(ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at)
		SELECT experiment_id, phase, unit_id, 1 - arm, phase_started_at FROM experiment_exposures WHERE experiment_id = $1 LIMIT 1`, phased)
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Errorf("a first exposure recorded again: %v, want a unique violation", err)
	}
	var arm int
	if err := pool.QueryRow(ctx, `SELECT experiment_exposure_arm($1, 1, 'u3', $2)`, long, longStart).Scan(&arm); err != nil || arm != 1 {
		t.Errorf("the lookup answered arm %d (%v), want 1", arm, err)
	}

	if _, err := provider.DownTo(ctx, 174); err != nil {
		t.Fatal(err)
	}
	if back := exposureRows(t, pool); !maps.Equal(back, before) {
		t.Errorf("rolled back: %d exposures, want %d as they were", len(back), len(before))
	}
}
