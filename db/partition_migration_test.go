package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// snapshot is every feedback row and every reference to one, as text, so
// that two snapshots compare whole.
type snapshot struct {
	feedback map[uuid.UUID]string // the row as text, seq included
	refs     map[string]int       // per referencing table and column: rows with a feedback id
	scores   map[string]string    // live scores by scorer and feedback id
}

func takeSnapshot(t *testing.T, pool *pgxpool.Pool) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{feedback: map[uuid.UUID]string{}, refs: map[string]int{}, scores: map[string]string{}}
	rows, err := pool.Query(ctx, `SELECT id, ROW(id, seq, org_id, external_id, session_id, trace_id, end_user_id, query, response, context,
		model, experiment_arm, feedback_type, rating, dim_accuracy, dim_helpfulness, dim_clarity, dim_safety, comment, correction,
		latency_ms, tags, status, assignee_id, reviewer_id, reviewed_at, source, rank, rank_group, pii_kinds, content_hash, duplicate_of,
		created_at, updated_at, version, experiment_id, is_error, is_training_data, hygiene_flags, training_set_by, given_by)::text FROM feedback`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			t.Fatal(err)
		}
		s.feedback[id] = text
	}
	rows.Close()
	for _, ref := range []string{"feedback_reviews.feedback_id", "preference_pairs.chosen_feedback_id", "preference_pairs.rejected_feedback_id",
		"training_dataset_members.feedback_id", "review_items.feedback_id", "codebook_rule_uses.feedback_id", "live_scores.feedback_id"} {
		var n int
		table, col, _ := cut(ref)
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+col+` IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		s.refs[ref] = n
	}
	rows, err = pool.Query(ctx, `SELECT scorer_id::text || '/' || feedback_id::text, ROW(status, score, created_at)::text FROM live_scores`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		s.scores[k] = v
	}
	rows.Close()
	return s
}

func cut(ref string) (string, string, bool) {
	for i := range ref {
		if ref[i] == '.' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}

func (s snapshot) compare(t *testing.T, when string, want snapshot) {
	t.Helper()
	if len(s.feedback) != len(want.feedback) {
		t.Errorf("%s: %d feedback rows, want %d", when, len(s.feedback), len(want.feedback))
	}
	for id, row := range want.feedback {
		if s.feedback[id] != row {
			t.Errorf("%s: feedback %s is\n%s\nwant\n%s", when, id, s.feedback[id], row)
		}
	}
	for ref, n := range want.refs {
		if s.refs[ref] != n {
			t.Errorf("%s: %s has %d references, want %d", when, ref, s.refs[ref], n)
		}
	}
	for k, v := range want.scores {
		if s.scores[k] != v {
			t.Errorf("%s: live score %s is %q, want %q", when, k, s.scores[k], v)
		}
	}
}

// Migration 140 on a database in use: feedback of two organisations over
// seven months (with external ids, duplicates, reviews, pairs, dataset
// members, review items, codebook uses and live scores) moves into month
// partitions with every row, reference and unique guarantee kept, and
// comes back whole when the migration is rolled back.
func TestTimePartitionsMigration(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 139)
	exec := execer(t, pool)
	orgA, orgB := uuid.New(), uuid.New()
	exec(`INSERT INTO organizations (id, slug, name) VALUES ($1, 'a', 'A'), ($2, 'b', 'B')`, orgA, orgB)
	// 7 months back from now, 30 rows a month per organisation; every
	// third row has an external id; every tenth repeats the first's content.
	exec(`INSERT INTO feedback (org_id, external_id, query, response, feedback_type, rating, source, content_hash, status, tags, created_at)
		SELECT o.id, CASE WHEN i % 3 = 0 THEN 'ext-' || i END, 'q ' || (i % 10), 'a ' || i, 'rating', 1 + i % 5, 'api',
		       sha256(('q ' || (i % 10) || o.slug)::bytea), 'approved', ARRAY['m' || (i / 30)],
		       now() - (i / 30) * interval '1 month' - (i % 30) * interval '1 hour'
		FROM organizations o, generate_series(0, 209) i ORDER BY i`)
	exec(`UPDATE feedback f SET duplicate_of = (SELECT d.id FROM feedback d WHERE d.org_id = f.org_id AND d.content_hash = f.content_hash ORDER BY d.seq LIMIT 1)
		WHERE f.seq > (SELECT min(d.seq) FROM feedback d WHERE d.org_id = f.org_id AND d.content_hash = f.content_hash)`)
	exec(`INSERT INTO feedback_reviews (org_id, feedback_id, action, actor_label) SELECT org_id, id, 'approve', 'x' FROM feedback WHERE seq % 4 = 0`)
	exec(`INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash, chosen_feedback_id, rejected_feedback_id)
		SELECT c.org_id, '[]', c.query, c.response, r.response, 'manual', sha256((c.id::text || r.id::text)::bytea), c.id, r.id
		FROM feedback c JOIN feedback r ON r.org_id = c.org_id AND r.seq = c.seq + 2 WHERE c.seq % 7 = 0`)
	var dataset uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO training_datasets (org_id, name, dataset_type, export_format) VALUES ($1, 'd', 'instruction_tuning', 'openai_chat') RETURNING id`, orgA).Scan(&dataset); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO training_dataset_members (dataset_id, org_id, feedback_id) SELECT $1, org_id, id FROM feedback WHERE org_id = $2 AND seq % 5 = 0`, dataset, orgA)
	exec(`INSERT INTO review_plans (id, org_id, name, overlap) VALUES ($1, $2, 'p', 2)`, dataset, orgA)
	exec(`INSERT INTO review_items (feedback_id, org_id, plan_id, overlap) SELECT id, org_id, $1, 2 FROM feedback WHERE org_id = $2 AND seq % 6 = 0`, dataset, orgA)
	var model, experiment, scorer uuid.UUID
	exec(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, 'support')`, dataset, orgA)
	model = dataset
	if err := pool.QueryRow(ctx, `INSERT INTO experiments (org_id, key, name, registered_model_id, seed) VALUES ($1, 'x', 'x', $2, 'x') RETURNING id`, orgA, model).Scan(&experiment); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO live_scorers (org_id, experiment_id, endpoint, rate) VALUES ($1, $2, 'judge', 1) RETURNING id`, orgA, experiment).Scan(&scorer); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score) SELECT $1, id, org_id, 'scored', (seq % 10) / 10.0 FROM feedback WHERE org_id = $2 AND seq % 3 = 1`, scorer, orgA)
	before := takeSnapshot(t, pool)
	// Each table's foreign keys to feedback, whichever migrations made them.
	var keysBefore int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confrelid = 'feedback'::regclass`).Scan(&keysBefore); err != nil {
		t.Fatal(err)
	}
	if len(before.feedback) != 420 || before.refs["live_scores.feedback_id"] == 0 || before.refs["preference_pairs.chosen_feedback_id"] == 0 {
		t.Fatalf("set-up: %d rows, %v", len(before.feedback), before.refs)
	}

	if _, err := provider.UpTo(ctx, 140); err != nil {
		t.Fatal(err)
	}
	takeSnapshot(t, pool).compare(t, "after the migration", before)
	// Every row sits in its month's partition.
	var misplaced, parts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tableoid::regclass::text <> 'feedback_y' || to_char(created_at AT TIME ZONE 'UTC', 'YYYY"m"MM')),
		count(DISTINCT tableoid) FROM feedback`).Scan(&misplaced, &parts); err != nil || misplaced != 0 || parts < 7 {
		t.Errorf("%d rows outside their month's partition, %d partitions used (%v)", misplaced, parts, err)
	}
	// Every foreign key that named feedback names feedback_keys now.
	var toFeedback, toKeys int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE confrelid = 'feedback'::regclass), count(*) FILTER (WHERE confrelid = 'feedback_keys'::regclass AND conparentid = 0)
		FROM pg_constraint WHERE contype = 'f'`).Scan(&toFeedback, &toKeys); err != nil || toFeedback != 0 || toKeys != keysBefore {
		t.Errorf("%d foreign keys to feedback, %d to feedback_keys (%v), want 0 and %d", toFeedback, toKeys, err, keysBefore)
	}
	// The unique guarantees: an external id stored again stores nothing;
	// an id stored again fails; a live score of the same feedback too.
	tag, err := pool.Exec(ctx, `INSERT INTO feedback (org_id, external_id, query, response, feedback_type, source, content_hash, created_at)
		VALUES ($1, 'ext-3', 'again', 'again', 'thumbs_up', 'api', '\x00', now() - interval '3 months')`, orgA)
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("an external id stored again: %v, %d rows", err, tag.RowsAffected())
	}
	var someID, someOrg uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT id, org_id FROM feedback WHERE seq % 4 = 0 ORDER BY seq LIMIT 1`).Scan(&someID, &someOrg); err != nil {
		t.Fatal(err)
	}
	var pg *pgconn.PgError
	_, err = pool.Exec(ctx, `INSERT INTO feedback (id, org_id, query, response, feedback_type, source, content_hash, created_at)
		VALUES ($1, $2, 'again', 'again', 'thumbs_up', 'api', '\x00', now() - interval '5 months')`, someID, someOrg)
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Errorf("an id stored again in another month: %v, want a unique violation", err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO live_scores (scorer_id, feedback_id, org_id, feedback_at) SELECT scorer_id, feedback_id, org_id, feedback_at FROM live_scores LIMIT 1`)
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Errorf("a live score stored again: %v, want a unique violation", err)
	}
	// A reference to a feedback id that does not exist is refused.
	_, err = pool.Exec(ctx, `INSERT INTO feedback_reviews (org_id, feedback_id, action, actor_label) VALUES ($1, $2, 'approve', 'x')`, orgA, uuid.New())
	if !errors.As(err, &pg) || pg.Code != "23503" {
		t.Errorf("a review of no feedback: %v, want a foreign key violation", err)
	}
	// A row given a time in another month moves there, keeping its
	// references; its delete cascades as before.
	var reviews int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1`, someID).Scan(&reviews); err != nil || reviews == 0 {
		t.Fatalf("the row has %d reviews (%v)", reviews, err)
	}
	exec(`UPDATE feedback SET created_at = created_at - interval '2 months' WHERE id = $1`, someID)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1`, someID).Scan(&n); err != nil || n != reviews {
		t.Errorf("after the move: %d reviews (%v), want %d", n, err, reviews)
	}
	exec(`UPDATE feedback SET created_at = created_at + interval '2 months' WHERE id = $1`, someID)
	takeSnapshot(t, pool).compare(t, "after moving a row and back", before)

	if _, err := provider.DownTo(ctx, 139); err != nil {
		t.Fatal(err)
	}
	takeSnapshot(t, pool).compare(t, "rolled back", before)
	exec(`DELETE FROM feedback WHERE id = $1`, someID)
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1`, someID).Scan(&n); err != nil || n != 0 {
		t.Errorf("rolled back, a delete left %d reviews (%v)", n, err)
	}
}
