package datasets_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/datasets"
)

// tablesDigest sums up every row of every table in the public schema, so a
// test can tell that nothing at all was written.
func tablesDigest(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	tables := pgtest.Tables(t, pool)
	out := make(map[string]string, len(tables))
	for _, table := range tables {
		var sum string
		q := `SELECT coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM ` + pgx.Identifier{table}.Sanitize() + ` x`
		if err := pool.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		out[table] = sum
	}
	return out
}

// Reading a validation report is a read: before the first freeze and on a
// frozen version, masked or not, in the target format or another, no row
// of any table changes, except the caches of what never changes: the first
// report on content stores each example's facts (item_facts), and the
// first report of a frozen version in a format is stored. The freeze finds
// the draft's facts ready, and reading again writes nothing at all.
func TestReportWritesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 3})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, e.pairs(t, 12)); err != nil {
		t.Fatal(err)
	}
	reads := []datasets.ReportRequest{{MaskPII: true}, {}, {Format: "openai_preference", MaskPII: true}, {Format: "parquet"}}
	check := func(stage string, stores ...string) {
		t.Helper()
		before := tablesDigest(t, e.pool)
		for _, req := range reads {
			rep, err := e.svc.Report(ctx, e.org, d.ID, req)
			if err != nil || rep.Examples != 12 {
				t.Fatalf("%s: report %+v: %v", stage, req, err)
			}
		}
		for table, sum := range tablesDigest(t, e.pool) {
			if before[table] != sum && !slices.Contains(stores, table) {
				t.Errorf("%s: reading reports changed %s", stage, table)
			}
		}
	}
	check("curating", "item_facts")
	check("curating, read again")
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err != nil {
		t.Fatal(err)
	}
	check("frozen, first reads", "dataset_version_reports")
	var stored int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM dataset_version_reports`).Scan(&stored); err != nil || stored != len(reads) {
		t.Fatalf("%d reports stored for %d reads: %v", stored, len(reads), err)
	}
	check("frozen, read again")
}
