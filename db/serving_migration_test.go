package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// Migration 33 on a database in use: deployments whose adapters were
// unloaded (as the history says) are recorded so, and the arms of running
// or paused experiments are called where their versions are served now;
// a draft's arms are left for its start. Rolled back, the schema takes
// the old rows again.
func TestServingTruthMigration(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 32)
	exec := execer(t, pool)
	org, model, target := uuid.New(), uuid.New(), uuid.New()
	v1, v2 := uuid.New(), uuid.New()
	old, cur, staged := uuid.New(), uuid.New(), uuid.New()
	exec(`INSERT INTO organizations (id, slug, name) VALUES ($1, 'acme', 'Acme')`, org)
	exec(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, 'support')`, model, org)
	exec(`INSERT INTO model_versions (id, org_id, registered_model_id, version, kind, model_id, base_model)
		VALUES ($1, $3, $4, '1.0.0', 'lora', '/a/1', 'base'), ($2, $3, $4, '1.1.0', 'lora', '/a/2', 'base')`, v1, v2, org, model)
	exec(`INSERT INTO serving_targets (id, org_id, name, kind, base_url) VALUES ($1, $2, 'gpu-1', 'vllm', 'http://127.0.0.1:1')`, target, org)
	exec(`INSERT INTO deployments (id, org_id, registered_model_id, version_id, target_id, alias, action, status, served_name, finished_at)
		VALUES ($1, $4, $5, $6, $8, 'production', 'deploy', 'succeeded', 'support-1.0.0-a', now() - interval '2 hours'),
		       ($2, $4, $5, $7, $8, 'production', 'deploy', 'succeeded', 'support-1.1.0-b', now() - interval '1 hour'),
		       ($3, $4, $5, $6, $8, 'staging', 'deploy', 'succeeded', 'support-1.0.0-c', now() - interval '30 minutes')`,
		old, cur, staged, org, model, v1, v2, target)
	exec(`INSERT INTO model_history (org_id, registered_model_id, actor_label, action, deployment_id) VALUES ($1, $2, 'x', 'unloaded', $3)`,
		org, model, staged)
	for _, e := range []struct{ key, status string }{{"running", "running"}, {"paused", "paused"}, {"draft", "draft"}} {
		var id uuid.UUID
		if err := pool.QueryRow(ctx, `INSERT INTO experiments (org_id, key, name, registered_model_id, seed, status)
			VALUES ($1, $2, $2, $3, $2, $4) RETURNING id`, org, e.key, model, e.status).Scan(&id); err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO experiment_arms (experiment_id, idx, name, model_version_id, weight)
			VALUES ($1, 0, 'control', $2, 0.5), ($1, 1, 'treatment', $3, 0.5)`, id, v1, v2)
	}

	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var unloaded []uuid.UUID
	rows, err := pool.Query(ctx, `SELECT id FROM deployments WHERE unloaded_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		unloaded = append(unloaded, id)
	}
	if rows.Err() != nil || len(unloaded) != 1 || unloaded[0] != staged {
		t.Errorf("unloaded after the migration: %v (%v), want the staging deployment %s", unloaded, rows.Err(), staged)
	}
	pins := map[string]uuid.NullUUID{}
	rows, err = pool.Query(ctx, `SELECT e.key || '/' || a.name, a.deployment_id FROM experiment_arms a JOIN experiments e ON e.id = a.experiment_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var d uuid.NullUUID
		if err := rows.Scan(&k, &d); err != nil {
			t.Fatal(err)
		}
		pins[k] = d
	}
	for arm, want := range map[string]uuid.NullUUID{
		"running/control": {UUID: old, Valid: true}, "running/treatment": {UUID: cur, Valid: true},
		"paused/control": {UUID: old, Valid: true}, "paused/treatment": {UUID: cur, Valid: true},
		"draft/control": {}, "draft/treatment": {},
	} {
		if pins[arm] != want {
			t.Errorf("%s is called at %v, want %v", arm, pins[arm], want)
		}
	}

	if _, err := provider.DownTo(ctx, 32); err != nil {
		t.Fatalf("rolling back: %v", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
}
