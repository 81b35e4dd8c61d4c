package review

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// Settled is a selection of items split by whether their overlapping
// review is settled.
type Settled struct {
	Kept     []uuid.UUID // never under overlapping review, agreed or adjudicated
	Disputed []uuid.UUID // the reviewers disagree and no adjudicator has decided
	Open     []uuid.UUID // still waiting for reviews, under an active plan
}

// LeftOut counts the items left out.
func (s Settled) LeftOut() int { return len(s.Disputed) + len(s.Open) }

// KeepSettled splits feedback ids, in their order, into the items that may
// be trained on when only agreed items are: those no plan has started,
// those agreed or adjudicated, and those an ended plan left open. A collect step (a dataset, pair generation,
// a loop's collection of new material) calls it to leave the rest out and
// say how many it left out for disagreement.
func (s *Service) KeepSettled(ctx context.Context, orgID uuid.UUID, ids []uuid.UUID) (Settled, error) {
	var out Settled
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.New(s.Pool).ReviewItemListUnsettled(ctx, db.ReviewItemListUnsettledParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return out, err
	}
	state := make(map[uuid.UUID]db.ReviewState, len(rows))
	for _, r := range rows {
		state[r.FeedbackID] = r.State
	}
	for _, id := range ids {
		switch state[id] {
		case db.ReviewStateDisputed:
			out.Disputed = append(out.Disputed, id)
		case db.ReviewStateOpen:
			out.Open = append(out.Open, id)
		default:
			out.Kept = append(out.Kept, id)
		}
	}
	return out, nil
}

// On reports whether the organisation asks for overlapping review
// anywhere: the default of "agreed items only" for new datasets and pair
// generation.
func (s *Service) On(ctx context.Context, orgID uuid.UUID) (bool, error) {
	n, err := db.New(s.Pool).ReviewPlanCountActive(ctx, orgID)
	return n > 0, err
}
