package routing

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
)

// The cap's check and the assignment race as they would between rules
// and processes: forty different items offered to one curator at the same
// moment, with a cap of 5, make exactly five assignments.
func TestAssignCapRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A connection per item, so the forty transactions do overlap.
	_, dbURL := pgtest.NewDBURL(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	u, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "ann@acme.test", Role: "curator", Password: "test-password-123"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{Pool: pool}
	rule, err := s.CreateRule(ctx, audit.System, org.ID, NewRule{Name: "all", Mode: RoundRobin, Cap: 5, Curators: []Curator{{UserID: u.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.New(pool).RoutingRuleGet(ctx, db.RoutingRuleGetParams{OrgID: org.ID, ID: rule.ID})
	if err != nil {
		t.Fatal(err)
	}
	fb := feedback.New(pool)
	var items []uuid.UUID
	for range 40 {
		row, _, err := fb.Ingest(ctx, org.ID, "api", feedback.Item{Query: "q " + uuid.NewString(), Response: "r", FeedbackType: "thumbs_down"})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, row.ID)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		assigned int
	)
	start := make(chan struct{})
	for _, id := range items {
		wg.Go(func() {
			<-start
			out, err := s.assign(ctx, r, id, u.ID, "ann@acme.test")
			if err != nil {
				t.Error(err)
				return
			}
			if out == assignedNow {
				mu.Lock()
				assigned++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	var held int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM feedback WHERE assignee_id = $1", u.ID).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if assigned != 5 || held != 5 {
		t.Errorf("%d assignments reported, %d held; the cap is 5", assigned, held)
	}
}
