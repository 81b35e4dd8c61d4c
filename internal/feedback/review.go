package feedback

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

// Page is one keyset page of the queue.
type Page struct {
	Rows []db.FeedbackListRow
	Next *keyset.Cursor // nil on the last page
}

// List returns a page of the queue, newest first.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, cursor *keyset.Cursor, limit int) (Page, error) {
	rows, err := db.New(s.Pool).FeedbackList(ctx, f.ListParams(orgID, cursor, limit+1))
	if err != nil {
		return Page{}, err
	}
	var p Page
	p.Rows, p.Next = keyset.Page(rows, limit, func(r db.FeedbackListRow) keyset.Cursor { return keyset.Cursor{At: r.CreatedAt, ID: r.ID} })
	return p, nil
}

// Models lists the model names the organisation's feedback names, in
// order, for the filters that offer them.
func (s *Service) Models(ctx context.Context, orgID uuid.UUID) ([]string, error) {
	return db.New(s.Pool).FeedbackListModels(ctx, orgID)
}

// ListObjects returns a page of the queue with each item whole, as the API
// shows it, and the cursor of the next page.
func (s *Service) ListObjects(ctx context.Context, orgID uuid.UUID, f Filter, cursor *keyset.Cursor, limit int) ([]Object, *keyset.Cursor, error) {
	page, err := s.List(ctx, orgID, f, cursor, limit)
	if err != nil || len(page.Rows) == 0 {
		return []Object{}, nil, err
	}
	ids := make([]uuid.UUID, len(page.Rows))
	for i, r := range page.Rows {
		ids[i] = r.ID
	}
	rows, err := db.New(s.Pool).FeedbackListByIDs(ctx, db.FeedbackListByIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, nil, err
	}
	return keyset.InOrder(ids, rows, func(r db.Feedback) uuid.UUID { return r.ID }, ToObject), page.Next, nil
}

// Detail is one item with who reviewed it and its history.
type Detail struct {
	db.FeedbackGetRow
	History []db.FeedbackReview
}

// Get returns an item of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Detail, error) {
	q := db.New(s.Pool)
	row, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Detail{}, errs.NotFound(err)
	}
	hist, err := q.FeedbackReviewList(ctx, db.FeedbackReviewListParams{OrgID: orgID, FeedbackID: id})
	return Detail{FeedbackGetRow: row, History: hist}, err
}

// Change is a review edit of one item. Nil fields stay as they are.
type Change struct {
	Status     *string
	Tags       *[]string
	Correction *string
	Assignee   *uuid.UUID // uuid.Nil unassigns
	Note       string     // kept in the item's history
}

// Update applies a change if the item is still at version; otherwise it
// returns errs.Conflict holding the item as it is now, so a second curator
// never silently overwrites the first. Saving a correction marks the item
// corrected unless a status is given.
//
// Version 0 applies the change over whatever is stored (last write wins),
// and the audit record says so.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, version int32, ch Change) (db.Feedback, error) {
	v := &errs.Invalid{}
	if ch.Status != nil && !oneOf(*ch.Status, Statuses) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if ch.Tags != nil {
		tags, msg := NormalizeTags(*ch.Tags)
		if msg != "" {
			v.Add("tags", "%s", msg)
		}
		ch.Tags = &tags
	}
	if ch.Correction != nil && len(*ch.Correction) > MaxCorrection {
		v.Add("correction", "at most %d bytes", MaxCorrection)
	}
	if len(ch.Note) > MaxComment {
		v.Add("note", "at most %d bytes", MaxComment)
	}
	if v.Has() {
		return db.Feedback{}, v
	}

	var out db.Feedback
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		old := cur.Feedback
		asked := version
		if version == 0 {
			version = old.Version // no If-Match: the last write wins
		}
		if old.Version != version {
			return &errs.Conflict{Message: "someone else changed this item since you opened it: review their change and try again", Current: old}
		}
		if ch.Status != nil || ch.Correction != nil {
			if held, err := q.ReviewItemListHeld(ctx, db.ReviewItemListHeldParams{OrgID: orgID, Ids: []uuid.UUID{id}}); err != nil {
				return err
			} else if len(held) > 0 {
				return &errs.Conflict{Message: heldMessage, Current: old}
			}
		}
		if ch.Assignee != nil && *ch.Assignee != uuid.Nil {
			if _, err := q.UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: *ch.Assignee}); err != nil {
				return errs.InvalidField("assignee", "no such user in this organisation")
			}
		}
		p := db.FeedbackUpdateParams{OrgID: orgID, ID: id, Version: version, Status: old.Status, Tags: old.Tags,
			Correction: old.Correction, AssigneeID: old.AssigneeID, ReviewerID: old.ReviewerID, ReviewedAt: old.ReviewedAt}
		if ch.Correction != nil {
			p.Correction = *ch.Correction
			if ch.Status == nil && strings.TrimSpace(p.Correction) != "" {
				corrected := "corrected"
				ch.Status = &corrected
			}
		}
		if ch.Status != nil {
			p.Status = db.ReviewStatus(*ch.Status)
			now := time.Now()
			p.ReviewedAt = &now
			if actor.Kind == "user" {
				p.ReviewerID = uuid.NullUUID{UUID: actor.ID, Valid: true}
			}
		}
		if ch.Tags != nil {
			p.Tags = *ch.Tags
		}
		if ch.Assignee != nil {
			p.AssigneeID = uuid.NullUUID{UUID: *ch.Assignee, Valid: *ch.Assignee != uuid.Nil}
		}
		out, err = q.FeedbackUpdate(ctx, p)
		if errors.Is(err, pgx.ErrNoRows) {
			return &errs.Conflict{Message: "someone else changed this item a moment ago: reload it", Current: old}
		}
		if err != nil {
			return err
		}
		action := describe(ch)
		if err := q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: orgID, FeedbackID: id,
			ActorID: actorID(actor), ActorLabel: actor.Label, Action: action, FromStatus: db.NullReviewStatus{ReviewStatus: old.Status, Valid: true},
			ToStatus: db.NullReviewStatus{ReviewStatus: out.Status, Valid: true}, Note: ch.Note}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "feedback." + action, TargetType: "feedback",
			TargetID: id.String(), Details: audit.Unconditional(map[string]any{"from": old.Status, "to": out.Status, "version": out.Version}, asked)})
	})
	return out, err
}

// heldMessage refuses a verdict on an item under overlapping review.
const heldMessage = "this item is under overlapping review: each reviewer submits their own review, and its status is what they agree on or what an adjudicator decides"

// describe names a change for the history and the audit log.
func describe(ch Change) string {
	switch {
	case ch.Correction != nil:
		return "correct"
	case ch.Status != nil:
		return map[string]string{"approved": "approve", "rejected": "reject", "needs_correction": "needs_correction",
			"pending": "reopen", "corrected": "correct"}[*ch.Status]
	case ch.Tags != nil:
		return "tag"
	case ch.Assignee != nil:
		return "assign"
	default:
		return "note"
	}
}

// Bulk is one action on many items.
type Bulk struct {
	IDs      []uuid.UUID // explicit selection, or
	Filter   *Filter     // every item matching the filter
	Status   string      // "" keeps each item's status
	AddTag   string
	Assign   bool
	Assignee uuid.UUID // with Assign; uuid.Nil unassigns
}

// MaxBulk bounds one bulk action.
const MaxBulk = 50000

// Matching counts the items a filter selects, for the confirmation before a
// bulk action ("apply to all N matching?").
func (s *Service) Matching(ctx context.Context, orgID uuid.UUID, f Filter) (int, error) {
	ids, err := db.New(s.Pool).FeedbackListMatchingIDs(ctx, f.MatchingParams(orgID, MaxBulk+1))
	return len(ids), err
}

// ApplyBulk applies b in one transaction and returns how many items changed.
// The expected count must match what the selection holds now, so a curator
// confirms exactly what runs.
func (s *Service) ApplyBulk(ctx context.Context, actor audit.Actor, orgID uuid.UUID, b Bulk, expected int) (int, error) {
	v := &errs.Invalid{}
	if b.Status != "" && !oneOf(b.Status, Statuses) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if b.AddTag != "" {
		tags, msg := NormalizeTags([]string{b.AddTag})
		if msg != "" {
			v.Add("tag", "%s", msg)
		} else {
			b.AddTag = tags[0]
		}
	}
	if b.Status == "" && b.AddTag == "" && !b.Assign {
		v.Add("action", "choose a status, a tag or an assignee")
	}
	if len(b.IDs) == 0 && b.Filter == nil {
		v.Add("ids", "select items or use the filter")
	}
	if len(b.IDs) > MaxBulk {
		v.Add("ids", "at most %d items at once", MaxBulk)
	}
	if v.Has() {
		return 0, v
	}
	var n int
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		ids := b.IDs
		if b.Filter != nil {
			var err error
			if ids, err = q.FeedbackListMatchingIDs(ctx, b.Filter.MatchingParams(orgID, MaxBulk+1)); err != nil {
				return err
			}
			if len(ids) > MaxBulk {
				return errs.InvalidField("filter", "matches more than %d items: narrow it first", MaxBulk)
			}
		}
		if expected >= 0 && len(ids) != expected {
			return &errs.Conflict{Message: "the selection changed since you confirmed it (now " + strconv.Itoa(len(ids)) + " items): confirm again"}
		}
		if b.Status != "" {
			held, err := q.ReviewItemListHeld(ctx, db.ReviewItemListHeldParams{OrgID: orgID, Ids: ids})
			if err != nil {
				return err
			}
			if len(held) > 0 {
				return &errs.Conflict{Message: "the selection holds items under overlapping review (" + strconv.Itoa(len(held)) +
					"), whose status their reviewers set: leave them out of it and try again"}
			}
		}
		if b.Assign && b.Assignee != uuid.Nil {
			if _, err := q.UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: b.Assignee}); err != nil {
				return errs.InvalidField("assignee", "no such user in this organisation")
			}
		}
		rows, err := q.FeedbackUpdateMany(ctx, db.FeedbackUpdateManyParams{
			OrgID: orgID, Ids: ids, Status: nullStatus(b.Status), AddTag: b.AddTag, SetAssignee: b.Assign,
			AssigneeID: nullID(b.Assignee), ReviewerID: uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user"},
		})
		if err != nil {
			return err
		}
		n = len(rows)
		action := "bulk"
		hist := make([]db.FeedbackReviewInsertManyParams, len(rows))
		for i, r := range rows {
			hist[i] = db.FeedbackReviewInsertManyParams{OrgID: orgID, FeedbackID: r.ID, ActorID: actorID(actor), ActorLabel: actor.Label,
				Action: action, ToStatus: db.NullReviewStatus{ReviewStatus: r.Status, Valid: true}, Note: bulkNote(b)}
		}
		if _, err := q.FeedbackReviewInsertMany(ctx, hist); err != nil {
			return err
		}
		details := map[string]any{"count": n, "status": b.Status, "tag": b.AddTag}
		if b.Filter != nil {
			details["filter"] = b.Filter.Values().Encode()
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "feedback.bulk", TargetType: "feedback", Details: details})
	})
	return n, err
}

func bulkNote(b Bulk) string {
	var parts []string
	if b.Status != "" {
		parts = append(parts, "status "+b.Status)
	}
	if b.AddTag != "" {
		parts = append(parts, "tag "+b.AddTag)
	}
	if b.Assign {
		parts = append(parts, "assigned")
	}
	return "bulk: " + strings.Join(parts, ", ")
}

func actorID(a audit.Actor) uuid.NullUUID {
	return uuid.NullUUID{UUID: a.ID, Valid: a.ID != uuid.Nil}
}
