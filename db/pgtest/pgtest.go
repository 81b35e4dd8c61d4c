// Package pgtest gives each test a fresh, fully migrated database of its own,
// cloned from a template that is migrated once per schema.
//
// With TEST_DATABASE_URL set (make test sets it) the databases are made on
// that server; otherwise the test binary starts a private cluster in a
// temporary directory and stops it when the tests end. A package that uses
// pgtest runs its tests through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/devdb"
)

var (
	serverURL string // the maintenance database on the test server

	templateOnce sync.Once
	templateName string
	templateErr  error
)

// Main runs the package's tests against a database server, starting a
// private one when TEST_DATABASE_URL is not set.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		serverURL = u
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "curate-pgtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cluster, err := devdb.Open(ctx, dir, devdb.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: a test database is needed:", err)
		return 1
	}
	defer cluster.Close(ctx)
	serverURL = cluster.AdminURL()
	return m.Run()
}

// NewDB creates a fresh migrated database for t, dropped when t ends, and
// returns a pool connected to it.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := NewDBURL(t)
	return pool
}

// NewDBURL is NewDB that also returns the database's connection string, for
// code under test that opens its own connections.
func NewDBURL(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	if serverURL == "" {
		t.Fatal("pgtest: no database server; call pgtest.Main from TestMain")
	}
	ctx := context.Background()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx) })
	if templateErr != nil {
		t.Fatalf("pgtest: template: %v", templateErr)
	}
	name := "test_" + randomHex(8)
	admin := connect(ctx, t, serverURL)
	defer admin.Close(ctx)
	if err := createFromTemplate(ctx, admin, name, templateName); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	dbURL := withDatabase(serverURL, name)
	pcfg, err := db.PoolConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return pool, dbURL
}

// ensureTemplate makes, once per schema, a migrated template database. Test
// binaries of several packages run at once, so making it is serialised with
// an advisory lock and the template is only marked ready when complete.
func ensureTemplate(ctx context.Context) (string, error) {
	fp, err := db.SchemaFingerprint()
	if err != nil {
		return "", err
	}
	name := "curate_template_" + fp
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(71530042)"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(71530042)") //nolint:errcheck

	var ready bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return name, nil
	case err == nil: // left half-made by an interrupted run
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			return "", err
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(serverURL, name))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", err
	}
	return name, nil
}

func createFromTemplate(ctx context.Context, conn *pgx.Conn, name, template string) error {
	var err error
	for range 20 {
		// Clones of one template can collide briefly ("source database is
		// being accessed by other users"); wait and try again.
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+template)
		if err == nil || !strings.Contains(err.Error(), "being accessed by other users") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func connect(ctx context.Context, t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	return conn
}

// withDatabase swaps the database name in a connection string, either a URL
// or a keyword/value string.
func withDatabase(connURL, name string) string {
	u, err := url.Parse(connURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return connURL + " dbname=" + name
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("dbname")
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Tables lists the tables of the public schema, River's included.
func Tables(t testing.TB, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// TablesContaining lists the tables of the public schema with a row whose
// text form holds s, case-insensitively (River's job table, with its
// recorded errors, included): a test's way of showing that something, such
// as what a remote server answered, was stored nowhere.
func TablesContaining(t testing.TB, pool *pgxpool.Pool, s string) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	for _, name := range Tables(t, pool) {
		var n int
		q := "SELECT count(*) FROM " + pgx.Identifier{name}.Sanitize() + " AS r WHERE strpos(lower(r::text), lower($1)) > 0"
		if err := pool.QueryRow(ctx, q, s).Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n > 0 {
			found = append(found, name)
		}
	}
	return found
}
