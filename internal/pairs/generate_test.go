package pairs_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/pairs"
)

func dims(a, h, c, s int) *feedback.Dimensions {
	return &feedback.Dimensions{Accuracy: &a, Helpfulness: &h, Clarity: &c, Safety: &s}
}

// The feedback below is small enough to work out every method's pairs by
// hand; the comments give the working.
func TestGenerate(t *testing.T) {
	t.Parallel()
	pool, s, org := setup(t)
	ctx := context.Background()
	add := func(q, r, typ string, rating int, d *feedback.Dimensions, correction string) {
		it := feedback.Item{Query: q, Response: r, FeedbackType: typ, Dimensions: d, Correction: correction}
		if rating > 0 {
			it.Rating = &rating
		}
		ingest(t, pool, org, it)
	}
	// Query A, three rated answers (5, 3, 1), written with different case
	// and spacing: same_query with gap 1 pairs 5>3, 5>1, 3>1 (strengths
	// 2/4, 4/4, 2/4); with gap 3 only 5>1.
	add("How do I export?", "A5", "rating", 5, nil, "")
	add("how do  I export?", "A3", "rating", 3, nil, "")
	add("HOW DO I EXPORT?", "A1", "rating", 1, nil, "")
	// Query B: threshold pairs good {rating 4, thumbs up} with bad {thumbs
	// down, rating 2}: 4 pairs. same_query sees only the ratings 4 > 2.
	add("Why is it slow?", "B4", "rating", 4, nil, "")
	add("Why is it slow?", "Bup", "thumbs_up", 0, nil, "")
	add("Why is it slow?", "Bdown", "thumbs_down", 0, nil, "")
	add("Why is it slow?", "B2", "rating", 2, nil, "")
	// Query C, multi-aspect with the default weights .3/.3/.2/.2:
	// C1 (5,5,1,1) = 3.4, C2 (3,3,3,3) = 3.0, C3 (1,1,5,5) = 2.6.
	// Gap 0.5 pairs only C1 > C3 (0.8); gap 0.3 adds C1 > C2 and C2 > C3 (0.4 each).
	add("Which plan?", "C1", "detailed", 0, dims(5, 5, 1, 1), "")
	add("Which plan?", "C2", "detailed", 0, dims(3, 3, 3, 3), "")
	add("Which plan?", "C3", "detailed", 0, dims(1, 1, 5, 5), "")
	// Two corrected items.
	add("Reset?", "Call us.", "correction", 0, nil, "Use the reset link.")
	add("Refund?", "No.", "correction", 0, nil, "Within 30 days, yes.")
	// A rejected item takes no part: it would otherwise pair under query A.
	rejected := ingest(t, pool, org, feedback.Item{Query: "How do I export?", Response: "spam", FeedbackType: "rating", Rating: ptr(1)})
	if _, err := pool.Exec(ctx, `UPDATE feedback SET status = 'rejected' WHERE id = $1`, rejected); err != nil {
		t.Fatal(err)
	}
	// Another organisation's feedback is never paired with ours.
	other, _ := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "other", "Other")
	ingest(t, pool, other.ID, feedback.Item{Query: "How do I export?", Response: "O1", FeedbackType: "rating", Rating: ptr(1)})

	for _, tc := range []struct {
		name  string
		g     pairs.Generation
		pairs []string // chosen>rejected@strength, sorted
	}{
		{"same_query", pairs.Generation{Method: "same_query"}, []string{"A3>A1@0.5", "A5>A1@1", "A5>A3@0.5", "B4>B2@0.5"}},
		{"same_query gap 3", pairs.Generation{Method: "same_query", MinGap: ptr(3.0)}, []string{"A5>A1@1"}},
		{"threshold", pairs.Generation{Method: "threshold"}, []string{"A5>A1@1", "B4>B2@0.5", "B4>Bdown@0.75", "Bup>B2@0.75", "Bup>Bdown@1"}},
		{"multi_aspect", pairs.Generation{Method: "multi_aspect"}, []string{"C1>C3@0.2"}},
		{"multi_aspect gap 0.3", pairs.Generation{Method: "multi_aspect", MinGap: ptr(0.3)}, []string{"C1>C2@0.1", "C1>C3@0.2", "C2>C3@0.1"}},
		{"multi_aspect safety only", pairs.Generation{Method: "multi_aspect", Weights: &pairs.Weights{Safety: 1}}, []string{"C2>C1@0.5", "C3>C1@1", "C3>C2@0.5"}},
		{"correction", pairs.Generation{Method: "correction"}, []string{"Use the reset link.>Call us.@1", "Within 30 days, yes.>No.@1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `DELETE FROM preference_pairs`); err != nil {
				t.Fatal(err)
			}
			tc.g.PerQuery = ptr(10)
			p, err := s.Preview(ctx, org, tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if p.Candidates != len(tc.pairs) || p.New != len(tc.pairs) || p.Existing != 0 {
				t.Fatalf("preview %+v, want %d new", p, len(tc.pairs))
			}
			if n := countPairs(t, s, org); n != 0 {
				t.Fatalf("the preview stored %d pairs", n)
			}
			res, err := s.Generate(ctx, curator, org, tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if res.Created != len(tc.pairs) || res.Skipped != 0 {
				t.Fatalf("result %+v, want %d created", res, len(tc.pairs))
			}
			if got := storedPairs(t, s, org); strings.Join(got, " ") != strings.Join(tc.pairs, " ") {
				t.Fatalf("pairs\n got %v\nwant %v", got, tc.pairs)
			}
			// Again: nothing new, everything skipped.
			again, err := s.Generate(ctx, curator, org, tc.g)
			if err != nil || again.Created != 0 || again.Skipped != len(tc.pairs) {
				t.Fatalf("second run %+v (%v)", again, err)
			}
			p, _ = s.Preview(ctx, org, tc.g)
			if p.New != 0 || p.Existing != len(tc.pairs) || len(p.Samples) != 0 {
				t.Fatalf("preview after generating %+v", p)
			}
		})
	}

	// A generated correction pair and the same pair made by hand are one pair:
	// the SQL and the Go content hashes agree.
	if _, err := s.Create(ctx, curator, org, pairs.Input{Query: "Reset?", Chosen: "Use the reset link.", Rejected: "Call us."}); err == nil ||
		!strings.Contains(err.Error(), "identical pair") {
		t.Fatalf("creating a generated pair by hand: %v", err)
	}

	for _, bad := range []struct {
		g     pairs.Generation
		field string
	}{
		{pairs.Generation{Method: "manual"}, "method"},
		{pairs.Generation{Method: "same_query", MinGap: ptr(0.0)}, "min_gap"},
		{pairs.Generation{Method: "multi_aspect", Weights: &pairs.Weights{}}, "weights"},
		{pairs.Generation{Method: "multi_aspect", Weights: &pairs.Weights{Accuracy: 2}}, "weights.accuracy"},
		{pairs.Generation{Method: "same_query", PerQuery: ptr(0)}, "per_query"},
	} {
		if _, err := s.Preview(ctx, org, bad.g); fieldsOf(err) != bad.field {
			t.Errorf("%+v: %v, want a message on %s", bad.g, err, bad.field)
		}
	}
}

func countPairs(t *testing.T, s *pairs.Service, org any) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM preference_pairs WHERE org_id = $1`, org).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func storedPairs(t *testing.T, s *pairs.Service, org any) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT chosen_response, rejected_response, preference_strength FROM preference_pairs WHERE org_id = $1`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c, r string
		var st float32
		if err := rows.Scan(&c, &r, &st); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s>%s@%v", c, r, pairs.Strength(st)))
	}
	sort.Strings(out)
	return out
}
