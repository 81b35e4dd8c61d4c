package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// Migrations 57 to 59 rolled back and applied again: the loop, routing and
// hygiene tables and columns go and come back, and the alerts' kinds keep
// the ones other migrations added (a monitor's alert stays storable) while
// a loop's alert is storable only with migration 59.
func TestLoopsMigrations(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 59)
	org := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO organizations (id, slug, name) VALUES ($1, 'acme', 'Acme')`, org); err != nil {
		t.Fatal(err)
	}
	alert := func(kind string) error {
		_, err := pool.Exec(ctx, `INSERT INTO alerts (org_id, kind, severity, dedup_key, title, message) VALUES ($1, $2, 'bad', $2 || gen_random_uuid(), 't', 'm')`,
			org, kind)
		return err
	}
	for _, kind := range []string{"loop_run", "monitor_latency", "safety"} {
		if err := alert(kind); err != nil {
			t.Fatalf("a %s alert: %v", kind, err)
		}
	}
	if _, err := provider.DownTo(ctx, 56); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename IN ('loop_policies', 'loop_runs', 'loop_run_steps',
		'routing_rules', 'teams')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("%d loop and routing tables left (%v)", tables, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'feedback'
		AND column_name IN ('is_training_data', 'hygiene_flags', 'training_set_by')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("%d hygiene columns left (%v)", tables, err)
	}
	if alert("loop_run") == nil {
		t.Error("a loop's alert stored without migration 59")
	}
	if err := alert("monitor_latency"); err != nil {
		t.Errorf("a monitor's alert after the rollback: %v", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"loop_run", "monitor_score_shift"} {
		if err := alert(kind); err != nil {
			t.Errorf("a %s alert after migrating up again: %v", kind, err)
		}
	}
}
