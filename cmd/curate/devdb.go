package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/curate/curate/db/devdb"
)

func cmdDevDB(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "devdb", "devdb start|stop|status|url [flags]",
		"Manages the private Postgres cluster kept in the data directory, the one serve uses\n"+
			"when DATABASE_URL is unset.\n"+
			"  start   start it (creating it first if needed) and leave it running\n"+
			"  stop    stop it\n"+
			"  status  say whether it is running, and its URL\n"+
			"  url     print its connection URL")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	admin := fs.Bool("admin", false, "url: the maintenance database (postgres) instead of curate")
	if len(args) == 0 {
		fs.Usage()
		return errors.New("devdb needs start, stop, status or url")
	}
	verb := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	switch verb {
	case "start":
		c, err := devdb.Open(ctx, cfg.DataDir, devdb.Options{Durable: true, Log: log})
		if err != nil {
			return err
		}
		c.Keep()
		fmt.Fprintln(env.Stdout, c.URL())
		return nil
	case "stop":
		c, err := devdb.Attach(cfg.DataDir)
		if err != nil {
			return err
		}
		return c.Stop(ctx)
	case "status", "url":
		c, err := devdb.Attach(cfg.DataDir)
		if err != nil {
			return err
		}
		url := c.URL()
		if *admin {
			url = c.AdminURL()
		}
		if verb == "url" {
			fmt.Fprintln(env.Stdout, url)
			return nil
		}
		if c.Running(ctx) {
			fmt.Fprintf(env.Stdout, "running\n%s\n", url)
			return nil
		}
		fmt.Fprintln(env.Stdout, "stopped")
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown devdb command %q", verb)
}
