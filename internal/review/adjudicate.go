package review

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
)

// ListName names the adjudication lists in their keyset cursors.
const ListName = "adjudication"

// Dispute is an item waiting for an adjudicator, or decided by one, with
// every review side by side.
type Dispute struct {
	FeedbackID    uuid.UUID
	PlanName      string
	Query         string // cut short
	Response      string // cut short
	Disagreements []string
	Overlap       int
	Reviews       []Review
	// Questions are the rubric questions in dispute, with every answer.
	Questions []DisputedQuestion
	// Decided items: the decision and the note that goes with it.
	Status       string
	DecidedBy    string
	DecisionNote string
	DecidedAt    *time.Time
	at           time.Time
}

// Disputes lists a page of disputed items, oldest dispute first (decided
// false), or of adjudicated ones, newest decision first.
func (s *Service) Disputes(ctx context.Context, orgID uuid.UUID, decided bool, cursor *keyset.Cursor, limit int) ([]Dispute, *keyset.Cursor, error) {
	q := db.New(s.Pool)
	at, id := cursor.Bounds()
	var out []Dispute
	if decided {
		rows, err := q.ReviewItemListAdjudicated(ctx, db.ReviewItemListAdjudicatedParams{OrgID: orgID, CursorTime: at, CursorID: id, RowLimit: int32(limit + 1)})
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rows {
			out = append(out, Dispute{FeedbackID: r.FeedbackID, PlanName: r.PlanName, Query: r.QueryPreview, Response: r.ResponsePreview,
				Disagreements: r.Disagreements, Overlap: int(r.Overlap), Status: string(r.ItemStatus), DecidedBy: r.DecidedLabel,
				DecisionNote: r.DecisionNote, DecidedAt: r.DecidedAt, at: r.UpdatedAt})
		}
	} else {
		rows, err := q.ReviewItemListDisputed(ctx, db.ReviewItemListDisputedParams{OrgID: orgID, CursorTime: at, CursorID: id, RowLimit: int32(limit + 1)})
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rows {
			out = append(out, Dispute{FeedbackID: r.FeedbackID, PlanName: r.PlanName, Query: r.QueryPreview, Response: r.ResponsePreview,
				Disagreements: r.Disagreements, Overlap: int(r.Overlap), at: r.UpdatedAt})
		}
	}
	out, next := keyset.Page(out, limit, func(d Dispute) keyset.Cursor { return keyset.Cursor{At: d.at, ID: d.FeedbackID} })
	if len(out) == 0 {
		return out, next, nil
	}
	ids := make([]uuid.UUID, len(out))
	pos := map[uuid.UUID]int{}
	for i, d := range out {
		ids[i], pos[d.FeedbackID] = d.FeedbackID, i
	}
	labels, err := q.ReviewLabelListByItems(ctx, db.ReviewLabelListByItemsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, nil, err
	}
	for _, l := range labels {
		i := pos[l.ReviewLabel.FeedbackID]
		out[i].Reviews = append(out[i].Reviews, toReview(l.ReviewLabel, l.ReviewerEmail))
	}
	for i := range out {
		if out[i].Questions, err = disputedQuestions(ctx, q, orgID, out[i].FeedbackID, out[i].Disagreements); err != nil {
			return nil, nil, err
		}
	}
	return out, next, nil
}

// Decision is an adjudicator's verdict on a disputed item: its status, the
// correction when corrected, and why.
type Decision struct {
	Status     string // "" with a correction: corrected
	Correction string
	Note       string
	// Answers decide the rubric questions in dispute: by rubric, then
	// question key, one of the answers the reviewers gave.
	Answers map[uuid.UUID]map[string]json.RawMessage
}

// Decide settles a disputed item: the decision becomes the item's status
// (and correction), the adjudicator its reviewer, and the decision with its
// note goes into the item's history and the audit log. Only admins and the
// organisation's adjudicators decide.
func (s *Service) Decide(ctx context.Context, actor audit.Actor, who Judge, orgID, feedbackID uuid.UUID, d Decision) error {
	ok, err := s.CanAdjudicate(ctx, orgID, who)
	if err != nil {
		return err
	}
	if !ok {
		return errs.ErrForbidden
	}
	v := &errs.Invalid{}
	d.Correction = strings.ReplaceAll(d.Correction, "\r\n", "\n")
	d.Note = strings.TrimSpace(d.Note)
	v.Text("correction", d.Correction, feedback.MaxCorrection, false)
	if v.Text("note", d.Note, feedback.MaxComment, false) && d.Note == "" {
		v.Add("note", "say why: the note goes into the item's history with the decision")
	}
	hasCorrection := strings.TrimSpace(d.Correction) != ""
	if d.Status == "" && hasCorrection {
		d.Status = "corrected"
	}
	switch {
	case d.Status == "":
		v.Add("status", "choose the item's status")
	case !slices.Contains(Statuses, d.Status):
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	case d.Status == "corrected" && !hasCorrection:
		v.Add("correction", "write the answer the assistant should have given, or pick a reviewer's")
	}
	if v.Has() {
		return v
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		it, err := q.ReviewItemGetForUpdate(ctx, db.ReviewItemGetForUpdateParams{OrgID: orgID, FeedbackID: feedbackID})
		if err != nil {
			return errs.NotFound(err)
		}
		switch it.State {
		case db.ReviewStateAdjudicated:
			return &errs.Conflict{Message: "this item was decided already, by " + it.DecidedLabel}
		case db.ReviewStateAgreed:
			return &errs.Conflict{Message: "the reviewers of this item agree: there is nothing to decide"}
		case db.ReviewStateOpen:
			return &errs.Conflict{Message: "this item's reviews are not all in yet"}
		}
		if err := decideQuestions(ctx, q, actor, orgID, feedbackID, it.Disagreements, d.Answers); err != nil {
			return err
		}
		cur, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: feedbackID})
		if err != nil {
			return err
		}
		by := uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user" && actor.ID != uuid.Nil}
		if _, err := q.FeedbackUpdateSettled(ctx, db.FeedbackUpdateSettledParams{OrgID: orgID, ID: feedbackID, Status: db.ReviewStatus(d.Status),
			SetCorrection: hasCorrection, Correction: d.Correction, ReviewerID: by}); err != nil {
			return err
		}
		if _, err := q.ReviewItemUpdateDecision(ctx, db.ReviewItemUpdateDecisionParams{OrgID: orgID, FeedbackID: feedbackID,
			DecidedBy: by, DecidedLabel: actor.Label, DecisionNote: d.Note}); err != nil {
			return err
		}
		if err := q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: orgID, FeedbackID: feedbackID,
			ActorID: by, ActorLabel: actor.Label, Action: "adjudicate",
			FromStatus: db.NullReviewStatus{ReviewStatus: cur.Feedback.Status, Valid: true},
			ToStatus:   db.NullReviewStatus{ReviewStatus: db.ReviewStatus(d.Status), Valid: true}, Note: d.Note}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.adjudicate", TargetType: "feedback",
			TargetID: feedbackID.String(), Details: map[string]any{"plan": it.PlanID, "from": cur.Feedback.Status, "to": d.Status,
				"note": d.Note, "disagreements": it.Disagreements, "reviews": it.Submitted, "corrected": hasCorrection}})
	})
}
