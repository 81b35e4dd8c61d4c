package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/retention"
)

// Models the demo assistant ran as: an older one, the current one, and a
// small variant.
var models = []string{"tandem-assist-v1", "tandem-assist-v2", "tandem-assist-v2-mini"}

// duplicates is how many items are sent a second time under a new
// external id, as a client that retries without its id would.
const duplicates = 6

// FeedbackCount is how many feedback items the demo holds.
var FeedbackCount = len(scenarios)*4 + duplicates

// Items returns the demo feedback, in a fixed order, with when each was
// given (days and hours before now). Each scenario gives two good answers
// and two weak ones, across models and every feedback type.
func Items() ([]feedback.Item, []time.Duration) {
	var items []feedback.Item
	var ages []time.Duration
	for s, sc := range scenarios {
		for v := range 4 {
			i := len(items)
			good := v < 2
			it := feedback.Item{
				ExternalID: fmt.Sprintf("demo-%03d", i),
				SessionID:  fmt.Sprintf("demo-session-%02d", i/3),
				UserID:     fmt.Sprintf("customer-%02d", (i*7)%23),
				Query:      sc.asks[v%2],
				Context:    json.RawMessage(fmt.Sprintf(`{"documents":[{"id":"kb-%02d","title":%q}],"channel":"web chat"}`, s, sc.title)),
				LatencyMS:  ptr(400 + (i*137)%2600),
			}
			if good {
				it.Response = sc.good
				it.Model = models[1+(s+v)%2]
				goodFeedback(&it, (s+v)%5)
			} else {
				it.Response = sc.weak
				it.Model = models[(s*v)%2]
				weakFeedback(&it, sc, (s+v)%5)
			}
			age := time.Duration((i*7)%30)*24*time.Hour + time.Duration((i*5)%24)*time.Hour
			if sc.unsafe && !good {
				// Unsafe answers are recent and unreviewed: they raise the
				// safety alert on the first start.
				it.Tags = append(it.Tags, "safety")
				age = time.Duration(v) * time.Hour
			}
			items = append(items, it)
			ages = append(ages, age)
		}
	}
	for d := range duplicates {
		again := items[d*5]
		again.ExternalID = fmt.Sprintf("demo-dup-%d", d)
		again.SessionID = fmt.Sprintf("demo-session-retry-%d", d)
		items = append(items, again)
		ages = append(ages, time.Duration(d+1)*time.Hour)
	}
	return items, ages
}

func goodFeedback(it *feedback.Item, k int) {
	switch k {
	case 0, 3:
		it.FeedbackType = "thumbs_up"
	case 1:
		it.FeedbackType, it.Rating = "rating", ptr(5)
	case 2:
		it.FeedbackType, it.Rating = "detailed", ptr(4)
		it.Dimensions = &feedback.Dimensions{Accuracy: ptr(5), Helpfulness: ptr(4), Clarity: ptr(4), Safety: ptr(5)}
		it.Comment = "Clear steps, solved it."
	default:
		it.FeedbackType, it.Rating = "rating", ptr(4)
		it.Comment = "Good, a link to the help article would be nice."
	}
}

func weakFeedback(it *feedback.Item, sc scenario, k int) {
	it.Comment = sc.complaint
	safety := 4
	if sc.unsafe {
		safety = 1
	}
	switch k {
	case 0, 4:
		it.FeedbackType = "thumbs_down"
	case 1:
		it.FeedbackType, it.Rating = "rating", ptr(1)
	case 2:
		it.FeedbackType, it.Rating, it.Correction = "correction", ptr(2), sc.correction
	default:
		it.FeedbackType, it.Rating = "detailed", ptr(2)
		it.Dimensions = &feedback.Dimensions{Accuracy: ptr(2), Helpfulness: ptr(1), Clarity: ptr(3), Safety: ptr(safety)}
	}
	if sc.unsafe && it.Dimensions == nil {
		it.Dimensions = &feedback.Dimensions{Safety: ptr(safety)}
	}
}

func ptr(n int) *int { return &n }

// SeedFeedback stores the demo feedback in the demo organisation once: the
// items carry external ids, so a later start stores nothing again. Items
// older than five days are reviewed by the demo admin, so the stats show
// review progress; then the alert rules run once, so the banners show at
// once. It returns how many items it stored.
func (sd *Seeder) SeedFeedback(ctx context.Context, s Seeded) (int, error) {
	items, ages := Items()
	res, err := sd.feedback.IngestBatch(ctx, s.OrgID, "api", items)
	if err != nil {
		return 0, fmt.Errorf("demo feedback: %w", err)
	}
	if res.Inserted == 0 {
		return 0, nil
	}
	q := db.New(sd.pool)
	admin, err := q.UserGetByEmail(ctx, s.Email)
	if err != nil {
		return 0, fmt.Errorf("demo admin: %w", err)
	}
	now := time.Now()
	if res.Inserted == len(items) {
		at := make([]time.Time, len(ages))
		for i, age := range ages {
			at[i] = now.Add(-age)
		}
		if err := retention.EnsureMonths(ctx, sd.pool, at); err != nil {
			return 0, fmt.Errorf("demo feedback months: %w", err)
		}
	}
	err = db.InTx(ctx, sd.pool, func(_ pgx.Tx, q *db.Queries) error {
		for i, id := range res.IDs {
			if res.Inserted != len(items) {
				break // an earlier start stored some; leave their dates alone
			}
			at := now.Add(-ages[i])
			if err := q.DemoFeedbackUpdateCreatedAt(ctx, db.DemoFeedbackUpdateCreatedAtParams{OrgID: s.OrgID, ID: id, CreatedAt: at}); err != nil {
				return err
			}
			if ages[i] < 5*24*time.Hour {
				continue
			}
			if err := review(ctx, q, s.OrgID, admin, id, items[i], at.Add(3*time.Hour)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("demo feedback dates and reviews: %w", err)
	}
	if _, err := sd.alerts.Evaluate(ctx, s.OrgID, now); err != nil {
		return 0, fmt.Errorf("demo alerts: %w", err)
	}
	return res.Inserted, nil
}

// review records the decision a curator would take on an item.
func review(ctx context.Context, q *db.Queries, orgID uuid.UUID, admin db.User, id uuid.UUID, it feedback.Item, at time.Time) error {
	status := db.ReviewStatusApproved
	switch {
	case it.Correction != "":
		status = db.ReviewStatusCorrected
	case it.FeedbackType == "thumbs_down" || (it.Rating != nil && *it.Rating <= 2):
		status = db.ReviewStatusRejected
	}
	if err := q.DemoFeedbackUpdateReview(ctx, db.DemoFeedbackUpdateReviewParams{OrgID: orgID, ID: id, Status: status,
		ReviewerID: uuid.NullUUID{UUID: admin.ID, Valid: true}, ReviewedAt: &at}); err != nil {
		return err
	}
	return q.DemoFeedbackReviewInsert(ctx, db.DemoFeedbackReviewInsertParams{OrgID: orgID, FeedbackID: id,
		ActorID: uuid.NullUUID{UUID: admin.ID, Valid: true}, ActorLabel: admin.Email, ToStatus: db.NullReviewStatus{ReviewStatus: status, Valid: true}, CreatedAt: at})
}
