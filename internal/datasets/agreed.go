package datasets

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// LeftOut counts the members a dataset that takes agreed items only left
// out: their overlapping review is disputed (the reviewers disagree and no
// adjudicator has decided) or still open (reviews missing).
type LeftOut struct {
	Disputed int `json:"disagreement"`
	Open     int `json:"awaiting_reviews"`
}

// Total is every member left out.
func (l LeftOut) Total() int { return l.Disputed + l.Open }

// unsettled is the members a dataset leaves out, and their counts: none
// unless it takes agreed items only. A pair is left out when the feedback
// it was built from is.
func unsettled(ctx context.Context, q *db.Queries, d db.TrainingDataset) (map[uuid.UUID]bool, LeftOut, error) {
	var n LeftOut
	if !d.AgreedOnly {
		return nil, n, nil
	}
	rows, err := q.DatasetMemberListUnsettled(ctx, d.ID)
	if err != nil {
		return nil, n, err
	}
	skip := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		skip[r.ID] = true
		if r.Disputed {
			n.Disputed++
		} else {
			n.Open++
		}
	}
	return skip, n, nil
}

// overlapOn reports whether the organisation asks for overlapping review
// anywhere: then a new dataset takes agreed items only unless told not to.
func overlapOn(ctx context.Context, q *db.Queries, orgID uuid.UUID) (bool, error) {
	n, err := q.ReviewPlanCountActive(ctx, orgID)
	return n > 0, err
}
