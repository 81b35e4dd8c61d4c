package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/retention"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// monthsAgo is the 15th of the month n months before now's, at noon UTC.
func monthsAgo(now time.Time, n int) time.Time {
	t := now.UTC()
	return time.Date(t.Year(), t.Month(), 15, 12, 0, 0, 0, time.UTC).AddDate(0, -n, 0)
}

// countRows is the one number sql answers.
func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// removedByMonth sums what a run removed per month, failing on rows of
// an organisation other than org.
func removedByMonth(t *testing.T, removed []retention.Removed, org uuid.UUID) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for _, r := range removed {
		if r.OrgID != org {
			t.Errorf("removed %d rows of another organisation in %s", r.Rows, r.Month)
		}
		got[r.Month] += r.Rows
	}
	return got
}

// auditedByMonth is the rows the audit log says action removed from org,
// per month.
func auditedByMonth(t *testing.T, pool *pgxpool.Pool, org uuid.UUID, action string) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT target_id, details FROM audit_log WHERE org_id = $1 AND action = $2`, org, action)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	audited := map[string]int64{}
	for rows.Next() {
		var month string
		var details []byte
		if err := rows.Scan(&month, &details); err != nil {
			t.Fatal(err)
		}
		var d struct{ Rows int64 }
		if err := json.Unmarshal(details, &d); err != nil {
			t.Fatal(err)
		}
		audited[month] = d.Rows
	}
	return audited
}

// Done when: retention removes a month's partition of an organisation with
// a short retention and leaves frozen versions' content intact, and other
// organisations' rows untouched.
func TestRetentionRemovesOldMonths(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	short, err := q.OrgInsert(ctx, db.OrgInsertParams{Slug: "short", Name: "Short"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := q.OrgInsert(ctx, db.OrgInsertParams{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old, mid, recent := monthsAgo(now, 8), monthsAgo(now, 5), monthsAgo(now, 1)
	// The old month only the short organisation used; the middle month
	// both did.
	for _, m := range []time.Time{old, mid, recent} {
		if _, err := pool.Exec(ctx, `SELECT month_partition_ensure('feedback', 'created_at', $1), month_partition_ensure('live_scores', 'feedback_at', $1)`, m); err != nil {
			t.Fatal(err)
		}
	}
	insert := func(org uuid.UUID, at time.Time, n int, label string) []uuid.UUID {
		t.Helper()
		rows, err := pool.Query(ctx, `INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash, status, correction, created_at, external_id)
			SELECT $1, $4 || ' question ' || i, $4 || ' answer ' || i, 'thumbs_up', 'api', sha256(($4 || i)::bytea), 'approved', '', $2, $4 || '-' || i
			FROM generate_series(1, $3::int) i RETURNING id`, org, at, n, label)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []uuid.UUID
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	oldIDs := insert(short.ID, old, 6, "old")
	insert(short.ID, mid, 4, "mid")
	insert(short.ID, recent, 3, "recent")
	otherMid := insert(other.ID, mid, 5, "other-mid")
	insert(other.ID, old.AddDate(0, -2, 0), 2, "other-older")

	// A review of an old row goes with it.
	if _, err := pool.Exec(ctx, `INSERT INTO feedback_reviews (org_id, feedback_id, action, actor_label) VALUES ($1, $2, 'approve', 'x')`, short.ID, oldIDs[0]); err != nil {
		t.Fatal(err)
	}

	// A dataset frozen from the old month's feedback.
	ds := datasets.New(pool, nil, nil, nil)
	d, err := ds.Create(ctx, audit.System, short.ID, datasets.NewDataset{Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{Name: "old answers", ValidationPercent: 0, SplitSeed: 1}, Members: oldIDs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	v, err := ds.Freeze(ctx, audit.System, short.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.ItemCount != int32(len(oldIDs)) {
		t.Fatalf("frozen %d items, want %d", v.ItemCount, len(oldIDs))
	}
	frozen := func() (hash string, content string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT v.content_hash::text, (SELECT string_agg(i.content::text, '|' ORDER BY i.content_sha, i.source_id)
			FROM dataset_version_items i WHERE i.version_id = v.id) FROM dataset_versions v WHERE v.id = $1`, v.ID).Scan(&hash, &content); err != nil {
			t.Fatal(err)
		}
		return hash, content
	}
	hashBefore, contentBefore := frozen()

	// 120 days: the old and the middle months go, the recent one stays.
	days := 120
	svc := retention.New(pool)
	if err := svc.SetDays(ctx, audit.System, short.ID, &days); err != nil {
		t.Fatal(err)
	}
	rep, err := svc.Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	got := removedByMonth(t, rep.Removed, short.ID)
	if got[old.Format("2006-01")] != 6 || got[mid.Format("2006-01")] != 4 || len(got) != 2 {
		t.Errorf("removed %v, want 6 rows of %s and 4 of %s", got, old.Format("2006-01"), mid.Format("2006-01"))
	}
	count := func(sql string, args ...any) int { t.Helper(); return countRows(t, pool, sql, args...) }
	if n := count(`SELECT count(*) FROM feedback WHERE org_id = $1`, short.ID); n != 3 {
		t.Errorf("the short organisation keeps %d rows, want the recent 3", n)
	}
	if n := count(`SELECT count(*) FROM feedback WHERE org_id = $1`, other.ID); n != 7 {
		t.Errorf("the other organisation keeps %d rows, want all 7", n)
	}
	if n := count(`SELECT count(*) FROM feedback WHERE id = ANY($1)`, otherMid); n != 5 {
		t.Errorf("the other organisation's rows of the shared month: %d, want 5", n)
	}
	if n := count(`SELECT count(*) FROM feedback_keys WHERE org_id = $1`, short.ID); n != 3 {
		t.Errorf("%d keys left for the short organisation, want 3", n)
	}
	if n := count(`SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1`, oldIDs[0]); n != 0 {
		t.Errorf("%d reviews of a removed row left", n)
	}
	if n := count(`SELECT count(*) FROM training_dataset_members WHERE dataset_id = $1`, d.ID); n != 0 {
		t.Errorf("%d memberships of removed rows left", n)
	}
	// The old month's partition held only the short organisation's rows:
	// it is dropped; the shared month's stays, with the other's rows.
	oldPart := "feedback_y" + old.Format("2006") + "m" + old.Format("01")
	midPart := "feedback_y" + mid.Format("2006") + "m" + mid.Format("01")
	if n := count(`SELECT count(*) FROM pg_class WHERE relname = $1`, oldPart); n != 0 {
		t.Errorf("partition %s is still there", oldPart)
	}
	if n := count(`SELECT count(*) FROM pg_class WHERE relname = $1`, midPart); n != 1 {
		t.Errorf("partition %s was dropped", midPart)
	}
	hashAfter, contentAfter := frozen()
	if hashAfter != hashBefore || contentAfter != contentBefore || contentAfter == "" {
		t.Errorf("the frozen version changed: hash %s -> %s, content %d -> %d bytes", hashBefore, hashAfter, len(contentBefore), len(contentAfter))
	}
	// The audit log says what went, per month.
	audited := auditedByMonth(t, pool, short.ID, "feedback.retention_removed")
	if len(audited) != 2 || audited[old.Format("2006-01")] != 6 || audited[mid.Format("2006-01")] != 4 {
		t.Errorf("audited %v, want the removed rows per month", audited)
	}
	// A second run finds nothing more to remove.
	if rep, err := svc.Run(ctx, now); err != nil || len(rep.Removed) != 0 {
		t.Errorf("second run: %+v, %v", rep.Removed, err)
	}
}

// The maintenance keeps the coming months' partitions and gives a month
// that history put in the DEFAULT partition its own.
func TestPartitionsAheadAndSplit(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	org, err := q.OrgInsert(ctx, db.OrgInsertParams{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2019, 3, 9, 10, 0, 0, 0, time.UTC)
	var id uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash, created_at)
		VALUES ($1, 'q', 'a', 'thumbs_up', 'api', '\x01', $2) RETURNING id`, org.ID, at).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO feedback_reviews (org_id, feedback_id, action, actor_label) VALUES ($1, $2, 'approve', 'x')`, org.ID, id); err != nil {
		t.Fatal(err)
	}
	var where string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM feedback WHERE id = $1`, id).Scan(&where); err != nil || where != "feedback_default" {
		t.Fatalf("a 2019 row is in %q (%v), want the DEFAULT partition", where, err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE feedback_default; SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rep, err := retention.New(pool).Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	split := false
	for _, p := range rep.Partitions {
		split = split || (p.Action == "split" && p.PartitionName == "feedback 2019-03")
	}
	if !split {
		t.Errorf("maintenance did %v, want March 2019 split out of DEFAULT", rep.Partitions)
	}
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM feedback WHERE id = $1`, id).Scan(&where); err != nil || where != "feedback_y2019m03" {
		t.Errorf("the 2019 row is in %q (%v) after maintenance, want feedback_y2019m03", where, err)
	}
	var reviews, keys int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1), (SELECT count(*) FROM feedback_keys WHERE id = $1)`, id).Scan(&reviews, &keys); err != nil || reviews != 1 || keys != 1 {
		t.Errorf("after the split: %d reviews, %d keys (%v), want 1 and 1", reviews, keys, err)
	}
	for n := 0; n <= retention.Ahead; n++ {
		m := monthsAgo(now, -n)
		name := "feedback_y" + m.Format("2006") + "m" + m.Format("01")
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil || !exists {
			t.Errorf("partition %s missing (%v)", name, err)
		}
	}
	// A month-bounded read touches that month's partition only.
	var plan string
	if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) SELECT count(*) FROM feedback WHERE org_id = $1 AND created_at >= $2 AND created_at < $3`,
		org.ID, time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2019, 4, 1, 0, 0, 0, 0, time.UTC)).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil {
		t.Fatal(err)
	}
	rels := map[string]bool{}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if r, ok := n["Relation Name"].(string); ok {
			rels[r] = true
		}
		if ps, ok := n["Plans"].([]any); ok {
			for _, p := range ps {
				walk(p.(map[string]any))
			}
		}
	}
	walk(doc[0].Plan)
	if len(rels) != 1 || !rels["feedback_y2019m03"] {
		t.Errorf("a March 2019 read touches %v, want feedback_y2019m03 only", rels)
	}
}

// acme is a database with one organisation.
func acme(t *testing.T) (*pgxpool.Pool, uuid.UUID) {
	t.Helper()
	pool := pgtest.NewDB(t)
	org, err := db.New(pool).OrgInsert(context.Background(), db.OrgInsertParams{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	return pool, org.ID
}

// insertAt stores one feedback row of org given at at, with q (a pool or
// an open transaction).
func insertAt(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, org uuid.UUID, at time.Time) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := q.QueryRow(context.Background(), `INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash, created_at)
		VALUES ($1, 'q', 'a', 'thumbs_up', 'api', '\x01', $2) RETURNING id`, org, at).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// maintainBeside runs the maintenance while tx, a writer's transaction
// still open, holds rows the maintenance would move or drop: once the
// maintenance waits for a lock the writer holds, the writer commits, and
// the maintenance must then see what it wrote.
func maintainBeside(t *testing.T, pool *pgxpool.Pool, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := retention.New(pool).Run(ctx, time.Now())
		done <- err
	}()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			_ = tx.Rollback(ctx)
			t.Fatalf("the maintenance ended (%v) without waiting for the open writer", err)
		case <-time.After(20 * time.Millisecond):
		}
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An old month's partition that looks empty is not dropped while a
// transaction is putting rows into it: the rows went with the table
// before, and their keys stayed behind.
func TestMaintenanceKeepsRowsBeingWritten(t *testing.T) {
	ctx := context.Background()
	pool, org := acme(t)
	at := monthsAgo(time.Now(), 3)
	if _, err := pool.Exec(ctx, `SELECT month_partition_ensure('feedback', 'created_at', $1)`, at); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := insertAt(t, tx, org, at)
	maintainBeside(t, pool, tx)
	var rows, keys int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM feedback WHERE id = $1), (SELECT count(*) FROM feedback_keys WHERE id = $1)`, id).Scan(&rows, &keys); err != nil || rows != 1 || keys != 1 {
		t.Errorf("a row written beside the maintenance: %d rows, %d keys (%v), want 1 and 1", rows, keys, err)
	}
}

// A row of the DEFAULT partition that a transaction changes while its
// month is split out keeps the change: the split copied the old version
// and then deleted the new one before.
func TestSplitKeepsRowsBeingChanged(t *testing.T) {
	ctx := context.Background()
	pool, org := acme(t)
	id := insertAt(t, pool, org, time.Date(2019, 5, 9, 10, 0, 0, 0, time.UTC))
	if _, err := pool.Exec(ctx, `ANALYZE feedback_default; SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE feedback SET comment = 'changed' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	maintainBeside(t, pool, tx)
	var comment, where string
	if err := pool.QueryRow(ctx, `SELECT comment, tableoid::regclass::text FROM feedback WHERE id = $1`, id).Scan(&comment, &where); err != nil ||
		comment != "changed" || where != "feedback_y2019m05" {
		t.Errorf("a row changed beside the split: comment %q in %s (%v), want \"changed\" in feedback_y2019m05", comment, where, err)
	}
}

// Feedback given in a month without its partition gets the partition
// before it is written, one item or a batch: nothing waits in DEFAULT for
// the maintenance to move it.
func TestHistoryLandsInItsMonth(t *testing.T) {
	ctx := context.Background()
	pool, org := acme(t)
	svc := feedback.New(pool)
	one, batch := time.Date(2018, 7, 4, 9, 0, 0, 0, time.UTC), time.Date(2018, 9, 30, 23, 59, 0, 0, time.UTC)
	f, _, err := svc.Ingest(ctx, org, "api", feedback.Item{Query: "q1", Response: "a1", FeedbackType: "thumbs_up", GivenAt: &one})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.IngestBatch(ctx, org, "api", []feedback.Item{{Query: "q2", Response: "a2", FeedbackType: "thumbs_down", GivenAt: &batch}})
	if err != nil || len(res.IDs) != 1 {
		t.Fatalf("batch: %+v, %v", res, err)
	}
	for id, want := range map[uuid.UUID]string{f.ID: "feedback_y2018m07", res.IDs[0]: "feedback_y2018m09"} {
		var where string
		if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM feedback WHERE id = $1`, id).Scan(&where); err != nil || where != want {
			t.Errorf("history is in %q (%v), want %s", where, err, want)
		}
	}
	var scores bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('live_scores_y2018m07') IS NOT NULL`).Scan(&scores); err != nil || !scores {
		t.Errorf("no live scores partition for July 2018 (%v)", err)
	}

	// While a long read holds DEFAULT, making a partition would wait for it
	// and stall the reads behind: the item goes into DEFAULT instead.
	reader, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx) //nolint:errcheck // a read only
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM feedback_default`); err != nil {
		t.Fatal(err)
	}
	busy := time.Date(2017, 2, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	f, _, err = svc.Ingest(ctx, org, "api", feedback.Item{Query: "q3", Response: "a3", FeedbackType: "thumbs_up", GivenAt: &busy})
	if err != nil {
		t.Fatalf("an item beside a long read: %v", err)
	}
	if waited := time.Since(t0); waited > 10*time.Second {
		t.Errorf("the item waited %s for the long read", waited)
	}
	var where string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM feedback WHERE id = $1`, f.ID).Scan(&where); err != nil || where != "feedback_default" {
		t.Errorf("an item beside a long read is in %q (%v), want feedback_default", where, err)
	}
}

// Exposures (migration 00180): retention removes an organisation's
// exposures first seen before its horizon, drops a month's partition it
// emptied, keeps the exposures since and other organisations' whole, and
// has the removed units' kept values folded again.
func TestRetentionRemovesOldExposures(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(sql string, args ...any) int { t.Helper(); return countRows(t, pool, sql, args...) }
	short, err := q.OrgInsert(ctx, db.OrgInsertParams{Slug: "short", Name: "Short"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := q.OrgInsert(ctx, db.OrgInsertParams{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old, mid, recent := monthsAgo(now, 8), monthsAgo(now, 5), monthsAgo(now, 1)
	otherOld := old.AddDate(0, -2, 0)
	for _, m := range []time.Time{otherOld, old, mid, recent} {
		exec(`SELECT month_partition_ensure('experiment_exposures', 'phase_started_at', $1)`, m)
	}
	// experiment records an experiment of org whose current phase began
	// at started, with first exposures at each of seen.
	experiment := func(org uuid.UUID, key string, phases []time.Time, seen map[int][]time.Time) uuid.UUID {
		t.Helper()
		model := uuid.New()
		exec(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, $3)`, model, org, key)
		var id uuid.UUID
		last := phases[len(phases)-1]
		var phaseStart *time.Time
		if len(phases) > 1 {
			phaseStart = &last
		}
		if err := pool.QueryRow(ctx, `INSERT INTO experiments (org_id, key, name, registered_model_id, seed, status, started_at, phase, phase_started_at)
			VALUES ($1, $2, $2, $3, 's', 'running', $4, $5, $6) RETURNING id`, org, key, model, phases[0], len(phases), phaseStart).Scan(&id); err != nil {
			t.Fatal(err)
		}
		for phase, ats := range seen {
			for i, at := range ats {
				exec(`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at) VALUES ($1, $2, $3, $4, $5, $6)`,
					id, phase, fmt.Sprintf("%s-p%d-u%d", key, phase, i), i%2, at, phases[phase-1])
			}
		}
		return id
	}
	repeat := func(at time.Time, n int) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = at.Add(time.Duration(i) * time.Minute)
		}
		return out
	}
	// A: its first phase, 8 months ago, and its second, last month.
	a := experiment(short.ID, "a", []time.Time{old, recent}, map[int][]time.Time{1: repeat(old, 10), 2: repeat(recent, 5)})
	// B: one phase since 5 months ago, with units seen then and last week.
	b := experiment(short.ID, "b", []time.Time{mid}, map[int][]time.Time{1: append(repeat(mid, 3), repeat(now.AddDate(0, 0, -7), 2)...)})
	// The other organisation keeps everything.
	c := experiment(other.ID, "c", []time.Time{otherOld}, map[int][]time.Time{1: repeat(otherOld, 4)})

	days := 120
	svc := retention.New(pool)
	if err := svc.SetDays(ctx, audit.System, short.ID, &days); err != nil {
		t.Fatal(err)
	}
	rep, err := svc.Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	got := removedByMonth(t, rep.Exposures, short.ID)
	if len(got) != 2 || got[old.Format("2006-01")] != 10 || got[mid.Format("2006-01")] != 3 {
		t.Errorf("removed %v, want 10 exposures of %s and 3 of %s", got, old.Format("2006-01"), mid.Format("2006-01"))
	}
	for _, k := range []struct {
		experiment uuid.UUID
		phase, n   int
	}{{a, 1, 0}, {a, 2, 5}, {b, 1, 2}, {c, 1, 4}} {
		if n := count(`SELECT count(*) FROM experiment_exposures WHERE experiment_id = $1 AND phase = $2`, k.experiment, k.phase); n != k.n {
			t.Errorf("experiment %s phase %d keeps %d exposures, want %d", k.experiment, k.phase, n, k.n)
		}
	}
	// The old month's partition held only removed rows: it is dropped.
	// The middle month's keeps B's recent units.
	part := func(m time.Time) string { return "experiment_exposures_y" + m.Format("2006") + "m" + m.Format("01") }
	if n := count(`SELECT count(*) FROM pg_class WHERE relname = $1`, part(old)); n != 0 {
		t.Errorf("partition %s is still there", part(old))
	}
	for _, m := range []time.Time{mid, otherOld} {
		if n := count(`SELECT count(*) FROM pg_class WHERE relname = $1`, part(m)); n != 1 {
			t.Errorf("partition %s was dropped", part(m))
		}
	}
	// The removed units' kept values are folded again.
	if n := count(`SELECT count(DISTINCT unit_id) FROM experiment_sums_dirty WHERE org_id = $1`, short.ID); n != 13 {
		t.Errorf("%d units to fold again, want the 13 removed", n)
	}
	// The audit log says what went, per month.
	audited := auditedByMonth(t, pool, short.ID, "exposure.retention_removed")
	if len(audited) != 2 || audited[old.Format("2006-01")] != 10 || audited[mid.Format("2006-01")] != 3 {
		t.Errorf("audited %v, want the removed exposures per month", audited)
	}
	if rep, err := svc.Run(ctx, now); err != nil || len(rep.Exposures) != 0 {
		t.Errorf("second run: %+v, %v", rep.Exposures, err)
	}
}
