package main

import (
	"context"
	"fmt"
)

func cmdMigrate(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "migrate", "migrate", "Applies Curate's and River's database migrations and exits. serve and worker\nalso apply them on start.")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := openDB(ctx, cfg, newLogger(cfg, env.Stderr))
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintln(env.Stdout, "migrations are up to date")
	return nil
}
