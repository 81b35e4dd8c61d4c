package datasets_test

import (
	"context"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/demo/demotest"
)

// Fine-tuning reads a frozen version's training prompts by split tag: the
// RLAIF red-team share and the red-team marks of a run's samples. Only
// training items count; each tagged one gives its last user message.
func TestFineTuneSourceTagged(t *testing.T) {
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
	// Two training items and one validation item are red-team prompts.
	if _, err := pool.Exec(ctx, `UPDATE feedback SET tags = tags || '{red_team}' WHERE id IN (
		(SELECT source_id FROM dataset_version_items WHERE version_id = $1 AND split = 'train' ORDER BY content_sha LIMIT 2)
		UNION (SELECT source_id FROM dataset_version_items WHERE version_id = $1 AND split = 'validation' LIMIT 1))`, version.ID); err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, err := pool.Query(ctx, `SELECT f.query FROM dataset_version_items i JOIN feedback f ON f.id = i.source_id
		WHERE i.version_id = $1 AND i.split = 'train' AND 'red_team' = ANY(f.tags) ORDER BY i.content_sha, i.source_id`, version.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		want = append(want, q)
	}
	rows.Close()
	src := &datasets.FineTuneSource{Service: datasets.New(pool, nil, nil, nil)}
	prompts, total, err := src.Tagged(ctx, seeded.OrgID, version.ID, "red_team")
	if err != nil {
		t.Fatal(err)
	}
	if total != int(version.TrainCount) || len(prompts) != 2 || len(want) != 2 || prompts[0] != want[0] || prompts[1] != want[1] {
		t.Errorf("tagged %q of %d training items, want %q of %d", prompts, total, want, version.TrainCount)
	}
	if prompts, _, err := src.Tagged(ctx, seeded.OrgID, version.ID, "nothing"); err != nil || len(prompts) != 0 {
		t.Errorf("an unused tag: %q %v", prompts, err)
	}
}
