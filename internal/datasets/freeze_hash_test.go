package datasets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/export"
)

// Frozen from the same 2,500 pairs (fixed ids, fixed creation times) by
// the freeze as it was before it wrote a version's items in key order: the
// version's content hash, and sha256 over its items' rows (split, content
// sha, source id, content) in key order. A freeze that writes otherwise
// must still produce these.
const (
	frozenHashGolden  = "904a591f1eb6476b066a06f6ff9305ad3b85d5d931763ef8c0f1507137b1f4c8"
	frozenItemsGolden = "4650e94c85d8e44e72540dce830d1d5ca41cfa73d7bea21917da78c75e149714"
)

func TestFreezeHashUnchanged(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "golden", "Golden")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rows := make([][]any, 0, 2500)
	for i := range 2500 {
		id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "golden pair %d", i))
		query := fmt.Sprintf("How do I rotate the API key of project %d?", i)
		prompt, _ := json.Marshal([]export.Message{{Role: "user", Content: query}})
		chosen := fmt.Sprintf("Open Project %d > Settings > Keys and choose Rotate; the old key works for 24 hours.", i)
		rejected := fmt.Sprintf("Delete project %d and make it again.", i)
		sum := sha256.Sum256([]byte(chosen + rejected))
		rows = append(rows, []any{id, org.ID, prompt, query, chosen, rejected, "manual", sum[:], at.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"preference_pairs"}, []string{"id", "org_id", "prompt", "query", "chosen_response",
		"rejected_response", "method", "content_hash", "created_at"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	svc := datasets.New(pool, nil, nil, nil)
	d, err := svc.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeDPO,
		Settings: datasets.Settings{Name: "golden", ValidationPercent: 10, SplitSeed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO training_dataset_members (dataset_id, org_id, pair_id) SELECT $1, org_id, id FROM preference_pairs WHERE org_id = $2`, d.ID, org.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	ver, err := svc.Freeze(ctx, audit.System, org.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	items, err := pool.Query(ctx, `SELECT split, content_sha, source_id, content::text FROM dataset_version_items WHERE version_id = $1
		ORDER BY split, content_sha, source_id`, ver.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n := 0
	for items.Next() {
		var split, content string
		var sha []byte
		var source uuid.UUID
		if err := items.Scan(&split, &sha, &source, &content); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %x %s %s\n", split, sha, source, content)
		n++
	}
	if err := items.Err(); err != nil {
		t.Fatal(err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if n != 2500 || ver.ItemCount != 2500 || ver.TrainCount != 2250 {
		t.Errorf("froze %d items (%d rows, %d to train), want 2500 and 2250", ver.ItemCount, n, ver.TrainCount)
	}
	if ver.ContentHash != frozenHashGolden {
		t.Errorf("content hash %s, frozen before %s", ver.ContentHash, frozenHashGolden)
	}
	if digest != frozenItemsGolden {
		t.Errorf("items' digest %s, frozen before %s", digest, frozenItemsGolden)
	}
}
