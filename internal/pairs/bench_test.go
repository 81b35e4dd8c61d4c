package pairs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/pairs"
)

// benchRows is CURATE_BENCH_ROWS, default 100,000.
func benchRows(b *testing.B) int {
	n := 100_000
	if s := os.Getenv("CURATE_BENCH_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			b.Fatalf("CURATE_BENCH_ROWS=%q: want a number of rows of at least 10", s)
		}
	}
	return n
}

// BenchmarkPairGeneration loads N feedback rows with COPY (about five
// answers per query, written with varying case and spacing; ratings,
// thumbs, dimension scores and corrections mixed) and times each
// generation method over all of them, reporting seconds and pairs made.
// Run with -benchtime=1x: each iteration generates from scratch.
func BenchmarkPairGeneration(b *testing.B) {
	n := benchRows(b)
	pool, store, org := setup(b)
	loadFeedback(b, store, org, n)
	for _, method := range pairs.GenerateMethods {
		b.Run(method, func(b *testing.B) {
			var created int
			var secs float64
			for b.Loop() {
				b.StopTimer()
				if _, err := pool.Exec(context.Background(), `DELETE FROM preference_pairs`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				res, err := store.Generate(context.Background(), curator, org, pairs.Generation{Method: method})
				if err != nil {
					b.Fatal(err)
				}
				secs = time.Since(start).Seconds()
				created = res.Created
			}
			b.ReportMetric(secs, "s/generate")
			b.ReportMetric(float64(created), "pairs")
			b.ReportMetric(float64(n), "feedback_rows")
		})
	}
}

// loadFeedback COPYs n feedback rows: n/5 queries with five answers each.
func loadFeedback(b *testing.B, s *pairs.Service, org uuid.UUID, n int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	score := func() pgtype.Int2 { return pgtype.Int2{Int16: int16(rng.IntN(5) + 1), Valid: true} }
	rows := make([]db.FeedbackInsertManyParams, 0, 10_000)
	flush := func() {
		if _, err := db.New(s.Pool).FeedbackInsertMany(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
		rows = rows[:0]
	}
	for i := range n {
		q := fmt.Sprintf("How do I configure feature %d of the product?", i/5)
		if i%2 == 1 {
			q = fmt.Sprintf("how do I  configure FEATURE %d of the product? ", i/5) // the same query, written differently
		}
		r := fmt.Sprintf("Answer %d: open Settings, choose feature %d and follow step %d.", i, i/5, rng.IntN(9))
		row := db.FeedbackInsertManyParams{ID: uuid.New(), OrgID: org, Query: q, Response: r, Context: []byte(`{"documents":[{"title":"KB"}]}`),
			Tags: []string{}, PiiKinds: []string{}, Source: db.FeedbackSourceApi, Status: db.ReviewStatusPending,
			ContentHash: feedback.ContentHash(q, r)}
		switch k := rng.IntN(10); {
		case k < 6:
			row.FeedbackType, row.Rating = db.FeedbackTypeRating, score()
		case k < 8:
			row.FeedbackType = db.FeedbackTypeThumbsUp
			if k == 7 {
				row.FeedbackType = db.FeedbackTypeThumbsDown
			}
		case k < 9:
			row.FeedbackType = db.FeedbackTypeDetailed
			row.DimAccuracy, row.DimHelpfulness, row.DimClarity, row.DimSafety = score(), score(), score(), score()
		default:
			row.FeedbackType, row.Correction, row.Status = db.FeedbackTypeCorrection, "Corrected: "+r, db.ReviewStatusCorrected
		}
		rows = append(rows, row)
		if len(rows) == cap(rows) {
			flush()
		}
	}
	if len(rows) > 0 {
		flush()
	}
	if _, err := s.Pool.Exec(context.Background(), "ANALYZE feedback"); err != nil {
		b.Fatal(err)
	}
}
