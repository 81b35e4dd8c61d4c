package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/web"
)

func cmdServe(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "serve", "serve [flags]",
		"Runs the web server and the background workers. With DATABASE_URL unset it starts\n"+
			"a private Postgres in the data directory and stops it on exit.")
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (CURATE_ADDR)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "background workers in this process; 0 serves the web only (CURATE_WORKERS)")
	fs.StringVar(&cfg.Env, "env", cfg.Env, `"dev" seeds a demo organisation and admin on first start (CURATE_ENV)`)
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory: private database, exports, trainer runs (CURATE_DATA_DIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	if cfg.Dev() && cfg.OpenAIAPIKey == "" {
		stop, err := devOpenAI(&cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	d, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.Close()
	app, err := web.New(cfg, d.Pool, log)
	if err != nil {
		return err
	}
	defer app.Services.Scratch.Close()
	metricsAddr, err := app.ListenMetrics()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	url := baseURL(ln.Addr(), cfg.TLSCert != "")
	if cfg.Dev() {
		seeded, err := app.Demo.Ensure(ctx)
		if err != nil {
			ln.Close()
			return fmt.Errorf("seeding demo data: %w", err)
		}
		n, err := app.Demo.SeedFeedback(ctx, seeded)
		if err != nil {
			ln.Close()
			return fmt.Errorf("seeding demo feedback: %w", err)
		}
		if n > 0 {
			log.Info("seeded demo feedback", "items", n)
		}
		v, err := app.Demo.SeedDataset(ctx, seeded.OrgID)
		if err != nil {
			ln.Close()
			return fmt.Errorf("seeding the demo dataset: %w", err)
		}
		if v.ItemCount > 0 {
			log.Info("seeded a frozen demo dataset", "name", demo.DatasetName, "examples", v.ItemCount)
		}
		printDemo(env, url, seeded)
	}
	if metricsAddr != nil {
		log.Info("metrics", "url", "http://"+metricsAddr.String()+"/metrics")
	}
	log.Info("curate is running", "url", url, "workers", cfg.Workers)
	return app.Run(ctx, ln, env.Hard)
}

func printDemo(env *Env, url string, s demo.Seeded) {
	fmt.Fprintf(env.Stdout, "\nCurate is running at %s\n", url)
	if s.Password != "" {
		fmt.Fprintf(env.Stdout, "Sign in as %s with password %s\n(shown once: it is not stored in clear anywhere)\n\n", s.Email, s.Password)
	} else {
		fmt.Fprintf(env.Stdout, "Sign in as %s with the password printed at the first start.\n\n", s.Email)
	}
}

// baseURL is the address people can open, for the listener's address.
func baseURL(addr net.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if host == "" || host == "::" || host == "0.0.0.0" || strings.HasPrefix(host, "127.") {
		host = "localhost"
	}
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(host, port))
}
