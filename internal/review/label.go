package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// Statuses are the verdicts a reviewer gives: every review status but
// pending.
var Statuses = []string{"approved", "rejected", "needs_correction", "corrected"}

// Dimensions name the four rated dimensions, in the order Label keeps them.
var Dimensions = []string{"accuracy", "helpfulness", "clarity", "safety"}

// Input is one reviewer's label as they send it.
type Input struct {
	Status     string // "" with a correction: corrected
	Rating     *int
	Dimensions feedback.Dimensions
	Tags       []string
	Correction string
	Note       string
}

// validate checks a label and fills in what follows from it.
func (in *Input) validate() error {
	v := &errs.Invalid{}
	in.Correction = strings.ReplaceAll(in.Correction, "\r\n", "\n")
	v.Text("correction", in.Correction, feedback.MaxCorrection, false)
	v.Text("note", in.Note, feedback.MaxComment, false)
	hasCorrection := strings.TrimSpace(in.Correction) != ""
	if in.Status == "" && hasCorrection {
		in.Status = "corrected"
	}
	switch {
	case in.Status == "":
		v.Add("status", "choose a verdict: approved, rejected, needs correction, or write a correction")
	case !slices.Contains(Statuses, in.Status):
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	case in.Status == "corrected" && !hasCorrection:
		v.Add("correction", "write the answer the assistant should have given")
	}
	if !hasCorrection {
		in.Correction = ""
	}
	score := func(field string, n *int) {
		if n != nil && (*n < 1 || *n > 5) {
			v.Add(field, "must be 1 to 5, not %d", *n)
		}
	}
	score("rating", in.Rating)
	d := in.Dimensions
	for i, n := range []*int{d.Accuracy, d.Helpfulness, d.Clarity, d.Safety} {
		score("dimensions."+Dimensions[i], n)
	}
	tags, msg := feedback.NormalizeTags(in.Tags)
	if msg != "" {
		v.Add("tags", "%s", msg)
	}
	in.Tags = tags
	return v.Err()
}

// Outcome is where an item stands after a submission.
type Outcome struct {
	State         string   // open, agreed or disputed
	Submitted     int      // reviews submitted
	Overlap       int      // reviews the item asks for
	Disagreements []string // with State disputed: the kinds of label in dispute
	Status        string   // with State agreed: the item's status now
}

// Submit records the reviewer's label of an item, taking one of its
// reviews first when they hold none. A submitted label is final: from
// then on the reviewer sees the others' labels. The last of an item's
// reviews settles it: when the labels agree under the plan's rules the
// item takes their status (and, corrected, the first reviewer's
// correction); otherwise it is disputed and waits for an adjudicator.
func (s *Service) Submit(ctx context.Context, actor audit.Actor, orgID, feedbackID uuid.UUID, in Input) (Outcome, error) {
	who, err := reviewer(actor)
	if err != nil {
		return Outcome{}, err
	}
	if err := in.validate(); err != nil {
		return Outcome{}, err
	}
	mine, err := db.New(s.Pool).ReviewLabelGet(ctx, db.ReviewLabelGetParams{OrgID: orgID, FeedbackID: feedbackID, ReviewerID: who})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := s.Take(ctx, actor, orgID, feedbackID); err != nil {
			return Outcome{}, err
		}
	case err != nil:
		return Outcome{}, err
	case mine.SubmittedAt != nil:
		return Outcome{}, &errs.Conflict{Message: "you have submitted your review of this item already; a submitted review is final"}
	}
	var out Outcome
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// The item's row, locked: the submissions of one item settle it one
		// after another, so the last one sees every label.
		it, err := q.ReviewItemGetForUpdate(ctx, db.ReviewItemGetForUpdateParams{OrgID: orgID, FeedbackID: feedbackID})
		if err != nil {
			return errs.NotFound(err)
		}
		if it.State != db.ReviewStateOpen {
			return &errs.Conflict{Message: "the reviews of this item are complete"}
		}
		d := in.Dimensions
		if _, err := q.ReviewLabelUpdateSubmit(ctx, db.ReviewLabelUpdateSubmitParams{
			OrgID: orgID, FeedbackID: feedbackID, ReviewerID: who, Status: db.NullReviewStatus{ReviewStatus: db.ReviewStatus(in.Status), Valid: true},
			Rating: int2(in.Rating), DimAccuracy: int2(d.Accuracy), DimHelpfulness: int2(d.Helpfulness), DimClarity: int2(d.Clarity),
			DimSafety: int2(d.Safety), Tags: in.Tags, Correction: in.Correction, Note: in.Note,
		}); errors.Is(err, pgx.ErrNoRows) {
			return &errs.Conflict{Message: "you have submitted your review of this item already; a submitted review is final"}
		} else if err != nil {
			return err
		}
		if it, err = q.ReviewItemUpdateSubmitted(ctx, db.ReviewItemUpdateSubmittedParams{OrgID: orgID, FeedbackID: feedbackID}); err != nil {
			return err
		}
		out = Outcome{State: string(it.State), Submitted: int(it.Submitted), Overlap: int(it.Overlap)}
		// The label itself stays out of the log: admins read it, and the
		// reviews are blind until complete.
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.submit", TargetType: "feedback",
			TargetID: feedbackID.String(), Details: map[string]any{"plan": it.PlanID, "submitted": it.Submitted, "overlap": it.Overlap}}); err != nil {
			return err
		}
		if it.Submitted < it.Overlap {
			return nil
		}
		return s.settle(ctx, q, actor, orgID, it, &out)
	})
	return out, err
}

// settle decides a complete item: agreed, taking the labels' status, or
// disputed.
func (s *Service) settle(ctx context.Context, q *db.Queries, actor audit.Actor, orgID uuid.UUID, it db.ReviewItem, out *Outcome) error {
	plan, err := q.ReviewPlanGet(ctx, db.ReviewPlanGetParams{OrgID: orgID, ID: it.PlanID})
	if err != nil {
		return err
	}
	rows, err := q.ReviewLabelList(ctx, db.ReviewLabelListParams{OrgID: orgID, FeedbackID: it.FeedbackID})
	if err != nil {
		return err
	}
	var labels []Label
	var reviewers []uuid.UUID
	for _, r := range rows {
		if r.ReviewLabel.SubmittedAt != nil {
			labels = append(labels, toReview(r.ReviewLabel, r.ReviewerEmail).Label)
			reviewers = append(reviewers, r.ReviewLabel.ReviewerID)
		}
	}
	kinds := PlanRules(plan).Disagreements(labels)
	// The reviewers' rubric answers disagree question by question too.
	questions, err := answerDisagreements(ctx, q, orgID, it.FeedbackID, reviewers, PlanRules(plan))
	if err != nil {
		return err
	}
	kinds = append(kinds, questions...)
	cur, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: it.FeedbackID})
	if err != nil {
		return err
	}
	if len(kinds) > 0 {
		out.State, out.Disagreements = string(db.ReviewStateDisputed), kinds
		if _, err := q.ReviewItemUpdateState(ctx, db.ReviewItemUpdateStateParams{OrgID: orgID, FeedbackID: it.FeedbackID,
			State: db.ReviewStateDisputed, Disagreements: kinds}); err != nil {
			return err
		}
		note := fmt.Sprintf("%d reviewers disagree on %s: waiting for an adjudicator", len(labels), strings.Join(kinds, ", "))
		if err := history(ctx, q, orgID, it.FeedbackID, "dispute", cur.Feedback.Status, cur.Feedback.Status, note); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.dispute", TargetType: "feedback",
			TargetID: it.FeedbackID.String(), Details: map[string]any{"plan": it.PlanID, "disagreements": kinds}})
	}
	status := labels[0].Status
	out.State, out.Status = string(db.ReviewStateAgreed), status
	if _, err := q.ReviewItemUpdateState(ctx, db.ReviewItemUpdateStateParams{OrgID: orgID, FeedbackID: it.FeedbackID,
		State: db.ReviewStateAgreed, Disagreements: []string{}}); err != nil {
		return err
	}
	if _, err := q.FeedbackUpdateSettled(ctx, db.FeedbackUpdateSettledParams{OrgID: orgID, ID: it.FeedbackID,
		Status: db.ReviewStatus(status), SetCorrection: status == "corrected", Correction: labels[0].Correction}); err != nil {
		return err
	}
	note := fmt.Sprintf("%d reviewers agreed", len(labels))
	if err := history(ctx, q, orgID, it.FeedbackID, "agree", cur.Feedback.Status, db.ReviewStatus(status), note); err != nil {
		return err
	}
	return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.agree", TargetType: "feedback",
		TargetID: it.FeedbackID.String(), Details: map[string]any{"plan": it.PlanID, "from": cur.Feedback.Status, "to": status}})
}

// history adds a line to the item's own history, as the queue's reviews
// do; the actor is the review as a whole.
func history(ctx context.Context, q *db.Queries, orgID, id uuid.UUID, action string, from, to db.ReviewStatus, note string) error {
	return q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: orgID, FeedbackID: id, ActorLabel: "overlapping review",
		Action: action, FromStatus: db.NullReviewStatus{ReviewStatus: from, Valid: true},
		ToStatus: db.NullReviewStatus{ReviewStatus: to, Valid: true}, Note: note})
}

// Review is one reviewer's label as pages and the API show it.
type Review struct {
	ID         int64
	ReviewerID uuid.UUID
	Reviewer   string // e-mail
	AssignedAt time.Time
	Submitted  *time.Time // nil: taken, not submitted yet
	Note       string
	Label
}

func toReview(l db.ReviewLabel, email string) Review {
	r := Review{ID: l.ID, ReviewerID: l.ReviewerID, Reviewer: email, AssignedAt: l.AssignedAt, Submitted: l.SubmittedAt, Note: l.Note,
		Label: Label{Rating: intp(l.Rating), Dimensions: [4]*int{intp(l.DimAccuracy), intp(l.DimHelpfulness), intp(l.DimClarity), intp(l.DimSafety)},
			Tags: l.Tags, Correction: l.Correction}}
	if l.Status.Valid {
		r.Status = string(l.Status.ReviewStatus)
	}
	return r
}

// Item is an item's overlapping review as one person may see it.
type Item struct {
	PlanID        uuid.UUID
	PlanName      string
	PlanActive    bool
	Overlap       int
	Started       bool   // some review was taken
	State         string // open, agreed, disputed or adjudicated
	Assigned      int
	Submitted     int
	Disagreements []string
	// Mine is the viewer's own review, nil when they hold none.
	Mine *Review
	// Reviews are the submitted reviews the viewer may read: every one once
	// the item's reviews are complete or the viewer has submitted theirs,
	// else none. Hidden counts those kept from them.
	Reviews []Review
	Hidden  int
	// CanReview: the viewer may submit a review now (they hold one, or one
	// is free, they have not reviewed the item and the plan lists it for
	// them).
	CanReview bool
	// The adjudicator's decision, when the item was adjudicated.
	DecidedBy, DecisionNote string
	DecidedAt               *time.Time
}

// Blind reports whether the viewer is kept from the other reviews.
func (it *Item) Blind() bool {
	return it.State == string(db.ReviewStateOpen) && (it.Mine == nil || it.Mine.Submitted == nil)
}

// ForItem is an item's overlapping review as viewer sees it (uuid.Nil for
// an API key, which has no review of its own), or nil when no plan covers
// the item. Blind review: until the viewer has submitted their own label,
// and while the item's reviews are still open, the other labels are
// hidden, their reviewers too.
func (s *Service) ForItem(ctx context.Context, orgID, feedbackID, viewer uuid.UUID) (*Item, error) {
	q := db.New(s.Pool)
	row, err := q.ReviewItemGet(ctx, db.ReviewItemGetParams{OrgID: orgID, FeedbackID: feedbackID})
	if errors.Is(err, pgx.ErrNoRows) {
		p, err := q.ReviewPlanGetForItem(ctx, db.ReviewPlanGetForItemParams{OrgID: orgID, FeedbackID: feedbackID})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		it := &Item{PlanID: p.ID, PlanName: p.Name, PlanActive: p.Active, Overlap: int(p.Overlap), State: string(db.ReviewStateOpen)}
		if viewer != uuid.Nil && p.Active {
			if it.CanReview, err = s.listed(ctx, q, orgID, p, feedbackID, viewer); err != nil {
				return nil, err
			}
		}
		return it, nil
	}
	if err != nil {
		return nil, err
	}
	r := row.ReviewItem
	it := &Item{PlanID: r.PlanID, PlanName: row.PlanName, PlanActive: row.PlanActive, Overlap: int(r.Overlap), Started: true,
		State: string(r.State), Assigned: int(r.Assigned), Submitted: int(r.Submitted), Disagreements: r.Disagreements,
		DecidedBy: r.DecidedLabel, DecisionNote: r.DecisionNote, DecidedAt: r.DecidedAt}
	labels, err := q.ReviewLabelList(ctx, db.ReviewLabelListParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil {
		return nil, err
	}
	var submitted []Review
	for _, l := range labels {
		rv := toReview(l.ReviewLabel, l.ReviewerEmail)
		if viewer != uuid.Nil && l.ReviewLabel.ReviewerID == viewer {
			it.Mine = &rv
		}
		if rv.Submitted != nil {
			submitted = append(submitted, rv)
		}
	}
	open := r.State == db.ReviewStateOpen
	if !open || (it.Mine != nil && it.Mine.Submitted != nil) {
		it.Reviews = submitted
	} else {
		it.Hidden = len(submitted)
	}
	it.CanReview = open && row.PlanActive && viewer != uuid.Nil &&
		((it.Mine != nil && it.Mine.Submitted == nil) || (it.Mine == nil && r.Assigned < r.Overlap))
	if it.CanReview && it.Mine == nil {
		// Free, but only for the reviewers the plan lists it for.
		plan, err := q.ReviewPlanGet(ctx, db.ReviewPlanGetParams{OrgID: orgID, ID: r.PlanID})
		if err != nil {
			return nil, err
		}
		if it.CanReview, err = s.listed(ctx, q, orgID, plan, feedbackID, viewer); err != nil {
			return nil, err
		}
	}
	return it, nil
}

func int2(n *int) pgtype.Int2 {
	if n == nil {
		return pgtype.Int2{}
	}
	return pgtype.Int2{Int16: int16(*n), Valid: true}
}

func intp(n pgtype.Int2) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int16)
	return &v
}
