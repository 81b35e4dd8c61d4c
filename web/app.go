// Package web assembles Curate's server: the echo instance, its middleware
// (security headers, body limits, CSRF, authentication, roles, metrics), the
// routes table, static files, and the River client, started and stopped
// together as one App.
package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/ratelimit"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/jobs"
	"github.com/curate/curate/static"
)

// uploadLimit bounds an uploaded import file.
const uploadLimit = imports.MaxUpload + 1<<20 // the file and the form around it

// App is one Curate server: HTTP and, unless Workers is 0, River workers.
// It embeds the process's services (its Config and Log among them), which
// its handlers and workers share.
type App struct {
	*app.Services
	Pool       *pgxpool.Pool
	River      *river.Client[pgx.Tx]
	Echo       *echo.Echo
	handlers   *handlers.Handlers
	metrics    *metrics
	metricsLn  net.Listener       // CURATE_METRICS_ADDR, once ListenMetrics opened it
	keyLimiter *ratelimit.Limiter // requests per API key
	// id names this server in the servers table, where the web servers on
	// one database count each other to share the rate limits.
	id uuid.UUID
}

// New assembles an App on an open, migrated database.
func New(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*App, error) {
	hashKey, blockKey, err := SessionKeys(cfg)
	if err != nil {
		return nil, err
	}
	svc, err := app.New(cfg, pool, log)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(cfg, svc.Servers); err != nil {
		return nil, err
	}
	client, err := jobs.NewClient(pool, svc, jobs.Options{Workers: cfg.Workers, GPUSlots: cfg.GPUSlots})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	a := &App{
		Services: svc, Pool: pool, River: client,
		handlers: &handlers.Handlers{Services: svc,
			Sessions:    handlers.NewSessions(hashKey, blockKey, cfg.SessionTTL, rotateCSRF(cfg.TLSCert != "")),
			UserLimiter: ratelimit.New(float64(cfg.FeedbackPerUser)/60, cfg.FeedbackPerUser)},
		metrics:    newMetrics(db.New(pool)),
		keyLimiter: ratelimit.New(cfg.APIRate, cfg.APIBurst),
		id:         uuid.New(),
	}
	a.Echo = a.router()
	return a, nil
}

// checkKeys refuses to start a server whose session key or secret key
// differs from the ones the other servers on this database use: its
// cookies would be refused by every other server, and the secrets they
// stored would be unreadable here.
func checkKeys(cfg config.Config, s *servers.Service) error {
	session, err := cfg.SessionSecret()
	if err != nil {
		return err
	}
	secret, err := cfg.SecretsKey()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.CheckKeys(ctx, session, secret)
}

func (a *App) router() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = a.handlers.HandleError
	e.IPExtractor = clientIP(a.Config)
	tls := a.Config.TLSCert != ""

	e.Use(middleware.Recover())
	e.Use(a.metrics.middleware)
	e.Use(bodyRate(a.Config.BodyReadTimeout, a.Config.BodyMinRate))
	e.Use(securityHeaders(tls))
	e.Use(bodyLimit(a.Config.BodyLimit, map[string]int64{
		"/api/feedback/batch": a.Config.BatchBodyLimit,
		"/imports":            uploadLimit,
	}))
	e.Use(textInputs)
	e.Use(csrf(tls))
	e.Use(a.authenticate)
	e.Use(a.limitAPIKeys)

	staticFS, _ := fs.Sub(static.FS, ".")
	e.GET("/static/*", echo.WrapHandler(cacheFor(time.Hour, http.StripPrefix("/static/", http.FileServerFS(staticFS)))))
	routes := Routes(a.handlers)
	for _, r := range routes {
		e.Add(r.Method, r.Path, r.Handler, requireRole(r.Role))
	}
	a.handlers.CanOpen = linkRoles(e, routes)
	return e
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

// ListenMetrics opens the metrics address (CURATE_METRICS_ADDR) and
// returns the address it listens on, nil when metrics are off. Run serves
// /metrics there, apart from the public address, opening it itself when
// this was not called first; calling it first reports a taken address
// before anything starts, and the port the system chose for ":0".
func (a *App) ListenMetrics() (net.Addr, error) {
	if a.metricsLn != nil {
		return a.metricsLn.Addr(), nil
	}
	addr, on := a.Config.Metrics()
	if !on {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address (CURATE_METRICS_ADDR): %w; set another address, or off", err)
	}
	a.metricsLn = ln
	return ln.Addr(), nil
}

// Heartbeat records this server as live in the database and shares the
// API-key and per-user rate limits among the servers live now. Run calls
// it on start and every servers.BeatEvery.
func (a *App) Heartbeat(ctx context.Context) error {
	n, err := a.Services.Servers.Beat(ctx, a.id)
	if err != nil {
		return err
	}
	a.keyLimiter.Share(n)
	a.handlers.UserLimiter.Share(n)
	return nil
}

// heartbeat beats until ctx is done. A failed beat keeps the last share:
// the servers it knew of are still the best guess.
func (a *App) heartbeat(ctx context.Context) {
	t := time.NewTicker(servers.BeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				a.Log.Warn("server heartbeat", "err", err)
			}
		}
	}
}

// Run serves HTTP on ln (and the metrics on their own address) and works
// jobs until ctx is done, then shuts down in order: stop taking requests,
// let running jobs finish (cancelling them when the timeout passes or hard
// is closed), leave the servers table, and return.
func (a *App) Run(ctx context.Context, ln net.Listener, hard <-chan struct{}) error {
	if _, err := a.ListenMetrics(); err != nil {
		return err
	}
	if err := a.Heartbeat(ctx); err != nil {
		a.Log.Warn("server heartbeat", "err", err)
	}
	leaveWorkers := func() {}
	if a.Config.Workers > 0 {
		// Recorded with its trainer's probe before it takes jobs, so that
		// a local launch counts this worker from the first request.
		leaveWorkers = a.Services.StartWorkerBeats(ctx)
		if err := a.River.Start(ctx); err != nil {
			leaveWorkers()
			if a.metricsLn != nil {
				a.metricsLn.Close()
			}
			if ctx.Err() != nil {
				return nil // stopped while starting, as asked: nothing ran
			}
			return fmt.Errorf("starting workers: %w", err)
		}
	}
	// ReadTimeout bounds a request's headers and body until bodyRate takes
	// the body over (it lets a steady upload run longer).
	srv := &http.Server{Handler: a.Echo, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: a.Config.BodyReadTimeout, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn)}
	a.Echo.Server = srv
	served := make(chan error, 2)
	go func() {
		var err error
		if a.Config.TLSCert != "" {
			err = srv.ServeTLS(ln, a.Config.TLSCert, a.Config.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
	}()
	var msrv *http.Server
	if a.metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.registry, promhttp.HandlerOpts{}))
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: a.Config.BodyReadTimeout,
			ErrorLog: slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn)}
		go func() {
			if err := msrv.Serve(a.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				served <- fmt.Errorf("metrics: %w", err)
			}
		}()
	}
	beatCtx, stopBeats := context.WithCancel(ctx)
	beaten := make(chan struct{})
	go func() {
		defer close(beaten)
		a.heartbeat(beatCtx)
	}()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	a.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		a.Log.Warn("http shutdown", "err", err)
	}
	if msrv != nil {
		if err := msrv.Shutdown(sctx); err != nil {
			a.Log.Warn("metrics shutdown", "err", err)
		}
	}
	stopBeats()
	<-beaten
	lctx, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
	if err := a.Services.Servers.Leave(lctx, a.id); err != nil {
		a.Log.Warn("leaving the servers table", "err", err)
	}
	cancelLeave()
	if a.Config.Workers > 0 {
		StopWorkers(sctx, a.River, hard, a.Log)
	}
	leaveWorkers()
	return serveErr
}

// StopWorkers stops River gracefully, letting running jobs finish, and
// cancels them when ctx expires or hard is closed (a second signal).
func StopWorkers(ctx context.Context, client *river.Client[pgx.Tx], hard <-chan struct{}, log *slog.Logger) {
	stopped := make(chan error, 1)
	go func() { stopped <- client.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err == nil {
			return
		}
		log.Warn("workers did not stop in time; cancelling running jobs", "err", err)
	case <-hard:
		log.Warn("second signal; cancelling running jobs")
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.StopAndCancel(cctx); err != nil {
		log.Error("cancelling jobs", "err", err)
	}
}
