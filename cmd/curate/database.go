package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/devdb"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/config"
)

// database is an open, migrated database and whatever must be closed with it.
type database struct {
	Pool    *pgxpool.Pool
	cluster *devdb.Cluster
}

// openDB connects to DATABASE_URL or, when it is unset, to the private
// cluster in the data directory (starting it for this process's lifetime
// when it is not already running), then applies migrations.
func openDB(ctx context.Context, cfg config.Config, log *slog.Logger) (*database, error) {
	d := &database{}
	url := cfg.DatabaseURL
	if url == "" {
		cluster, err := devdb.Open(ctx, cfg.DataDir, devdb.Options{Durable: true, Log: log})
		if err != nil {
			return nil, err
		}
		d.cluster = cluster
		url = cluster.URL()
	}
	pcfg, err := db.PoolConfig(url)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if d.Pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.Pool.Ping(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	if err := db.Migrate(ctx, d.Pool, log); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close closes the pool and stops the private cluster if this process started it.
func (d *database) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.cluster != nil {
		if err := d.cluster.Close(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "curate: stopping postgres:", err)
		}
	}
}

// openServices opens the database and builds the services as every
// process builds them (app.New), for a command that calls one; the func
// returned removes the scratch directory and closes the database.
func openServices(ctx context.Context, cfg config.Config, env *Env) (*app.Services, func(), error) {
	log := newLogger(cfg, env.Stderr)
	d, err := openDB(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	svc, err := app.New(cfg, d.Pool, log)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return svc, func() {
		_ = svc.Scratch.Close()
		d.Close()
	}, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(cfg.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// loadConfig reads the environment and applies the common flags.
func loadConfig() (config.Config, error) {
	return config.FromEnv()
}
