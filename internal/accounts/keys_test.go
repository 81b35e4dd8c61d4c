package accounts_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
