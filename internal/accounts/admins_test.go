package accounts_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// Two admins demoting each other at once, round after round: each time one
// demotion goes through and the other is refused as taking the last admin,
// so the organisation always keeps one.
func TestLastAdminRace(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	var admins []uuid.UUID
	for _, email := range []string{"ada@acme.test", "bob@acme.test"} {
		u, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: email, Role: "admin", Password: "a-long-password-1"})
		if err != nil {
			t.Fatal(err)
		}
		admins = append(admins, u.ID)
	}
	for round := range 10 {
		results := make([]error, len(admins))
		var wg sync.WaitGroup
		for i, id := range admins {
			wg.Go(func() { _, results[i] = acc.ChangeRole(ctx, audit.System, org.ID, id, "viewer") })
		}
		wg.Wait()
		done := 0
		for _, err := range results {
			var conflict *errs.Conflict
			switch {
			case err == nil:
				done++
			case !errors.As(err, &conflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE org_id = $1 AND role = 'admin' AND active`, org.ID).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if done != 1 || left != 1 {
			t.Fatalf("round %d: %d demotions went through and %d admins are left; want 1 and 1", round, done, left)
		}
		for _, id := range admins {
			if _, err := acc.ChangeRole(ctx, audit.System, org.ID, id, "admin"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
