package feedback

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// StatusCounts counts the items a filter selects under each review status
// (the filter's own status aside), for the queue's status tabs.
func (s *Service) StatusCounts(ctx context.Context, orgID uuid.UUID, f Filter) ([]db.FeedbackCountByStatusRow, error) {
	return db.New(s.Pool).FeedbackCountByStatus(ctx, f.CountParams(orgID))
}

// KnownIDs keeps the ids of a bulk selection that are the organisation's
// items: ids of other organisations, or of deleted items, are no part of
// the selection, so the count a curator confirms is what really changes.
func (s *Service) KnownIDs(ctx context.Context, orgID uuid.UUID, ids []uuid.UUID) ([]uuid.UUID, error) {
	return db.New(s.Pool).FeedbackListKnownIDs(ctx, db.FeedbackListKnownIDsParams{OrgID: orgID, Ids: ids})
}
