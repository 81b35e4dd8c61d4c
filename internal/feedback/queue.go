package feedback

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/keyset"
)

// StatusCounts counts the items a filter selects under each review status
// (the filter's own status aside), for the queue's status tabs.
func (s *Service) StatusCounts(ctx context.Context, orgID uuid.UUID, f Filter) ([]db.FeedbackCountByStatusRow, error) {
	return db.New(s.Pool).FeedbackCountByStatus(ctx, f.CountParams(orgID))
}

// KnownIDs keeps the ids of a bulk selection that are the organisation's
// items: ids of other organisations, or of deleted items, are no part of
// the selection, so the count a curator confirms is what really changes.
// The ids keep the order they were given in (the queue's, as selected), so
// the confirmation lists the first ones the curator saw.
func (s *Service) KnownIDs(ctx context.Context, orgID uuid.UUID, ids []uuid.UUID) ([]uuid.UUID, error) {
	known, err := db.New(s.Pool).FeedbackListKnownIDs(ctx, db.FeedbackListKnownIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, err
	}
	return keyset.InOrder(ids, known, func(id uuid.UUID) uuid.UUID { return id }, func(id uuid.UUID) uuid.UUID { return id }), nil
}

// PreviewItem is one of the first items a bulk action would change, shown
// with its count before the curator confirms.
type PreviewItem struct {
	ID     uuid.UUID
	Query  string // the query, cut short
	Status string
}

// previewRunes is how much of a query a preview keeps.
const previewRunes = 80

// BulkPreview returns the first n items of a bulk selection: the selected
// ids in their order, or the filter's first items in the queue's order.
func (s *Service) BulkPreview(ctx context.Context, orgID uuid.UUID, b Bulk, n int) ([]PreviewItem, error) {
	if b.Filter != nil {
		page, err := s.List(ctx, orgID, *b.Filter, nil, n)
		if err != nil {
			return nil, err
		}
		out := make([]PreviewItem, len(page.Rows))
		for i, r := range page.Rows {
			out[i] = PreviewItem{ID: r.ID, Query: excerpt(r.QueryPreview, previewRunes), Status: string(r.Status)}
		}
		return out, nil
	}
	ids := b.IDs[:min(n, len(b.IDs))]
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.New(s.Pool).FeedbackListByIDs(ctx, db.FeedbackListByIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, err
	}
	return keyset.InOrder(ids, rows, func(r db.Feedback) uuid.UUID { return r.ID }, func(r db.Feedback) PreviewItem {
		return PreviewItem{ID: r.ID, Query: excerpt(r.Query, previewRunes), Status: string(r.Status)}
	}), nil
}

// excerpt cuts s to n characters on one line, marking the cut.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	i := 0
	for at := range s {
		if i == n {
			return s[:at] + "…"
		}
		i++
	}
	return s
}
