package datasets_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
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

// BenchmarkFreeze freezes five datasets of the same N preference pairs
// (CURATE_BENCH_ROWS, default 100000 so that it fits a loaded 2-core
// machine; the goal is stated at 1,000,000) and reports the median of the
// five freezes with the least and greatest, so a figure that moves shows
// as such. Beside each, in alternating rounds, its floor: Postgres
// alone copying the same members' rows into a new table in one statement
// (CREATE TABLE … AS SELECT over the same join), which is what any freeze
// of this database must at least do. The cluster's durability settings
// are logged with the figures, since they move both.
//
//	CURATE_BENCH_ROWS=1000000 go test -run '^$' -bench BenchmarkFreeze -benchtime 1x ./internal/datasets/
func BenchmarkFreeze(b *testing.B) {
	n := 100000
	if s := os.Getenv("CURATE_BENCH_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("CURATE_BENCH_ROWS=%q: want a positive number", s)
		}
	}
	const rounds = 5
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "bench", "Bench")
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, 0, n)
	for i := range n {
		query := fmt.Sprintf("How do I check the deployment status of service %d in the staging cluster before the release window closes?", i)
		prompt, _ := json.Marshal([]export.Message{{Role: "user", Content: query}})
		chosen := fmt.Sprintf("Open Deployments > Status and filter by service %d. The panel lists every rollout with its health checks; "+
			"a green tick means all replicas passed. If a check failed, open the rollout to see the failing pod's logs.", i)
		rejected := fmt.Sprintf("Click the deployments tab for service %d and look around.", i)
		sum := sha256.Sum256([]byte(chosen + rejected))
		rows = append(rows, []any{org.ID, prompt, query, chosen, rejected, "manual", sum[:]})
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"preference_pairs"},
		[]string{"org_id", "prompt", "query", "chosen_response", "rejected_response", "method", "content_hash"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	rows = nil
	svc := datasets.New(pool, nil, nil, nil)
	ids := make([]uuid.UUID, rounds)
	for r := range rounds {
		d, err := svc.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeDPO,
			Settings: datasets.Settings{Name: fmt.Sprintf("bench %d", r), ValidationPercent: 10, SplitSeed: int64(r + 1)}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO training_dataset_members (dataset_id, org_id, pair_id) SELECT $1, org_id, id FROM preference_pairs WHERE org_id = $2`, d.ID, org.ID); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
			b.Fatal(err)
		}
		ids[r] = d.ID
	}
	var settings string
	if err := pool.QueryRow(ctx, `SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level', 'shared_buffers', 'max_wal_size')`).Scan(&settings); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d pairs; cluster: %s", n, settings)

	var freezes, floors []float64
	b.ResetTimer()
	for r := range rounds {
		// At rest, as curated data is when someone freezes it.
		if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) preference_pairs, training_dataset_members, dataset_version_items`); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		ver, err := svc.Freeze(ctx, audit.System, org.ID, ids[r])
		if err != nil {
			b.Fatal(err)
		}
		freezes = append(freezes, time.Since(t0).Seconds())
		if ver.ItemCount != int32(n) {
			b.Fatalf("froze %d items, want %d", ver.ItemCount, n)
		}
		t0 = time.Now()
		if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE freeze_floor_%d AS SELECT p.id, p.prompt, p.chosen_response, p.rejected_response, p.content_hash
			FROM training_dataset_members m JOIN preference_pairs p ON p.id = m.pair_id WHERE m.dataset_id = $1`, r), ids[r]); err != nil {
			b.Fatal(err)
		}
		floors = append(floors, time.Since(t0).Seconds())
	}
	b.StopTimer()
	b.Logf("freezes %.1f s, floors %.1f s", freezes, floors)
	b.ReportMetric(float64(n), "rows")
	b.ReportMetric(middle(freezes), "freeze_median_s")
	b.ReportMetric(slices.Min(freezes), "freeze_min_s")
	b.ReportMetric(slices.Max(freezes), "freeze_max_s")
	b.ReportMetric(middle(floors), "floor_median_s")
	b.ReportMetric(middle(freezes)/middle(floors), "freeze/floor")
}

func middle(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
