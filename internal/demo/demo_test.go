package demo_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/internal/demo/demotest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The demo feedback is stored on the first start and not again: 16
// scenarios asked two ways with a good and a weak answer each (64 items)
// plus 6 re-sent copies, which duplicate detection links to their first.
func TestSeedFeedbackOnce(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded)
	if err != nil {
		t.Fatal(err)
	}
	if n != 70 || demo.FeedbackCount != 70 {
		t.Fatalf("stored %d (FeedbackCount %d), want 70", n, demo.FeedbackCount)
	}
	again, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := demotest.Seeder(pool).SeedFeedback(ctx, again); err != nil || n != 0 {
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

// The first start freezes one version holding every approved and
// corrected demo item, valid for OpenAI's chat format so the launch form
// offers it; a second start makes none.
func TestSeedDatasetOnce(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	v, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	var eligible int32
	err = pool.QueryRow(ctx, `SELECT count(*) FROM feedback WHERE org_id = $1 AND status IN ('approved', 'corrected')`,
		seeded.OrgID).Scan(&eligible)
	if err != nil {
		t.Fatal(err)
	}
	// OpenAI takes no fewer than 10 training examples.
	if v.Number != 1 || v.Kind != datasets.KindSFT || eligible < 10 || v.ItemCount != eligible ||
		v.TrainCount+v.ValidationCount != eligible || v.ValidationCount == 0 {
		t.Fatalf("version %d kind %s items %d (train %d, validation %d); want v1 of sft holding all %d approved or corrected items",
			v.Number, v.Kind, v.ItemCount, v.TrainCount, v.ValidationCount, eligible)
	}
	src := &datasets.FineTuneSource{Service: datasets.New(pool, nil, nil, nil)}
	got, err := src.Version(ctx, seeded.OrgID, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Valid || got.Label != demo.DatasetName+" v1" {
		t.Fatalf("fine-tuning sees %+v; want a valid %q v1", got, demo.DatasetName)
	}

	again, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil || again.ID != uuid.Nil {
		t.Fatalf("second start made version %v (%v), want none", again.ID, err)
	}
	var versions int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM dataset_versions WHERE org_id = $1`, seeded.OrgID).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != 1 {
		t.Fatalf("%d versions after two starts, want 1", versions)
	}
}

// A demo dataset an interrupted start left as a draft is filled and frozen
// on the next; once that dataset is archived, a start makes none.
func TestSeedDatasetResumesOrLeavesAlone(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	svc := datasets.New(pool, nil, nil, nil)
	draft, err := svc.Create(ctx, audit.System, seeded.OrgID, datasets.NewDataset{Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{Name: demo.DatasetName}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil || v.DatasetID != draft.ID || v.ItemCount == 0 {
		t.Fatalf("resumed version %+v (%v); want one of dataset %s with items", v, err, draft.ID)
	}

	if _, err := svc.Transition(ctx, audit.System, seeded.OrgID, draft.ID, datasets.StatusArchived); err != nil {
		t.Fatal(err)
	}
	if v, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID); err != nil || v.ID != uuid.Nil {
		t.Fatalf("with only an archived dataset made version %v (%v), want none", v.ID, err)
	}
}
