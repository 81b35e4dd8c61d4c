package review_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/stats"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	pool  *pgxpool.Pool
	svc   *review.Service
	org   uuid.UUID
	admin audit.Actor
}

func newEnv(t *testing.T) env {
	t.Helper()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	e := env{pool: pool, svc: review.New(pool), org: org.ID}
	e.admin = e.user(t, "ada@acme.test", "admin")
	return e
}

// user creates a user and returns them as an actor.
func (e env) user(t *testing.T, email, role string) audit.Actor {
	t.Helper()
	u, err := accounts.New(e.pool, accounts.DefaultSessionTTL).CreateUser(context.Background(), audit.System, e.org, accounts.NewUser{Email: email, Role: role, Password: "a-long-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	return audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}
}

// curators creates n curators.
func (e env) curators(t *testing.T, n int) []audit.Actor {
	out := make([]audit.Actor, n)
	for i := range out {
		out[i] = e.user(t, fmt.Sprintf("cur%d@acme.test", i), "curator")
	}
	return out
}

// items stores n pending items tagged tag, oldest first.
func (e env) items(t *testing.T, n int, tag string) []uuid.UUID {
	t.Helper()
	fb := feedback.Service{Pool: e.pool}
	out := make([]uuid.UUID, n)
	for i := range out {
		row, _, err := fb.Ingest(context.Background(), e.org, "api", feedback.Item{Query: fmt.Sprintf("question %s %d", tag, i),
			Response: fmt.Sprintf("answer %d", i), FeedbackType: "thumbs_down", Tags: []string{tag}})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = row.ID
	}
	return out
}

func (e env) plan(t *testing.T, tag string, overlap int) uuid.UUID {
	t.Helper()
	p, err := e.svc.CreatePlan(context.Background(), e.admin, e.org, review.NewPlan{Filter: feedback.Filter{Tag: tag}, Overlap: overlap, Rules: review.DefaultRules})
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func (e env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func intp(n int) *int { return &n }

// The rules say which kinds of label are in dispute; each case is worked
// out by hand from the rule's wording.
func TestDisagreementRules(t *testing.T) {
	t.Parallel()
	r := review.DefaultRules
	tagsRule := review.Rules{RatingTolerance: 1, DimensionTolerance: 1, TagsMustMatch: true}
	dims := func(acc, safe *int) [4]*int { return [4]*int{acc, nil, nil, safe} }
	for _, tc := range []struct {
		name   string
		rules  review.Rules
		labels []review.Label
		want   []string
	}{
		{"same status", r, []review.Label{{Status: "approved"}, {Status: "approved"}}, nil},
		{"statuses differ", r, []review.Label{{Status: "approved"}, {Status: "rejected"}}, []string{"status"}},
		{"corrected against needs correction", r, []review.Label{{Status: "corrected"}, {Status: "needs_correction"}}, []string{"status"}},
		{"ratings 1 apart agree", r, []review.Label{{Status: "approved", Rating: intp(3)}, {Status: "approved", Rating: intp(4)}}, nil},
		{"ratings 2 apart", r, []review.Label{{Status: "approved", Rating: intp(3)}, {Status: "approved", Rating: intp(5)}}, []string{"rating"}},
		{"a rating only one gave", r, []review.Label{{Status: "approved", Rating: intp(1)}, {Status: "approved"}}, nil},
		{"three reviewers, outer two 2 apart", r, []review.Label{{Status: "approved", Rating: intp(2)}, {Status: "approved", Rating: intp(3)}, {Status: "approved", Rating: intp(4)}}, []string{"rating"}},
		{"tolerance 0", review.Rules{}, []review.Label{{Status: "approved", Rating: intp(3)}, {Status: "approved", Rating: intp(4)}}, []string{"rating"}},
		{"a dimension 3 apart", r, []review.Label{{Status: "approved", Dimensions: dims(intp(2), intp(5))}, {Status: "approved", Dimensions: dims(intp(2), intp(2))}}, []string{"dimensions"}},
		{"dimensions close", r, []review.Label{{Status: "approved", Dimensions: dims(intp(2), intp(4))}, {Status: "approved", Dimensions: dims(intp(3), intp(5))}}, nil},
		{"tags differ, not a rule", r, []review.Label{{Status: "approved", Tags: []string{"a"}}, {Status: "approved", Tags: []string{"b"}}}, nil},
		{"tags differ under the rule", tagsRule, []review.Label{{Status: "approved", Tags: []string{"a"}}, {Status: "approved", Tags: []string{"b"}}}, []string{"tags"}},
		{"tags in another order", tagsRule, []review.Label{{Status: "approved", Tags: []string{"a", "b"}}, {Status: "approved", Tags: []string{"b", "a"}}}, nil},
		{"everything at once", tagsRule, []review.Label{{Status: "approved", Rating: intp(1), Dimensions: dims(intp(1), nil), Tags: []string{"a"}},
			{Status: "rejected", Rating: intp(5), Dimensions: dims(intp(5), nil)}}, []string{"status", "rating", "dimensions", "tags"}},
		{"corrections worded apart", r, []review.Label{{Status: "corrected", Correction: "one"}, {Status: "corrected", Correction: "two"}}, nil},
	} {
		got := tc.rules.Disagreements(tc.labels)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Many reviewers asking for their next item at once never take an item
// more than its overlap, never get an item twice, and every item ends
// with exactly k reviews.
func TestNextNeverOverAssigns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const k, nItems = 2, 12
	items := e.items(t, nItems, "race")
	plan := e.plan(t, "race", k)
	reviewers := e.curators(t, 5)

	// First, one round of simultaneous asks on a plan of one item.
	single := e.items(t, 1, "single")
	one := e.plan(t, "single", k)
	got := make([]uuid.UUID, len(reviewers))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, r := range reviewers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id, err := e.svc.Next(ctx, r, e.org, one)
			if err != nil {
				t.Error(err)
			}
			got[i] = id
		}()
	}
	close(start)
	wg.Wait()
	taken := 0
	for _, id := range got {
		if id == single[0] {
			taken++
		} else if id != uuid.Nil {
			t.Errorf("next gave %s, not the plan's item", id)
		}
	}
	if taken != k {
		t.Errorf("%d reviewers got the single item, want exactly %d", taken, k)
	}

	// Then every reviewer works through the plan at the same time,
	// submitting each item it is given.
	var mu sync.Mutex
	seen := map[uuid.UUID]map[uuid.UUID]int{} // reviewer -> item -> times given
	for _, r := range reviewers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id, err := e.svc.Next(ctx, r, e.org, plan)
				if err != nil {
					t.Error(err)
					return
				}
				if id == uuid.Nil {
					return
				}
				mu.Lock()
				if seen[r.ID] == nil {
					seen[r.ID] = map[uuid.UUID]int{}
				}
				seen[r.ID][id]++
				mu.Unlock()
				if _, err := e.svc.Submit(ctx, r, e.org, id, review.Input{Status: "approved"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for r, byItem := range seen {
		for id, n := range byItem {
			if n > 1 {
				t.Errorf("reviewer %s was given item %s %d times", r, id, n)
			}
		}
	}
	for _, id := range items {
		var assigned, submitted, labels int
		var state string
		err := e.pool.QueryRow(ctx, `SELECT r.assigned, r.submitted, r.state::text, (SELECT count(*) FROM review_labels l WHERE l.feedback_id = r.feedback_id)
			FROM review_items r WHERE r.feedback_id = $1`, id).Scan(&assigned, &submitted, &state, &labels)
		if err != nil {
			t.Fatalf("item %s: %v", id, err)
		}
		if assigned != k || submitted != k || labels != k || state != "agreed" {
			t.Errorf("item %s: assigned %d, submitted %d, labels %d, %s; want %d each and agreed", id, assigned, submitted, labels, state, k)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM (SELECT feedback_id, reviewer_id FROM review_labels GROUP BY 1, 2 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d reviewer-item pairs labelled twice", n)
	}
}

// Items are handed out breadth first: a reviewer gets the item with the
// fewest reviews taken that they have not reviewed, oldest first among
// equals, so no item runs ahead while others wait; and the one they hold
// comes back until they submit it.
func TestNextSpreadsEvenly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 4, "even")
	plan := e.plan(t, "even", 2)
	rs := e.curators(t, 3)
	order := []int{} // the index of each item handed out
	index := map[uuid.UUID]int{}
	for i, id := range items {
		index[id] = i
	}
	for round := 0; ; round++ {
		r := rs[round%len(rs)]
		id, err := e.svc.Next(ctx, r, e.org, plan)
		if err != nil {
			t.Fatal(err)
		}
		if id == uuid.Nil {
			if round < 8 {
				t.Fatalf("nothing left after %d reviews, want 8", round)
			}
			break
		}
		again, err := e.svc.Next(ctx, r, e.org, plan)
		if err != nil || again != id {
			t.Fatalf("asking again gave %s (%v), want the held %s", again, err, id)
		}
		order = append(order, index[id])
		counts := map[int]int{}
		for _, i := range order {
			counts[i]++
		}
		lo, hi := math.MaxInt, 0
		for i := range items {
			lo, hi = min(lo, counts[i]), max(hi, counts[i])
		}
		if hi-lo > 1 {
			t.Fatalf("after %v the items' reviews range from %d to %d", order, lo, hi)
		}
		if _, err := e.svc.Submit(ctx, r, e.org, id, review.Input{Status: "approved"}); err != nil {
			t.Fatal(err)
		}
	}
	// By hand: reviewers 0, 1, 2, 0 take items 0, 1, 2, 3 (none taken
	// yet, oldest first); then every item has one and each reviewer takes
	// the oldest it has not reviewed: reviewer 1 item 0, reviewer 2 item 1,
	// reviewer 0 item 2 (it holds 0 and 3), reviewer 1 item 3.
	if want := []int{0, 1, 2, 3, 0, 1, 2, 3}; !slices.Equal(order, want) {
		t.Errorf("items handed out in order %v, want %v", order, want)
	}
	if len(order) != 8 {
		t.Errorf("%d reviews handed out, want 4 items × 2", len(order))
	}
}

// A reviewer cannot read the others' labels before submitting their own:
// ForItem hides them (and who gave them) and counts them; after the
// reviewer submits, or once the item's reviews are complete, everyone
// reads them.
func TestBlindReview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 1, "blind")
	id := items[0]
	e.plan(t, "blind", 3)
	rs := e.curators(t, 3)
	viewer := e.user(t, "vic@acme.test", "viewer")

	if _, err := e.svc.Submit(ctx, rs[0], e.org, id, review.Input{Status: "rejected", Note: "wrong figure"}); err != nil {
		t.Fatal(err)
	}
	// The second reviewer, before and after taking the item.
	for _, take := range []bool{false, true} {
		if take {
			if err := e.svc.Take(ctx, rs[1], e.org, id); err != nil {
				t.Fatal(err)
			}
		}
		it, err := e.svc.ForItem(ctx, e.org, id, rs[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(it.Reviews) != 0 || it.Hidden != 1 || !it.Blind() || !it.CanReview {
			t.Errorf("take %v: second reviewer reads %d reviews, %d hidden, blind %v, can review %v; want 0, 1, true, true",
				take, len(it.Reviews), it.Hidden, it.Blind(), it.CanReview)
		}
	}
	// Nobody else reads them while the reviews are open either.
	for _, who := range []uuid.UUID{viewer.ID, uuid.Nil, e.admin.ID} {
		it, err := e.svc.ForItem(ctx, e.org, id, who)
		if err != nil {
			t.Fatal(err)
		}
		if len(it.Reviews) != 0 || it.Hidden != 1 {
			t.Errorf("%s reads %d reviews while open", who, len(it.Reviews))
		}
	}
	if _, err := e.svc.Submit(ctx, rs[1], e.org, id, review.Input{Status: "approved"}); err != nil {
		t.Fatal(err)
	}
	it, err := e.svc.ForItem(ctx, e.org, id, rs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(it.Reviews) != 2 || it.Hidden != 0 || it.Blind() || it.CanReview {
		t.Errorf("after submitting: %d reviews, %d hidden, blind %v, can review %v", len(it.Reviews), it.Hidden, it.Blind(), it.CanReview)
	}
	// Agreement figures leave the open item out, or they could give its
	// labels away.
	if a, err := e.svc.Agreement(ctx, e.org, feedback.Filter{Tag: "blind"}, nil); err != nil || a.Labels != 0 {
		t.Errorf("agreement over an open item reads %d labels (%v)", a.Labels, err)
	}
	// The third reviewer is still blind; a submitted review is final.
	if it, _ := e.svc.ForItem(ctx, e.org, id, rs[2].ID); len(it.Reviews) != 0 || it.Hidden != 2 {
		t.Errorf("third reviewer reads %d reviews before submitting", len(it.Reviews))
	}
	var conflict *errs.Conflict
	if _, err := e.svc.Submit(ctx, rs[1], e.org, id, review.Input{Status: "rejected"}); !errors.As(err, &conflict) {
		t.Errorf("a second submission: %v, want a conflict", err)
	}
	if _, err := e.svc.Submit(ctx, rs[2], e.org, id, review.Input{Status: "approved"}); err != nil {
		t.Fatal(err)
	}
	if it, _ := e.svc.ForItem(ctx, e.org, id, viewer.ID); len(it.Reviews) != 3 || it.State != "disputed" {
		t.Errorf("complete: a viewer reads %d reviews, state %s; want 3, disputed", len(it.Reviews), it.State)
	}
	if a, err := e.svc.Agreement(ctx, e.org, feedback.Filter{Tag: "blind"}, nil); err != nil || a.Labels != 3 {
		t.Errorf("agreement over the complete item reads %d labels (%v), want 3", a.Labels, err)
	}
	// A fourth reviewer finds no review left to take.
	late := e.user(t, "late@acme.test", "curator")
	if err := e.svc.Take(ctx, late, e.org, id); !errors.As(err, &conflict) {
		t.Errorf("taking a complete item: %v, want a conflict", err)
	}
}

// The last review settles the item: agreeing reviewers set its status
// (a corrected one with the first reviewer's correction), with a line in
// its history; disagreeing ones leave it pending and disputed. The queue's
// own verdicts are refused while the reviewers hold it.
func TestSubmitSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 3, "settle")
	e.plan(t, "settle", 2)
	rs := e.curators(t, 2)
	fb := feedback.Service{Pool: e.pool}

	// Held from the queue's verdicts before anyone starts, and while open.
	status := "approved"
	var conflict *errs.Conflict
	if _, err := fb.Update(ctx, rs[0], e.org, items[0], 1, feedback.Change{Status: &status}); !errors.As(err, &conflict) {
		t.Errorf("approving an item a plan covers: %v, want a conflict", err)
	}
	tags := []string{"settle", "extra"}
	if _, err := fb.Update(ctx, rs[0], e.org, items[0], 1, feedback.Change{Tags: &tags}); err != nil {
		t.Errorf("tagging an item a plan covers: %v", err)
	}
	if _, err := fb.ApplyBulk(ctx, rs[0], e.org, feedback.Bulk{IDs: items, Status: "rejected"}, -1); !errors.As(err, &conflict) {
		t.Errorf("bulk rejecting items a plan covers: %v, want a conflict", err)
	}

	submit := func(r audit.Actor, id uuid.UUID, in review.Input) review.Outcome {
		t.Helper()
		out, err := e.svc.Submit(ctx, r, e.org, id, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := submit(rs[0], items[0], review.Input{Correction: "first fix", Rating: intp(2)}); out.State != "open" || out.Submitted != 1 {
		t.Errorf("first review: %+v", out)
	}
	out := submit(rs[1], items[0], review.Input{Status: "corrected", Correction: "second fix", Rating: intp(3)})
	if out.State != "agreed" || out.Status != "corrected" {
		t.Errorf("agreeing reviews: %+v", out)
	}
	var st, correction string
	if err := e.pool.QueryRow(ctx, "SELECT status::text, correction FROM feedback WHERE id = $1", items[0]).Scan(&st, &correction); err != nil {
		t.Fatal(err)
	}
	if st != "corrected" || correction != "first fix" {
		t.Errorf("agreed item: %s %q, want corrected with the first correction", st, correction)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1 AND action = 'agree' AND to_status = 'corrected'", items[0]); n != 1 {
		t.Errorf("%d agree lines in the history", n)
	}
	if n := e.count(t, "SELECT count(*) FROM audit_log WHERE action = 'review.agree' AND target_id = $1", items[0].String()); n != 1 {
		t.Errorf("%d review.agree audit entries", n)
	}
	// Settled: the queue's verdicts are open again.
	if _, err := fb.Update(ctx, rs[0], e.org, items[0], 3, feedback.Change{Status: &status}); err != nil {
		t.Errorf("approving an agreed item: %v", err)
	}

	submit(rs[0], items[1], review.Input{Status: "approved", Rating: intp(5)})
	out = submit(rs[1], items[1], review.Input{Status: "approved", Rating: intp(2)})
	if out.State != "disputed" || !slices.Equal(out.Disagreements, []string{"rating"}) {
		t.Errorf("ratings 3 apart: %+v", out)
	}
	if err := e.pool.QueryRow(ctx, "SELECT status::text FROM feedback WHERE id = $1", items[1]).Scan(&st); err != nil || st != "pending" {
		t.Errorf("disputed item is %s (%v), want pending", st, err)
	}
	if _, err := fb.Update(ctx, rs[0], e.org, items[1], 2, feedback.Change{Status: &status}); !errors.As(err, &conflict) {
		t.Errorf("approving a disputed item: %v, want a conflict", err)
	}
	if n, err := e.svc.Disputed(ctx, e.org); err != nil || n != 1 {
		t.Errorf("%d disputed (%v), want 1", n, err)
	}
	// Bad labels are refused whole.
	var invalid *errs.Invalid
	for _, in := range []review.Input{{}, {Status: "pending"}, {Status: "corrected"}, {Status: "approved", Rating: intp(6)}, {Status: "approved", Note: "a\x00b"}} {
		if _, err := e.svc.Submit(ctx, rs[0], e.org, items[2], in); !errors.As(err, &invalid) {
			t.Errorf("label %+v: %v, want invalid", in, err)
		}
	}
	if n := e.count(t, "SELECT count(*) FROM review_labels WHERE feedback_id = $1", items[2]); n != 0 {
		t.Errorf("refused labels left %d assignments", n)
	}
	// An API key gives no review.
	key := audit.Actor{Kind: "api_key", ID: uuid.New(), Label: "notebook"}
	if _, err := e.svc.Submit(ctx, key, e.org, items[2], review.Input{Status: "approved"}); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("a key's review: %v, want forbidden", err)
	}
}

// Only admins and named adjudicators decide; the decision needs a note,
// becomes the item's status with the adjudicator as its reviewer, and is
// in the item's history and the audit log with its note.
func TestAdjudicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 1, "adj")
	id := items[0]
	e.plan(t, "adj", 2)
	rs := e.curators(t, 2)
	senior := e.user(t, "senior@acme.test", "curator")
	for i, s := range []string{"approved", "rejected"} {
		if _, err := e.svc.Submit(ctx, rs[i], e.org, id, review.Input{Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	d := review.Decision{Status: "approved", Note: "the figure is right; the rejection misread it"}
	if err := e.svc.Decide(ctx, senior, review.Judge{UserID: senior.ID}, e.org, id, d); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("an unnamed curator decides: %v, want forbidden", err)
	}
	if err := e.svc.AddAdjudicator(ctx, e.admin, e.org, senior.ID); err != nil {
		t.Fatal(err)
	}
	var invalid *errs.Invalid
	if err := e.svc.Decide(ctx, senior, review.Judge{UserID: senior.ID}, e.org, id, review.Decision{Status: "approved"}); !errors.As(err, &invalid) || invalid.ByField()["note"] == "" {
		t.Errorf("a decision without a note: %v, want a note error", err)
	}
	if err := e.svc.Decide(ctx, senior, review.Judge{UserID: senior.ID}, e.org, id, d); err != nil {
		t.Fatal(err)
	}
	var st string
	var reviewer uuid.UUID
	if err := e.pool.QueryRow(ctx, "SELECT status::text, reviewer_id FROM feedback WHERE id = $1", id).Scan(&st, &reviewer); err != nil {
		t.Fatal(err)
	}
	if st != "approved" || reviewer != senior.ID {
		t.Errorf("decided item: %s by %s, want approved by the adjudicator", st, reviewer)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback_reviews WHERE feedback_id = $1 AND action = 'adjudicate' AND note = $2 AND actor_id = $3", id, d.Note, senior.ID); n != 1 {
		t.Errorf("%d adjudicate lines in the history", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'review.adjudicate' AND target_id = $1 AND actor_id = $2
		AND details->>'note' = $3 AND details->>'to' = 'approved' AND details->>'from' = 'pending'`, id.String(), senior.ID, d.Note); n != 1 {
		t.Errorf("%d review.adjudicate audit entries with the note", n)
	}
	var conflict *errs.Conflict
	if err := e.svc.Decide(ctx, e.admin, review.Judge{UserID: e.admin.ID, Admin: true}, e.org, id, d); !errors.As(err, &conflict) {
		t.Errorf("deciding twice: %v, want a conflict", err)
	}
	disputes, _, err := e.svc.Disputes(ctx, e.org, true, nil, 10)
	if err != nil || len(disputes) != 1 || len(disputes[0].Reviews) != 2 || disputes[0].DecisionNote != d.Note {
		t.Errorf("decided list: %+v (%v)", disputes, err)
	}
	// Another organisation's adjudicator cannot reach it.
	other, err := accounts.New(e.pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "other", "Other")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Decide(ctx, e.admin, review.Judge{Admin: true}, other.ID, id, d); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation decides: %v, want not found", err)
	}
}

// The agreement figures are internal/stats' on the same labels: each pair's
// Cohen's kappa, alpha at the kind's level and Fleiss' kappa. One figure is
// also worked out by hand: two reviewers, five items, statuses
// A A R A R and A A R A A: p_o = 4/5, p_e = 3/5·4/5 + 2/5·1/5 = 14/25,
// kappa = (0.8 - 0.56) / 0.44 = 0.5454.
func TestAgreementEqualsStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 6, "agree")
	e.plan(t, "agree", 3)
	rs := e.curators(t, 4)
	// labels[r][i]: reviewer r's status and rating of item i ("" skips).
	type lab struct {
		status string
		rating int
	}
	labels := [][]lab{
		{{"approved", 5}, {"approved", 4}, {"rejected", 1}, {"approved", 4}, {"rejected", 2}, {"", 0}},
		{{"approved", 4}, {"approved", 4}, {"rejected", 2}, {"approved", 5}, {"approved", 4}, {"approved", 3}},
		{{"approved", 5}, {"", 0}, {"rejected", 1}, {"needs_correction", 2}, {"", 0}, {"rejected", 1}},
		{{"", 0}, {"rejected", 2}, {"", 0}, {"", 0}, {"rejected", 1}, {"approved", 4}},
	}
	for r, row := range labels {
		for i, l := range row {
			if l.status == "" {
				continue
			}
			if _, err := e.svc.Submit(ctx, rs[r], e.org, items[i], review.Input{Status: l.status, Rating: intp(l.rating)}); err != nil {
				t.Fatalf("reviewer %d item %d: %v", r, i, err)
			}
		}
	}
	a, err := e.svc.Agreement(ctx, e.org, feedback.Filter{Tag: "agree"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Items != 6 || a.Labels != 18 || len(a.Reviewers) != 4 {
		t.Fatalf("%d items, %d labels, %d reviewers; want 6, 18, 4", a.Items, a.Labels, len(a.Reviewers))
	}
	// The matrix in the agreement's own order: items by id, reviewers by
	// e-mail (cur0 … cur3, as created).
	order := slices.Clone(items)
	slices.SortFunc(order, func(x, y uuid.UUID) int { return cmpString(x.String(), y.String()) })
	pos := map[uuid.UUID]int{}
	for i, id := range items {
		pos[id] = i
	}
	matrix := func(value func(lab) stats.Rating) stats.Ratings {
		m := stats.Ratings{}
		for _, id := range order {
			row := make([]stats.Rating, len(rs))
			for r := range rs {
				if l := labels[r][pos[id]]; l.status != "" {
					row[r] = value(l)
				}
			}
			m = append(m, row)
		}
		return m
	}
	status := matrix(func(l lab) stats.Rating { return stats.Text(l.status) })
	rating := matrix(func(l lab) stats.Rating { return stats.Number(float64(l.rating)) })
	kind := func(name string) review.KindAgreement {
		for _, k := range a.Kinds {
			if k.Kind == name {
				return k
			}
		}
		t.Fatalf("no kind %s", name)
		return review.KindAgreement{}
	}
	near := func(what string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s: %v, want %.6f", what, got, want)
		}
	}
	st := kind("status")
	alpha, err := stats.Alpha(status, stats.LevelNominal)
	if err != nil {
		t.Fatal(err)
	}
	near("status alpha", st.Alpha.Value, alpha.Value)
	if st.Alpha.Units != alpha.Units || st.Alpha.Pairable != alpha.Pairable {
		t.Errorf("status alpha counts %+v, want %d units %d labels", st.Alpha, alpha.Units, alpha.Pairable)
	}
	ra := kind("rating")
	ordinal, _ := stats.Alpha(rating, stats.LevelOrdinal)
	interval, _ := stats.Alpha(rating, stats.LevelInterval)
	near("rating alpha (ordinal)", ra.Alpha.Value, ordinal.Value)
	near("rating alpha (interval)", ra.AlphaInterval.Value, interval.Value)
	// Fleiss over the items with the usual count: 3 labels each.
	var three stats.Ratings
	for _, row := range status {
		n := 0
		for _, v := range row {
			if !v.Missing() {
				n++
			}
		}
		if n == 3 {
			three = append(three, row)
		}
	}
	fl, err := stats.Fleiss(three)
	if err != nil {
		t.Fatal(err)
	}
	near("status Fleiss", st.Fleiss.Value, fl.Value)
	// Every pair: Cohen's kappa over the items both reviewed.
	if len(st.Pairs) != 6 {
		t.Fatalf("%d pairs, want 6", len(st.Pairs))
	}
	for _, p := range st.Pairs {
		x, y := reviewerIndex(t, rs, p.A.ID), reviewerIndex(t, rs, p.B.ID)
		var m stats.Ratings
		for _, row := range status {
			if !row[x].Missing() && !row[y].Missing() {
				m = append(m, []stats.Rating{row[x], row[y]})
			}
		}
		if p.Units != len(m) {
			t.Errorf("pair %s/%s: %d units, want %d", p.A.Email, p.B.Email, p.Units, len(m))
		}
		want, err := stats.Cohen(m)
		if err != nil {
			if p.Value != nil {
				t.Errorf("pair %s/%s: %v where stats refuses (%v)", p.A.Email, p.B.Email, *p.Value, err)
			}
			continue
		}
		near("pair "+p.A.Email+"/"+p.B.Email, p.Value, want.Value)
		if x == 0 && y == 1 {
			// Reviewers 0 and 1 share items 0-4: the hand-worked example.
			near("cur0/cur1 by hand", p.Value, 0.24/0.44)
			if p.Agreed != 4 || p.Units != 5 {
				t.Errorf("cur0/cur1: %d of %d alike, want 4 of 5", p.Agreed, p.Units)
			}
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func reviewerIndex(t *testing.T, rs []audit.Actor, id uuid.UUID) int {
	for i, r := range rs {
		if r.ID == id {
			return i
		}
	}
	t.Fatalf("no reviewer %s", id)
	return -1
}

// KeepSettled, the collect step's filter, keeps items never under
// overlapping review and agreed or adjudicated ones, and leaves out open
// and disputed ones, counted apart.
func TestKeepSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	free := e.items(t, 1, "free")
	items := e.items(t, 3, "keep")
	plan := e.plan(t, "keep", 2)
	rs := e.curators(t, 2)
	for i, s := range []string{"approved", "rejected"} {
		if _, err := e.svc.Submit(ctx, rs[i], e.org, items[0], review.Input{Status: "approved"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Submit(ctx, rs[i], e.org, items[1], review.Input{Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Submit(ctx, rs[0], e.org, items[2], review.Input{Status: "approved"}); err != nil {
		t.Fatal(err)
	}
	ids := []uuid.UUID{free[0], items[0], items[1], items[2]}
	got, err := e.svc.KeepSettled(ctx, e.org, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Kept, []uuid.UUID{free[0], items[0]}) || !slices.Equal(got.Disputed, []uuid.UUID{items[1]}) ||
		!slices.Equal(got.Open, []uuid.UUID{items[2]}) || got.LeftOut() != 2 {
		t.Errorf("kept %v, disputed %v, open %v", got.Kept, got.Disputed, got.Open)
	}
	// A plan that ends leaves its open items to the queue: they count as
	// settled; a dispute still waits for its adjudicator.
	if _, err := e.svc.EndPlan(ctx, e.admin, e.org, plan); err != nil {
		t.Fatal(err)
	}
	got, err = e.svc.KeepSettled(ctx, e.org, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Kept, []uuid.UUID{free[0], items[0], items[2]}) || !slices.Equal(got.Disputed, []uuid.UUID{items[1]}) || len(got.Open) != 0 {
		t.Errorf("after the plan ended: kept %v, disputed %v, open %v", got.Kept, got.Disputed, got.Open)
	}
	status := "approved"
	var conflict *errs.Conflict
	fb := feedback.Service{Pool: e.pool}
	if _, err := fb.Update(ctx, rs[0], e.org, items[2], 1, feedback.Change{Status: &status}); err != nil {
		t.Errorf("approving an ended plan's open item: %v", err)
	}
	if _, err := fb.Update(ctx, rs[0], e.org, items[1], 1, feedback.Change{Status: &status}); !errors.As(err, &conflict) {
		t.Errorf("approving a disputed item of an ended plan: %v, want a conflict", err)
	}
}

// A reviewer reviews what the plan hands them: the item Next gave them, or
// one of the items Next would consider for them now. An item far down the
// plan's order (another reviewer's to be handed first) is refused with
// the plan's name, and no review of it is taken.
func TestReviewOnlyOnItemsHanded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	items := e.items(t, 25, "handed")
	plan := e.plan(t, "handed", 2)
	rs := e.curators(t, 2)

	var conflict *errs.Conflict
	_, err := e.svc.Submit(ctx, rs[0], e.org, items[24], review.Input{Status: "approved"})
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "not handed you") || !strings.Contains(conflict.Message, "Tag “handed”") {
		t.Fatalf("a review of the 25th item, never handed: %v; want a conflict naming the plan", err)
	}
	if n := e.count(t, "SELECT count(*) FROM review_labels"); n != 0 {
		t.Errorf("the refused review took %d reviews", n)
	}
	if n := e.count(t, "SELECT coalesce(sum(assigned), 0)::int FROM review_items"); n != 0 {
		t.Errorf("the refused review counted %d taken", n)
	}
	if it, err := e.svc.ForItem(ctx, e.org, items[24], rs[0].ID); err != nil || it.CanReview {
		t.Errorf("the item page offers the review of an item never handed: %+v, %v", it, err)
	}
	// What Next hands is reviewed; an item among those it would consider
	// is too.
	id, err := e.svc.Next(ctx, rs[1], e.org, plan)
	if err != nil || id != items[0] {
		t.Fatalf("next: %v, %v; want the oldest item", id, err)
	}
	if _, err := e.svc.Submit(ctx, rs[1], e.org, id, review.Input{Status: "approved"}); err != nil {
		t.Errorf("the item Next handed: %v", err)
	}
	if _, err := e.svc.Submit(ctx, rs[0], e.org, items[3], review.Input{Status: "approved"}); err != nil {
		t.Errorf("an item Next would consider: %v", err)
	}
}
