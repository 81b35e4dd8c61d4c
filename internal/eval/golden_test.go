package eval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/demo/demotest"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A frozen demo version becomes a golden set: its items read as prompts
// with the curator's answers as references, split by tag; another
// organisation can neither mark nor read it.
func TestGoldenSets(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := demotest.Seeder(pool).SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	var other uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('globex', 'Globex') RETURNING id").Scan(&other); err != nil {
		t.Fatal(err)
	}
	// Two of the version's items are red-team prompts.
	if _, err := pool.Exec(ctx, `UPDATE feedback SET tags = tags || '{red_team}' WHERE id IN (
		SELECT source_id FROM dataset_version_items WHERE version_id = $1 ORDER BY content_sha LIMIT 2)`, version.ID); err != nil {
		t.Fatal(err)
	}
	svc := eval.New(pool, eval.NewGates(pool), nil, nil)
	admin := audit.Actor{Kind: "system", Label: "ada@demo.test"}

	var inv *errs.Invalid
	if _, err := svc.Mark(ctx, admin, seeded.OrgID, version.ID, " ", []string{"Red Team"}); !errors.As(err, &inv) || len(inv.Errors) != 2 {
		t.Errorf("an empty name and a bad tag: %v", err)
	}
	if _, err := svc.Mark(ctx, admin, other, version.ID, "theirs", nil); !errors.As(err, &inv) || inv.ByField()["version_id"] == "" {
		t.Errorf("another organisation marks our version: %v", err)
	}
	g, err := svc.Mark(ctx, admin, seeded.OrgID, version.ID, "Support gold", eval.DefaultSplitTags)
	if err != nil {
		t.Fatal(err)
	}
	if g.Items != int(version.ItemCount) || g.DatasetName == "" || len(g.SplitTags) != 2 {
		t.Errorf("golden set %+v", g)
	}
	items, err := svc.Items(ctx, seeded.OrgID, version.ID, g.SplitTags)
	if err != nil {
		t.Fatal(err)
	}
	red := 0
	for _, it := range items {
		if it.Query == "" || it.Reference == "" || len(it.Messages) == 0 || it.Messages[len(it.Messages)-1].Role != "user" {
			t.Errorf("item %+v", it)
		}
		if it.Split == "red_team" {
			red++
		} else if it.Split != eval.SplitAll {
			t.Errorf("split %q", it.Split)
		}
	}
	if len(items) != int(version.ItemCount) || red != 2 {
		t.Errorf("%d items (want %d), %d red-team (want 2)", len(items), version.ItemCount, red)
	}
	if _, err := svc.Items(ctx, other, version.ID, nil); !errors.As(err, &inv) {
		t.Errorf("another organisation reads our items: %v", err)
	}
	if list, err := svc.GoldenSets(ctx, other); err != nil || len(list) != 0 {
		t.Errorf("another organisation lists %v (%v)", list, err)
	}
	if err := svc.Unmark(ctx, admin, seeded.OrgID, version.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Unmark(ctx, admin, seeded.OrgID, version.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unmarking twice: %v", err)
	}
}
