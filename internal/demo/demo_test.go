package demo_test

import (
	"context"
	"testing"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/demo"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The demo feedback is stored on the first start and not again: 16
// scenarios asked two ways with a good and a weak answer each (64 items)
// plus 6 re-sent copies, which duplicate detection links to their first.
func TestSeedFeedbackOnce(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demo.Ensure(ctx, accounts.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	n, err := demo.SeedFeedback(ctx, pool, seeded)
	if err != nil {
		t.Fatal(err)
	}
	if n != 70 || demo.FeedbackCount != 70 {
		t.Fatalf("stored %d (FeedbackCount %d), want 70", n, demo.FeedbackCount)
	}
	again, err := demo.Ensure(ctx, accounts.New(pool))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := demo.SeedFeedback(ctx, pool, again); err != nil || n != 0 {
		t.Fatalf("second start stored %d (%v), want 0", n, err)
	}

	var total, dups, types, models, pii, safetyPending, reviewed, reviews int
	err = pool.QueryRow(ctx, `SELECT count(*), count(duplicate_of), count(DISTINCT feedback_type), count(DISTINCT model),
		count(*) FILTER (WHERE pii_kinds <> '{}'), count(*) FILTER (WHERE 'safety' = ANY(tags) AND status = 'pending'),
		count(*) FILTER (WHERE status <> 'pending'), (SELECT count(*) FROM feedback_reviews)
		FROM feedback WHERE org_id = $1`, seeded.OrgID).Scan(&total, &dups, &types, &models, &pii, &safetyPending, &reviewed, &reviews)
	if err != nil {
		t.Fatal(err)
	}
	// PII: three scenarios put an address or phone number in their second
	// phrasing, asked by two items each, and one re-sent copy repeats one.
	if total != 70 || dups != 6 || types != 5 || models != 3 || pii != 7 || safetyPending != 4 {
		t.Errorf("total %d dups %d types %d models %d pii %d safety %d; want 70 6 5 3 7 4", total, dups, types, models, pii, safetyPending)
	}
	if reviewed == 0 || reviewed != reviews {
		t.Errorf("%d reviewed items and %d review rows; want some, one each", reviewed, reviews)
	}
	open, err := db.New(pool).AlertListOpen(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].DedupKey != "safety" || open[0].Message != "4 safety reports in the last 24 hours await review." {
		t.Errorf("open alerts after seeding: %+v", open)
	}
}
