// Package devdb runs a private PostgreSQL cluster from the machine's own
// PostgreSQL binaries, so Curate starts with no database set up beforehand.
//
// The cluster lives in <data dir>/postgres and listens only on a Unix socket in a
// directory only its owner can enter. Every command pointed at the same data
// directory shares the one cluster: if it is running it is used, otherwise it
// is started and, unless asked to keep it, stopped again by whoever started it.
package devdb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// Role and database created in a new cluster.
	roleName = "curate"
	dbName   = "curate"
	port     = 5432
)

// ErrNoBinaries says that no PostgreSQL server programs were found.
var ErrNoBinaries = errors.New(`no PostgreSQL server programs (initdb, pg_ctl, postgres) were found.
Install them:
  Debian/Ubuntu:  apt-get install postgresql
  macOS:          brew install postgresql
or point Curate at an existing server:
  export DATABASE_URL=postgres://user:password@host:5432/dbname`)

// Options tune a cluster.
type Options struct {
	// Durable false turns off fsync: right for throwaway test clusters only.
	Durable bool
	Log     *slog.Logger
}

// Cluster is a private PostgreSQL cluster in a data directory.
type Cluster struct {
	dataDir string
	base    string // holds data/, run/ and postgres.log; owned by the server's user
	pgData  string
	sockDir string
	binDir  string
	opts    Options
	owner   *user.User // non-nil when the server runs as another user (we are root)
	started bool       // this process started it, so Stop stops it
}

// Open makes sure the cluster in dataDir exists and is running, creating and
// starting it when needed.
func Open(ctx context.Context, dataDir string, opts Options) (*Cluster, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c, err := newCluster(dataDir, opts)
	if err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(c.dataDir, "postgres.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	if _, err := os.Stat(filepath.Join(c.pgData, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if c.running(ctx) {
		return c, c.ensureDatabase(ctx)
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	c.started = true
	return c, c.ensureDatabase(ctx)
}

// Attach describes the cluster in dataDir without starting anything.
func Attach(dataDir string) (*Cluster, error) {
	return newCluster(dataDir, Options{Log: slog.New(slog.DiscardHandler)})
}

func newCluster(dataDir string, opts Options) (*Cluster, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dataDir: abs, base: filepath.Join(abs, "postgres"), binDir: bin, opts: opts}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres system user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL must run as an unprivileged user, and no user %q exists: create one (useradd --system postgres) or set DATABASE_URL", "postgres")
		}
		c.owner = u
		if traversable(filepath.Dir(abs), u) {
			// The server's user must pass through the data directory to
			// reach its own folder in it.
			if err := os.MkdirAll(abs, 0o711); err != nil {
				return nil, err
			}
			if err := os.Chmod(abs, 0o711); err != nil {
				return nil, err
			}
		} else {
			// The postgres user cannot reach a data directory under, say,
			// /root; keep the cluster itself where it can, keyed by the data dir.
			c.base = filepath.Join(os.TempDir(), "curate-pg-"+shortHash(abs))
		}
	}
	c.pgData = filepath.Join(c.base, "data")
	c.sockDir = filepath.Join(c.base, "run")
	// A Unix socket path must fit in 107 bytes, ".s.PGSQL.5432" included.
	if len(c.sockDir) > 90 {
		c.sockDir = filepath.Join(os.TempDir(), "curate-sock-"+shortHash(abs))
	}
	return c, nil
}

// URL is the connection string for the cluster's Curate database.
func (c *Cluster) URL() string {
	q := url.Values{}
	q.Set("host", c.sockDir)
	q.Set("port", strconv.Itoa(port))
	q.Set("sslmode", "disable")
	return fmt.Sprintf("postgres://%s@/%s?%s", roleName, dbName, q.Encode())
}

// AdminURL connects to the maintenance database, for creating databases.
func (c *Cluster) AdminURL() string {
	return strings.Replace(c.URL(), "@/"+dbName+"?", "@/postgres?", 1)
}

// Keep leaves the cluster running after this process ends.
func (c *Cluster) Keep() { c.started = false }

// Close stops the cluster if this process started it.
func (c *Cluster) Close(ctx context.Context) error {
	if !c.started {
		return nil
	}
	c.started = false
	return c.Stop(ctx)
}

// Stop stops the cluster whoever started it.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.running(ctx) {
		return nil
	}
	c.opts.Log.Info("stopping postgres", "data", c.pgData)
	return c.pgctl(ctx, "stop", "-D", c.pgData, "-m", "fast", "-w", "-t", "60")
}

// Running reports whether the cluster's server is up.
func (c *Cluster) Running(ctx context.Context) bool { return c.running(ctx) }

func (c *Cluster) running(ctx context.Context) bool {
	if _, err := os.Stat(filepath.Join(c.pgData, "postmaster.pid")); err != nil {
		return false
	}
	return c.pgctl(ctx, "status", "-D", c.pgData) == nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	c.opts.Log.Info("creating postgres cluster", "data", c.pgData)
	for _, dir := range []string{c.base, c.pgData} {
		if err := c.mkdirOwned(dir); err != nil {
			return err
		}
	}
	return c.exec(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", c.pgData, "-U", roleName, "--auth=trust", "--encoding=UTF8",
		"--locale=C.UTF-8", "--no-instructions")
}

func (c *Cluster) start(ctx context.Context) error {
	for _, dir := range []string{c.base, c.sockDir} {
		if err := c.mkdirOwned(dir); err != nil {
			return err
		}
	}
	opts := []string{
		"-c listen_addresses=''",
		"-c unix_socket_directories='" + c.sockDir + "'",
		"-c port=" + strconv.Itoa(port),
		"-c max_connections=200",
	}
	if !c.opts.Durable {
		opts = append(opts, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
	}
	logFile := filepath.Join(c.base, "postgres.log")
	c.opts.Log.Info("starting postgres", "data", c.pgData, "log", logFile)
	err := c.pgctl(ctx, "start", "-D", c.pgData, "-l", logFile, "-w", "-t", "60", "-o", strings.Join(opts, " "))
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("starting postgres: %w\n%s", err, tail)
	}
	return nil
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := connectRetry(ctx, c.AdminURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dbName).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+dbName)
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "42P04" { // created meanwhile by another process
		return nil
	}
	return err
}

// connectRetry waits for a just-started server to accept connections.
func connectRetry(ctx context.Context, connURL string) (*pgx.Conn, error) {
	for {
		conn, err := pgx.Connect(ctx, connURL)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres does not accept connections: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) pgctl(ctx context.Context, args ...string) error {
	return c.exec(ctx, filepath.Join(c.binDir, "pg_ctl"), args...)
}

// exec runs a PostgreSQL program, as the cluster's owner when we are root.
func (c *Cluster) exec(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The server outlives this process when asked to: keep it out of our
	// process group so a terminal's Ctrl-C reaches us, not it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.owner != nil {
		uid, _ := strconv.Atoi(c.owner.Uid)
		gid, _ := strconv.Atoi(c.owner.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "HOME="+c.owner.HomeDir)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(prog), args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (c *Cluster) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if c.owner == nil {
		return nil
	}
	uid, _ := strconv.Atoi(c.owner.Uid)
	gid, _ := strconv.Atoi(c.owner.Gid)
	return os.Chown(dir, uid, gid)
}

// findBinDir finds a directory holding initdb, pg_ctl and postgres.
func findBinDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versioned, func(i, j int) bool { return pgMajor(versioned[i]) > pgMajor(versioned[j]) })
	candidates = append(candidates, versioned...)
	candidates = append(candidates, "/usr/local/pgsql/bin", "/opt/homebrew/bin", "/usr/local/bin")
	for _, dir := range candidates {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasServer(dir string) bool {
	for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// traversable reports whether u can reach path through every existing ancestor.
func traversable(path string, u *user.User) bool {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for dir := path; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return false
			}
			mode := fi.Mode().Perm()
			switch {
			case int(st.Uid) == uid:
				if mode&0o100 == 0 {
					return false
				}
			case int(st.Gid) == gid:
				if mode&0o010 == 0 {
					return false
				}
			case mode&0o001 == 0:
				return false
			}
		}
		if dir == filepath.Dir(dir) {
			return true
		}
	}
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:12]
}

// lockFile takes an exclusive lock on path, so only one process creates or
// starts the cluster at a time.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
