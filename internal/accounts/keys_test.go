package accounts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
)

func TestKeyRole(t *testing.T) {
	owner := func(r db.UserRole) db.NullUserRole { return db.NullUserRole{UserRole: r, Valid: true} }
	for _, tc := range []struct {
		name        string
		own         db.UserRole
		owner       db.NullUserRole
		deactivated bool
		want        auth.Role
		suspended   bool
	}{
		{"no creator: its own role", db.UserRoleAdmin, db.NullUserRole{}, false, auth.Admin, false},
		{"creator above the key", db.UserRoleCurator, owner(db.UserRoleAdmin), false, auth.Curator, false},
		{"creator equal to the key", db.UserRoleAdmin, owner(db.UserRoleAdmin), false, auth.Admin, false},
		{"creator demoted below the key", db.UserRoleAdmin, owner(db.UserRoleViewer), false, auth.Viewer, false},
		{"creator deactivated", db.UserRoleViewer, owner(db.UserRoleAdmin), true, "", true},
	} {
		role, suspended := accounts.KeyRole(tc.own, tc.owner, tc.deactivated)
		if role != tc.want || suspended != tc.suspended {
			t.Errorf("%s: %q suspended=%v; want %q suspended=%v", tc.name, role, suspended, tc.want, tc.suspended)
		}
	}
}

// clock is a settable time for a Service.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// Two servers on one database: deactivating a key's creator on one
// suspends the key there at once and on the other once its cached check
// runs out, within the documented five seconds; reactivating restores it.
func TestKeySuspensionReachesOtherServersWithinTheCacheTime(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	here, there := accounts.New(pool, accounts.DefaultSessionTTL), accounts.New(pool, accounts.DefaultSessionTTL)
	clk := &clock{now: time.Now()}
	there.Now = clk.Now

	org, err := here.EnsureOrg(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := here.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "root@acme.test", Role: "admin", Password: "a-long-password-1"}); err != nil {
		t.Fatal(err)
	}
	boss, err := here.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "boss@acme.test", Role: "admin", Password: "a-long-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := here.CreateAPIKey(ctx, audit.Actor{Kind: "user", ID: boss.ID, Label: boss.Email}, org.ID, accounts.NewKey{Name: "k", Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*accounts.Service{here, there} {
		if k, err := s.KeyCaller(ctx, secret); err != nil || k.Role != auth.Admin {
			t.Fatalf("before: %+v %v", k, err)
		}
	}

	if _, err := here.SetActive(ctx, audit.System, org.ID, boss.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := here.KeyCaller(ctx, secret); !errors.Is(err, accounts.ErrKeySuspended) {
		t.Errorf("on the server that deactivated the creator: %v; want suspended at once", err)
	}
	clk.now = clk.now.Add(6 * time.Second)
	if _, err := there.KeyCaller(ctx, secret); !errors.Is(err, accounts.ErrKeySuspended) {
		t.Errorf("on another server after the cache time: %v; want suspended", err)
	}

	if _, err := here.SetActive(ctx, audit.System, org.ID, boss.ID, true); err != nil {
		t.Fatal(err)
	}
	if k, err := here.KeyCaller(ctx, secret); err != nil || k.Role != auth.Admin {
		t.Errorf("after reactivation: %+v %v; want the key back as admin", k, err)
	}
	if _, err := here.ChangeRole(ctx, audit.System, org.ID, boss.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if k, err := here.KeyCaller(ctx, secret); err != nil || k.Role != auth.Viewer {
		t.Errorf("after the creator's demotion: %+v %v; want it to act as viewer", k, err)
	}
}

// countingTracer counts the statements each sqlc query name starts.
type countingTracer struct {
	mu    sync.Mutex
	count map[string]int
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	name, _, _ := strings.Cut(strings.TrimPrefix(d.SQL, "-- name: "), " ")
	c.mu.Lock()
	c.count[name]++
	c.mu.Unlock()
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) of(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[name]
}

// When a key's cached check runs out under load, every request then in
// flight with it waits for one lookup (they used to send one each, and
// queued behind each other for the pool's few connections), and the
// minute's last-use write is sent once. The lookup is held back with a
// lock on the table until all 32 requests are waiting; a wrong secret
// with the same prefix is still refused.
func TestKeyLookupOncePerExpiry(t *testing.T) {
	ctx := context.Background()
	_, url := pgtest.NewDBURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	tr := &countingTracer{count: map[string]int{}}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc := accounts.New(pool, accounts.DefaultSessionTTL)
	clk := &clock{now: time.Now()}
	svc.Now = clk.Now
	org, err := svc.EnsureOrg(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := svc.CreateAPIKey(ctx, audit.System, org.ID, accounts.NewKey{Name: "k", Role: "curator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.KeyCaller(ctx, secret); err != nil {
		t.Fatal(err)
	}
	lookups, touches := tr.of("APIKeyGetCaller"), tr.of("APIKeyUpdateLastUsed")
	if lookups != 1 || touches != 1 {
		t.Fatalf("first use: %d lookups, %d last-use writes; want 1 and 1", lookups, touches)
	}

	clk.now = clk.now.Add(2 * time.Minute) // the check and the last use are both old
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	held, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, "LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var started, done sync.WaitGroup
	errs := make([]error, n+1)
	for i := range n + 1 {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			bearer := secret
			if i == n {
				bearer = secret[:len(secret)-4] + "0000"
			}
			_, errs[i] = svc.KeyCaller(ctx, bearer)
		}()
	}
	started.Wait()
	// The lookup waits on the lock; give every request time to reach it.
	waitFor(t, func() bool {
		var waiting int
		_ = lock.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&waiting)
		return waiting > 0
	})
	time.Sleep(200 * time.Millisecond)
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	for i, err := range errs[:n] {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if !errors.Is(errs[n], accounts.ErrBadKey) {
		t.Errorf("a wrong secret with the key's prefix: %v, want refused", errs[n])
	}
	if got := tr.of("APIKeyGetCaller") - lookups; got != 1 {
		t.Errorf("%d lookups for %d requests after the check ran out, want 1", got, n+1)
	}
	if got := tr.of("APIKeyUpdateLastUsed") - touches; got != 1 {
		t.Errorf("%d last-use writes for %d requests a minute on, want 1", got, n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
