// Package webtest starts a real Curate server on a fresh database for tests
// (and, with Another, more servers on the same database, as several
// machines would run) and gives them HTTP clients that sign in the way a
// browser does.
package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web"
)

// Password is every test user's password.
const Password = "test-password-123"

// Server is a running App.
type Server struct {
	URL string
	// MetricsURL is where the server answers /metrics, apart from URL.
	MetricsURL string
	App        *web.App
	Pool       *pgxpool.Pool
	t          testing.TB
	stop       func()
}

// Options change the server's configuration before it starts.
type Options struct {
	Workers   int
	Configure func(*config.Config)
	// Pool, when set, is another server's database: the new server joins
	// it, as a second web server of one deployment does.
	Pool *pgxpool.Pool
}

// Keys every test server uses, as every server of one deployment must.
const (
	SessionKey = "test-session-key-0123456789abcdef0123456789"
	SecretKey  = "test-secret-key-0123456789abcdef012345678"
)

// New starts a server for t, stopped when t ends: on a fresh database, or
// on opts.Pool when set (another server's database, as a second web server
// of one deployment).
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	pool := opts.Pool
	if pool == nil {
		pool = pgtest.NewDB(t)
	}
	return start(t, pool, opts, nil)
}

// Another starts a second server on s's database, as another machine of the
// same deployment: its own data directory and the workers opts asks for,
// with the keys every test server shares and s's CURATE_BLOB_URL. With s's
// default blob store, a directory in s's data directory, the two share no
// bucket: give s a shared one (Configure: cfg.BlobURL = "file://"+dir).
// opts.Configure runs last.
func (s *Server) Another(opts Options) *Server {
	s.t.Helper()
	blobURL := s.App.Config.BlobURL
	return start(s.t, s.Pool, opts, func(cfg *config.Config) { cfg.BlobURL = blobURL })
}

// start starts a server on pool; shared, when set, sets what the server
// shares with another before opts.Configure runs.
func start(t testing.TB, pool *pgxpool.Pool, opts Options, shared func(*config.Config)) *Server {
	t.Helper()
	// serve's defaults, changed only where a test server must differ: any
	// free ports, a private data directory, the shared test keys, quiet
	// logs, the workers the test asks for, a quick stop, API keys that
	// tests hammering one key do not exhaust, and outbound calls allowed to
	// loopback, where the tests' fake Langfuse and webhook receivers listen
	// (a test of the refusals sets OutboundAllow back to "").
	cfg := config.Defaults()
	cfg.Addr, cfg.MetricsAddr, cfg.DataDir, cfg.LogLevel = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), "warn"
	cfg.SessionKey, cfg.SecretKey = SessionKey, SecretKey
	cfg.Workers, cfg.ShutdownTimeout = opts.Workers, 5*time.Second
	cfg.APIRate, cfg.APIBurst = 1000, 1000
	if shared != nil {
		shared(&cfg)
	}
	cfg.OutboundAllow = "127.0.0.0/8,::1"
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app, err := web.New(cfg, pool, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{App: app, Pool: pool, t: t}
	maddr, err := app.ListenMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if maddr != nil {
		srv.MetricsURL = "http://" + maddr.String()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	srv.URL = "http://" + ln.Addr().String()
	if cfg.TrainerAPIURL == "" {
		// Local trainers reach this server where it listens.
		app.FineTune.SetTrainerAPI(srv.URL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, nil) }()
	var once sync.Once
	srv.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		})
	}
	t.Cleanup(srv.stop)
	return srv
}

// Stop shuts the server down now, as its test's end would.
func (s *Server) Stop() { s.stop() }

// Org creates an organisation.
func (s *Server) Org(slug string) uuid.UUID {
	s.t.Helper()
	org, err := s.App.Accounts.EnsureOrg(context.Background(), slug, strings.ToUpper(slug[:1])+slug[1:])
	if err != nil {
		s.t.Fatal(err)
	}
	return org.ID
}

// User creates a user with Password in the organisation.
func (s *Server) User(orgID uuid.UUID, email, role string) uuid.UUID {
	s.t.Helper()
	u, err := s.App.Accounts.CreateUser(context.Background(), audit.System, orgID, accounts.NewUser{Email: email, Role: role, Password: Password})
	if err != nil {
		s.t.Fatal(err)
	}
	return u.ID
}

// APIKey creates a key and returns its secret.
func (s *Server) APIKey(orgID uuid.UUID, name, role string) string {
	s.t.Helper()
	_, secret, err := s.App.Accounts.CreateAPIKey(context.Background(), audit.System, orgID, accounts.NewKey{Name: name, Role: role})
	if err != nil {
		s.t.Fatal(err)
	}
	return secret
}

// Client is a cookie-keeping HTTP client for one server, like a browser tab.
type Client struct {
	HTTP *http.Client
	srv  *Server
	csrf string
}

// Client returns a new signed-out client that does not follow redirects.
func (s *Server) Client() *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{srv: s, HTTP: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// SignedIn returns a client signed in as email.
func (s *Server) SignedIn(email string) *Client {
	s.t.Helper()
	c := s.Client()
	res := c.PostForm("/login", url.Values{"email": {email}, "password": {Password}})
	if res.Status != http.StatusSeeOther {
		s.t.Fatalf("sign in as %s: status %d: %s", email, res.Status, res.Body)
	}
	return c
}

// Response is a read response.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Body), v); err != nil {
		t.Fatalf("decoding %q: %v", r.Body, err)
	}
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// Get fetches a path and remembers the page's CSRF token.
func (c *Client) Get(path string) Response {
	return c.Do(http.MethodGet, path, nil, nil)
}

// PostForm submits a form the way the page's form would, with its CSRF token.
func (c *Client) PostForm(path string, form url.Values) Response {
	if c.csrf == "" {
		c.Get("/login")
	}
	form = cloneValues(form)
	if form.Get("_csrf") == "" {
		form.Set("_csrf", c.csrf)
	}
	return c.PostFormRaw(path, form)
}

// PostFormRaw submits a form exactly as given (no CSRF token added).
func (c *Client) PostFormRaw(path string, form url.Values) Response {
	return c.Do(http.MethodPost, path, strings.NewReader(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
}

// Do sends any request.
func (c *Client) Do(method, path string, body io.Reader, header http.Header) Response {
	c.srv.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, body)
	if err != nil {
		c.srv.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		c.srv.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.srv.t.Fatal(err)
	}
	if m := csrfRE.FindSubmatch(b); m != nil {
		c.csrf = string(m[1])
	}
	// The token a page carries is its CSRF cookie's; a new cookie (signing
	// in rotates it) is the token from now on, as in a browser, whose next
	// page carries it.
	for _, ck := range res.Cookies() {
		if ck.Name == "curate_csrf" && ck.Value != "" {
			c.csrf = ck.Value
		}
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// API calls /api with a bearer key and an optional JSON body.
func (s *Server) API(key, method, path string, body any) Response {
	s.t.Helper()
	var r io.Reader
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = strings.NewReader(string(b))
		h.Set("Content-Type", "application/json")
	}
	return s.Client().Do(method, path, r, h)
}

// CSRF is the token of the last page this client fetched.
func (c *Client) CSRF() string { return c.csrf }

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Must fails the test unless the response has the status.
func (r Response) Must(t testing.TB, status int) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body: %s", r.Status, status, truncate(r.Body, 2000))
	}
	return r
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}
