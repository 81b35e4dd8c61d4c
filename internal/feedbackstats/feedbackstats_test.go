package feedbackstats_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/feedbackstats"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParseWindow(t *testing.T) {
	if w, err := feedbackstats.ParseWindow("", ""); err != nil || w.Days != 30 || w.Model != "" {
		t.Errorf(`ParseWindow("", "") = %+v, %v; want 30 days of every model`, w, err)
	}
	if w, err := feedbackstats.ParseWindow("365", "m1"); err != nil || w.Days != 365 || w.Model != "m1" {
		t.Errorf(`ParseWindow("365", "m1") = %+v, %v`, w, err)
	}
	for _, tc := range []struct{ days, model, field string }{
		{"0", "", "days"}, {"366", "", "days"}, {"x", "", "days"}, {"7", strings.Repeat("m", 257), "model"},
	} {
		_, err := feedbackstats.ParseWindow(tc.days, tc.model)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()[tc.field] == "" {
			t.Errorf("ParseWindow(%q, %d bytes) = %v; want the field %s named", tc.days, len(tc.model), err, tc.field)
		}
	}
}

// A three-day window ending 2026-03-10 15:00 UTC, counted by hand:
//
//	03-07 23:59  m1 thumbs_down          before the window
//	03-08 10:00  m1 thumbs_up
//	03-08 23:59  m1 rating 4
//	03-09 00:00  m2 thumbs_down          (approved by cora on 03-09)
//	03-09 12:00  no model, thumbs_up
//	03-10 14:00  m1 detailed, rating 5, accuracy 4, safety 2
//	03-10 15:00  m1 thumbs_up            at the end: outside
//	03-09 12:00  another organisation's thumbs_down
//
// Totals: 5 items, 2 up, 1 down, 2 ratings summing 9.
func TestReport(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := acc.EnsureOrg(ctx, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	n := func(i int) *int { return &i }
	detailed := feedback.Item{Model: "m1", FeedbackType: "detailed", Rating: n(5),
		Dimensions: &feedback.Dimensions{Accuracy: n(4), Safety: n(2)}}
	ours := []struct {
		at time.Time
		it feedback.Item
	}{
		{day(7, 23, 59), feedback.Item{Model: "m1", FeedbackType: "thumbs_down"}},
		{day(8, 10, 0), feedback.Item{Model: "m1", FeedbackType: "thumbs_up"}},
		{day(8, 23, 59), feedback.Item{Model: "m1", FeedbackType: "rating", Rating: n(4)}},
		{day(9, 0, 0), feedback.Item{Model: "m2", FeedbackType: "thumbs_down"}},
		{day(9, 12, 0), feedback.Item{FeedbackType: "thumbs_up"}},
		{day(10, 14, 0), detailed},
		{day(10, 15, 0), feedback.Item{Model: "m1", FeedbackType: "thumbs_up"}},
	}
	store := feedback.New(pool)
	q := db.New(pool)
	var ids []uuid.UUID
	for i, x := range ours {
		x.it.Query, x.it.Response = "question "+uuid.NewString(), "answer"
		f, _, err := store.Ingest(ctx, org.ID, "api", x.it)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		if _, err := pool.Exec(ctx, "UPDATE feedback SET created_at = $2 WHERE id = $1", f.ID, x.at); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	theirs, _, err := store.Ingest(ctx, other.ID, "api", feedback.Item{Query: "q", Response: "r", Model: "m1", FeedbackType: "thumbs_down"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE feedback SET created_at = $2 WHERE id = $1", theirs.ID, day(9, 12, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE feedback SET status = 'approved' WHERE id = $1", ids[3]); err != nil {
		t.Fatal(err)
	}
	if err := q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: org.ID, FeedbackID: ids[3], ActorLabel: "cora@acme.test",
		Action: "status", FromStatus: db.NullReviewStatus{ReviewStatus: "pending", Valid: true},
		ToStatus: db.NullReviewStatus{ReviewStatus: "approved", Valid: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE feedback_reviews SET created_at = $1", day(9, 8, 0)); err != nil {
		t.Fatal(err)
	}

	svc := feedbackstats.New(pool)
	r, err := svc.Report(ctx, org.ID, feedbackstats.Window{Days: 3}, day(10, 15, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Since.Equal(day(8, 0, 0)) {
		t.Errorf("since %v, want 2026-03-08 00:00 UTC", r.Since)
	}
	c := func(total, up, down, ratings, sum int) feedbackstats.Counts {
		return feedbackstats.Counts{Total: total, ThumbsUp: up, ThumbsDown: down, Ratings: ratings, RatingSum: sum}
	}
	if r.Counts != c(5, 2, 1, 2, 9) {
		t.Errorf("totals %+v", r.Counts)
	}
	if want := []feedbackstats.Counts{c(2, 1, 0, 1, 4), c(2, 1, 1, 0, 0), c(1, 0, 0, 1, 5)}; !reflect.DeepEqual(r.Daily, want) {
		t.Errorf("daily %+v, want %+v", r.Daily, want)
	}
	wantModels := []feedbackstats.Model{
		{Name: "", Counts: c(1, 1, 0, 0, 0), Daily: []feedbackstats.Counts{{}, c(1, 1, 0, 0, 0), {}}},
		{Name: "m1", Counts: c(3, 1, 0, 2, 9), Daily: []feedbackstats.Counts{c(2, 1, 0, 1, 4), {}, c(1, 0, 0, 1, 5)}},
		{Name: "m2", Counts: c(1, 0, 1, 0, 0), Daily: []feedbackstats.Counts{{}, c(1, 0, 1, 0, 0), {}}},
	}
	if !reflect.DeepEqual(r.ByModel, wantModels) {
		t.Errorf("by model %+v,\nwant %+v", r.ByModel, wantModels)
	}
	wantDims := []feedbackstats.Dimension{{"Accuracy", 1, 4}, {"Helpfulness", 0, 0}, {"Clarity", 0, 0}, {"Safety", 1, 2}}
	if !reflect.DeepEqual(r.Dimensions, wantDims) {
		t.Errorf("dimensions %+v", r.Dimensions)
	}
	wantDist := []feedbackstats.Bucket{{"5", 1}, {"4", 1}, {"3", 0}, {"2", 0}, {"1", 0}}
	if !reflect.DeepEqual(r.Distribution, wantDist) {
		t.Errorf("distribution %+v", r.Distribution)
	}
	wantStatuses := []feedbackstats.Bucket{{"pending", 4}, {"approved", 1}, {"rejected", 0}, {"needs_correction", 0}, {"corrected", 0}}
	if !reflect.DeepEqual(r.Statuses, wantStatuses) {
		t.Errorf("statuses %+v", r.Statuses)
	}
	if len(r.Curators) != 1 || r.Curators[0].Label != "cora@acme.test" || r.Curators[0].Approved != 1 || !r.Curators[0].Last.Equal(day(9, 8, 0)) {
		t.Errorf("curators %+v", r.Curators)
	}
	if !reflect.DeepEqual(r.Models, []string{"m1", "m2"}) {
		t.Errorf("models %v", r.Models)
	}

	// One model: only its items, every model still offered.
	r, err = svc.Report(ctx, org.ID, feedbackstats.Window{Days: 3, Model: "m2"}, day(10, 15, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts != c(1, 0, 1, 0, 0) || len(r.ByModel) != 1 || len(r.Models) != 2 || len(r.Curators) != 1 {
		t.Errorf("m2 only: totals %+v, %d models in the table, %d offered, %d curators", r.Counts, len(r.ByModel), len(r.Models), len(r.Curators))
	}
	r, err = svc.Report(ctx, org.ID, feedbackstats.Window{Days: 3, Model: "m1"}, day(10, 15, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts != c(3, 1, 0, 2, 9) || len(r.Curators) != 0 || r.Statuses[1].Count != 0 {
		t.Errorf("m1 only: totals %+v, curators %+v, statuses %+v", r.Counts, r.Curators, r.Statuses)
	}
}
