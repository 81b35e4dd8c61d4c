package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// Migration 45 rolled back over reward models in use: the reward versions,
// their deployments on pooling targets, the targets and the cached scores
// go, other versions stay, and the old kinds are checked again; applied
// again, a reward model can be stored.
func TestRewardModelMigration(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 45)
	exec := func(sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}
	must := execer(t, pool)
	org, model, lora, rm, target := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	must(`INSERT INTO organizations (id, slug, name) VALUES ($1, 'acme', 'Acme')`, org)
	must(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, 'support')`, model, org)
	must(`INSERT INTO model_versions (id, org_id, registered_model_id, version, kind, model_id, base_model)
		VALUES ($1, $3, $4, '1.0.0', 'lora', '/a/1', 'base'), ($2, $3, $4, '1.1.0', 'reward', '/runs/7f3a/final', '')`, lora, rm, org, model)
	must(`INSERT INTO serving_targets (id, org_id, name, kind, base_url) VALUES ($1, $2, 'rm-1', 'vllm_pooling', 'http://127.0.0.1:1')`, target, org)
	must(`INSERT INTO deployments (org_id, registered_model_id, version_id, target_id, alias, action, status, served_name, finished_at)
		VALUES ($1, $2, $3, $4, 'production', 'deploy', 'succeeded', 'support-rm', now())`, org, model, rm, target)
	must(`INSERT INTO reward_model_cache (org_id, key, version_id, raw) VALUES ($1, '\x01', $2, 1.5)`, org, rm)
	if err := exec(`INSERT INTO reward_model_cache (org_id, key, version_id, raw) VALUES ($1, '\x02', $2, 'NaN')`, org, rm); err == nil {
		t.Error("a NaN score was cached")
	}

	if _, err := provider.DownTo(ctx, 44); err != nil {
		t.Fatal(err)
	}
	var versions, targets, deployments int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM model_versions), (SELECT count(*) FROM serving_targets),
		(SELECT count(*) FROM deployments)`).Scan(&versions, &targets, &deployments); err != nil {
		t.Fatal(err)
	}
	if versions != 1 || targets != 0 || deployments != 0 {
		t.Errorf("after rolling back: %d versions, %d targets, %d deployments; want the adapter alone", versions, targets, deployments)
	}
	if err := exec(`INSERT INTO model_versions (org_id, registered_model_id, version, kind, model_id) VALUES ($1, $2, '2.0.0', 'reward', 'x')`, org, model); err == nil {
		t.Error("a reward version was stored after rolling back")
	}

	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	must(`INSERT INTO model_versions (org_id, registered_model_id, version, kind, model_id) VALUES ($1, $2, '2.0.0', 'reward', 'x')`, org, model)
}
