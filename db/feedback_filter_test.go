package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// seedQueue stores n feedback items in a new organisation: statuses,
// types and models in rotation, every fifth tagged "billing".
func seedQueue(t *testing.T, pool *pgxpool.Pool, n int) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	org := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO organizations (id, slug, name) VALUES ($1, $2, 'Queue')`, org, "q-"+org.String()[:8]); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO feedback (org_id, query, response, model, feedback_type, rating, status, source, content_hash, tags, created_at)
		SELECT $1, 'How do I configure feature ' || i || '?', 'Open Settings.',
		       (ARRAY['support-v1','support-v2','triage-v1'])[1 + i % 3],
		       (ARRAY['thumbs_up','thumbs_down','rating']::feedback_type[])[1 + i % 3],
		       1 + i % 5,
		       (ARRAY['pending','pending','approved','rejected','corrected']::review_status[])[1 + (i * 7) % 5],
		       'api', sha256(i::text::bytea),
		       CASE WHEN i % 5 = 0 THEN ARRAY['billing'] ELSE '{}' END,
		       now() - i * interval '1 minute'
		FROM generate_series(1, $2::int) AS i`, org, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE feedback"); err != nil {
		t.Fatal(err)
	}
	return org
}

// filterArgs are feedback_matches's arguments after the organisation, in
// the order the three queue queries take them.
type filterArgs struct {
	status  any // review_status or nil
	typ     any
	tag     string
	model   string
	ratingM int
}

func (a filterArgs) list(org uuid.UUID, limit int) []any {
	return []any{org, a.status, a.typ, nil, a.ratingM, 0, 0, a.tag, a.model, nil, nil, nil, false, false, "", nil, false, nil, nil, limit}
}

// The queue's list, its counts per status and its bulk selection filter
// with the one function: for each filter, the three agree on what matches.
func TestQueueQueriesAgree(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org := seedQueue(t, pool, 600)
	q := db.New(pool)
	for _, a := range []filterArgs{
		{},
		{status: "pending"},
		{status: "approved", typ: "thumbs_down"},
		{tag: "billing", model: "support-v2"},
		{status: "corrected", ratingM: 3},
	} {
		listed, err := q.FeedbackList(ctx, listParams(org, a, 10000))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := q.FeedbackListMatchingIDs(ctx, matchingParams(org, a, 10000))
		if err != nil {
			t.Fatal(err)
		}
		counts, err := q.FeedbackCountByStatus(ctx, countParams(org, a))
		if err != nil {
			t.Fatal(err)
		}
		counted := 0
		for _, c := range counts {
			if a.status == nil || string(c.Status) == a.status {
				counted += int(c.Count)
			}
		}
		// Hand count, with the conditions written out in the test.
		var want int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM feedback WHERE org_id = $1
			AND ($2::review_status IS NULL OR status = $2) AND ($3::feedback_type IS NULL OR feedback_type = $3)
			AND ($4 = '' OR $4 = ANY(tags)) AND ($5 = '' OR model = $5) AND rating >= $6`,
			org, a.status, a.typ, a.tag, a.model, a.ratingM).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if want == 0 || len(listed) != want || len(ids) != want || counted != want {
			t.Errorf("filter %+v: list %d, matching ids %d, counts %d; want %d (and not 0)", a, len(listed), len(ids), counted, want)
		}
		for i := range listed {
			if listed[i].ID != ids[i] {
				t.Fatalf("filter %+v: list and matching ids differ at %d", a, i)
			}
		}
	}
}

// feedback_matches is inlined into the queries that call it: their plans
// use the queue's indexes on the filter's columns and call no function.
func TestQueueFilterInlined(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org := seedQueue(t, pool, 2000)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// With sequential scans priced out, a filter the planner can see into
	// is answered from an index; an opaque function call could only be a
	// Filter over every row of the organisation.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	plan := func(sql string, args ...any) string {
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}
	pending := filterArgs{status: "pending"}
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"list by status", db.FeedbackListSQL, "feedback_org_status_created_idx", pending.list(org, 51)},
		{"list by model", db.FeedbackListSQL, "feedback_org_model_idx", filterArgs{model: "support-v2"}.list(org, 51)},
		{"matching ids by status", db.FeedbackMatchingIDsSQL, "feedback_org_status_created_idx", pending.list(org, 51)[:17]},
	} {
		args := c.args
		if c.sql == db.FeedbackMatchingIDsSQL {
			args = append(args, 51)
		}
		p := plan(c.sql, args...)
		if !strings.Contains(p, c.index) || strings.Contains(p, "feedback_matches") {
			t.Errorf("%s: want a plan on %s with the filter inlined, got\n%s", c.name, c.index, p)
		}
	}
	// The item page's neighbours and position: the key's bound is an index
	// condition on the same index, and the filter is inlined.
	key := []any{time.Now().Add(-500 * time.Minute), uuid.New()}
	filter := pending.list(org, 0)[:17]
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"next by status", db.FeedbackNextSQL, append(append([]any{}, filter...), key...)},
		{"previous by status", db.FeedbackPreviousSQL, append(append([]any{}, filter...), key...)},
		{"position by status", db.FeedbackPositionSQL, append(append([]any{}, key...), filter...)},
	} {
		p := plan(c.sql, c.args...)
		if !strings.Contains(p, "feedback_org_status_created_idx") || strings.Contains(p, "feedback_matches") {
			t.Errorf("%s: want a plan on feedback_org_status_created_idx with the filter inlined, got\n%s", c.name, p)
		}
	}
	counts := plan(db.FeedbackStatusCountsSQL, org, "thumbs_up", nil, 0, 0, 0, "", "support-v1", nil, nil, nil, false, false, "", nil, false)
	if !strings.Contains(counts, "feedback_org_model_idx") || strings.Contains(counts, "feedback_matches") {
		t.Errorf("status counts by model: want a plan on feedback_org_model_idx with the filter inlined, got\n%s", counts)
	}
}

func listParams(org uuid.UUID, a filterArgs, limit int) db.FeedbackListParams {
	p := db.FeedbackListParams{OrgID: org, Tag: a.tag, Model: a.model, RatingMin: int32(a.ratingM), RowLimit: int32(limit)}
	if a.status != nil {
		p.Status = db.NullReviewStatus{ReviewStatus: db.ReviewStatus(a.status.(string)), Valid: true}
	}
	if a.typ != nil {
		p.FeedbackType = db.NullFeedbackType{FeedbackType: db.FeedbackType(a.typ.(string)), Valid: true}
	}
	return p
}

func matchingParams(org uuid.UUID, a filterArgs, limit int) db.FeedbackListMatchingIDsParams {
	p := listParams(org, a, limit)
	return db.FeedbackListMatchingIDsParams{OrgID: org, Status: p.Status, FeedbackType: p.FeedbackType, Tag: p.Tag, Model: p.Model,
		RatingMin: p.RatingMin, RowLimit: p.RowLimit}
}

func countParams(org uuid.UUID, a filterArgs) db.FeedbackCountByStatusParams {
	p := listParams(org, a, 0)
	return db.FeedbackCountByStatusParams{OrgID: org, FeedbackType: p.FeedbackType, Tag: p.Tag, Model: p.Model, RatingMin: p.RatingMin}
}

// One query lists an organisation's model names: each once, in order,
// none empty, none of another organisation.
func TestFeedbackModels(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org := seedQueue(t, pool, 90)
	other := seedQueue(t, pool, 3)
	for _, m := range []struct {
		org   uuid.UUID
		model string
	}{{org, ""}, {other, "other-v1"}} {
		if _, err := pool.Exec(ctx, `INSERT INTO feedback (org_id, query, response, model, feedback_type, status, source, content_hash)
			VALUES ($1, 'q', 'r', $2::text, 'thumbs_up', 'pending', 'api', sha256(convert_to($2::text || 'x', 'UTF8')))`, m.org, m.model); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.New(pool).FeedbackListModels(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "support-v1,support-v2,triage-v1" {
		t.Fatalf("models %v, want support-v1, support-v2, triage-v1", got)
	}
}
