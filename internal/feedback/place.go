package feedback

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/textdiff"
)

// Place is where an item stands in the queue under a filter: the queue's
// order, newest first, as the queue page lists it.
type Place struct {
	Position int // 1 for the first item; 0 when the item does not match the filter
	Total    int // items matching the filter
	Prev     uuid.UUID
	Next     uuid.UUID // uuid.Nil at either end
}

// Key is an item's position in the queue's order, the keyset cursor the
// queue would use to list what follows it.
func Key(f db.Feedback) keyset.Cursor { return keyset.Cursor{At: f.CreatedAt, ID: f.ID} }

// Place finds the item at key in the filter: its neighbours on either side
// and how many matching items come before it. The neighbours are found from
// the key alone, so an item that has just left the filter (approved under
// "pending") still knows what came after it.
func (s *Service) Place(ctx context.Context, orgID uuid.UUID, f Filter, key keyset.Cursor) (Place, error) {
	q := db.New(s.Pool)
	var p Place
	var err error
	if p.Next, err = s.Next(ctx, orgID, f, key); err != nil {
		return Place{}, err
	}
	p.Prev, err = q.FeedbackGetPrevious(ctx, db.FeedbackGetPreviousParams(f.neighbourParams(orgID, key)))
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Place{}, err
	}
	n := f.neighbourParams(orgID, key)
	pos, err := q.FeedbackCountPosition(ctx, db.FeedbackCountPositionParams{
		KeyTime: key.At, KeyID: key.ID, OrgID: orgID, Status: n.Status, FeedbackType: n.FeedbackType, Source: n.Source,
		RatingMin: n.RatingMin, RatingMax: n.RatingMax, DimBelow: n.DimBelow, Tag: n.Tag, Model: n.Model, AssigneeID: n.AssigneeID,
		CreatedFrom: n.CreatedFrom, CreatedTo: n.CreatedTo, WithDuplicates: n.WithDuplicates, PiiOnly: n.PiiOnly, Q: n.Q, DatasetID: n.DatasetID,
		SafetyOnly: n.SafetyOnly,
	})
	if err != nil {
		return Place{}, err
	}
	p.Total = int(pos.Total)
	if pos.Matches {
		p.Position = int(pos.Before) + 1
	}
	return p, nil
}

// Next is the item after key in the filter, or uuid.Nil when key is the
// last: where auto-advance goes after a review.
func (s *Service) Next(ctx context.Context, orgID uuid.UUID, f Filter, key keyset.Cursor) (uuid.UUID, error) {
	id, err := db.New(s.Pool).FeedbackGetNext(ctx, f.neighbourParams(orgID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, nil
	}
	return id, err
}

// neighbourParams are the filter and key as the neighbour queries take them.
func (f Filter) neighbourParams(orgID uuid.UUID, key keyset.Cursor) db.FeedbackGetNextParams {
	p := f.ListParams(orgID, nil, 0)
	return db.FeedbackGetNextParams{
		OrgID: orgID, Status: p.Status, FeedbackType: p.FeedbackType, Source: p.Source, RatingMin: p.RatingMin,
		RatingMax: p.RatingMax, DimBelow: p.DimBelow, Tag: p.Tag, Model: p.Model, AssigneeID: p.AssigneeID,
		CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, WithDuplicates: p.WithDuplicates, PiiOnly: p.PiiOnly,
		Q: p.Q, DatasetID: p.DatasetID, SafetyOnly: p.SafetyOnly, KeyTime: key.At, KeyID: key.ID,
	}
}

// AutoAdvance reports whether the user asked to move to the next item
// after each review; off until they turn it on.
func (s *Service) AutoAdvance(ctx context.Context, orgID, userID uuid.UUID) (bool, error) {
	p, err := db.New(s.Pool).UserPreferencesGet(ctx, db.UserPreferencesGetParams{OrgID: orgID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return p.AutoAdvance, err
}

// SetAutoAdvance remembers the user's choice, made on the page of the item
// itemID, which must be the organisation's (another organisation's item is
// not found, and nothing changes). A personal view setting, like a sort
// order: it changes no one's data, so it is not audited.
func (s *Service) SetAutoAdvance(ctx context.Context, orgID, userID, itemID uuid.UUID, on bool) error {
	q := db.New(s.Pool)
	if _, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: itemID}); err != nil {
		return errs.NotFound(err)
	}
	_, err := q.UserPreferencesInsertOrUpdate(ctx, db.UserPreferencesInsertOrUpdateParams{OrgID: orgID, UserID: userID, AutoAdvance: on})
	return errs.NotFound(err) // no rows: not a user of this organisation
}

// Diff compares a correction being written with the item's response, word
// by word, as the item page shows it once saved.
func (s *Service) Diff(ctx context.Context, orgID, id uuid.UUID, correction string) ([]textdiff.Op, error) {
	v := &errs.Invalid{}
	v.Text("correction", correction, MaxCorrection, false)
	if v.Has() {
		return nil, v
	}
	row, err := db.New(s.Pool).FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return nil, errs.NotFound(err)
	}
	return textdiff.Words(row.Feedback.Response, correction), nil
}
