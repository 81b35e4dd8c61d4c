// Package db holds Curate's schema (migrations/), its queries (queries/, compiled
// by sqlc into this package) and the code that applies the migrations.
package db

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrate applies River's migrations and then Curate's own, both idempotently.
// Concurrent callers are safe: goose and River take advisory locks.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if len(res.Versions) > 0 {
		log.Info("applied river migrations", "count", len(res.Versions))
	}

	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return err
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub)
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if len(results) > 0 {
		log.Info("applied migrations", "count", len(results))
	}
	return nil
}

// SchemaFingerprint identifies the schema the migrations produce: a digest of
// every migration file and of River's migration versions. Test templates are
// keyed by it so a changed schema never reuses a stale template.
func SchemaFingerprint() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrationFS, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrationFS.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	for _, v := range migrator.AllVersions() {
		fmt.Fprintf(h, "river:%d:%s\x00", v.Version, v.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
