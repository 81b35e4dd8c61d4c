package main

import (
	"context"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/jobs"
	"github.com/curate/curate/web"
)

func cmdWorker(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "worker", "worker [flags]",
		"Runs background workers only. Start more of these, on more machines, against one\n"+
			"Postgres (DATABASE_URL) to work more jobs at once.")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "jobs worked at once (CURATE_WORKERS)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	d, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.Close()
	svc, err := app.New(cfg, d.Pool, log)
	if err != nil {
		return err
	}
	defer svc.Scratch.Close()
	// Workers decrypt what the web servers stored: refuse another key.
	secret, err := cfg.SecretsKey()
	if err != nil {
		return err
	}
	if err := svc.Servers.CheckKeys(ctx, secret); err != nil {
		return err
	}
	client, err := jobs.NewClient(d.Pool, svc, jobs.Options{Workers: cfg.Workers, GPUSlots: cfg.GPUSlots})
	if err != nil {
		return err
	}
	leave := svc.StartWorkerBeats(ctx)
	defer leave()
	if err := client.Start(ctx); err != nil {
		return err
	}
	log.Info("workers running", "workers", cfg.Workers)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	web.StopWorkers(sctx, client, env.Hard, log)
	return nil
}
