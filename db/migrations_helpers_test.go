package db_test

import (
	"context"
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
)

// migrationsAt gives a fresh database migrated up to version and the
// goose provider of Curate's migrations over it, for the tests that apply
// or roll back one migration over rows in use.
func migrationsAt(t *testing.T, version int64) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	pool := pgtest.NewDB(t)
	sub, err := fs.Sub(db.EmbeddedMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { sqlDB.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.DownTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return pool, provider
}

// execer runs statements on pool, failing the test at the first refused.
func execer(t *testing.T, pool *pgxpool.Pool) func(sql string, args ...any) {
	return func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}
