package web_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/web/webtest"
)

// While the database cannot be reached the API answers 503 with
// Retry-After and a problem document, and pages say to try again shortly,
// instead of a 500; once it is back, the same requests work.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	proxy, pool := proxiedDB(t)
	s := webtest.New(t, webtest.Options{Pool: pool})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "curator")
	key := s.APIKey(org, "reader", "viewer")
	curatorKey := s.APIKey(org, "assistant", "curator")
	ada := s.SignedIn("ada@acme.test")
	s.API(key, http.MethodGet, "/api/feedback", nil).Must(t, http.StatusOK)
	ada.Get("/feedback").Must(t, http.StatusOK)

	item := map[string]any{"external_id": "m1", "query": "q", "response": "r", "feedback_type": "thumbs_up"}
	unavailable := func(when string) {
		t.Helper()
		for _, res := range []webtest.Response{
			s.API(key, http.MethodGet, "/api/feedback", nil),
			s.API(curatorKey, http.MethodPost, "/api/feedback", item),
		} {
			var p problemDoc
			res.Must(t, http.StatusServiceUnavailable).JSON(t, &p)
			if res.Header.Get("Retry-After") != "5" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") ||
				p.Status != http.StatusServiceUnavailable || p.Title != "Try again shortly" {
				t.Errorf("the API %s: %v %s", when, res.Header, res.Body)
			}
		}
		page := ada.Get("/feedback").Must(t, http.StatusServiceUnavailable)
		if page.Header.Get("Retry-After") != "5" || !strings.Contains(page.Body, "Try again shortly") || !strings.Contains(page.Body, "cannot reach its database") {
			t.Errorf("a page %s: %v %.500s", when, page.Header, page.Body)
		}
		if strings.Contains(page.Body, "127.0.0.1") || strings.Contains(page.Body, "EOF") {
			t.Errorf("the page %s shows the connection error: %.500s", when, page.Body)
		}
	}
	proxy.down()
	unavailable("when the open connections break")
	pool.Reset()
	unavailable("when new connections are refused")
	s.Client().Get("/readyz").Must(t, http.StatusServiceUnavailable)

	proxy.up()
	s.API(key, http.MethodGet, "/api/feedback", nil).Must(t, http.StatusOK)
	s.API(curatorKey, http.MethodPost, "/api/feedback", item).Must(t, http.StatusCreated)
	ada.Get("/feedback").Must(t, http.StatusOK)
}

// dbProxy stands between a pool and the test database, and can cut every
// connection and refuse new ones, as a database host going away does.
type dbProxy struct {
	t               *testing.T
	addr            string // where it listens
	network, target string // the database
	mu              sync.Mutex
	ln              net.Listener
	conns           []net.Conn
}

// proxiedDB gives a fresh database and a pool that reaches it only
// through a dbProxy.
func proxiedDB(t *testing.T) (*dbProxy, *pgxpool.Pool) {
	direct := pgtest.NewDB(t)
	cfg := direct.Config()
	p := &dbProxy{t: t}
	p.network, p.target = pgconn.NetworkAddress(cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.ConnConfig.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.addr)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		p.down()
	})
	return p, pool
}

func (p *dbProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial(p.network, p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); d.Close() }()
			go func() { _, _ = io.Copy(c, d); c.Close() }()
		}
	}()
}

// down closes the listener and every connection through it: new
// connections are refused, open ones break.
func (p *dbProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// up listens again on the same address.
func (p *dbProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}
