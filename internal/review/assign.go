package review

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// Handing out items. Each item of a plan has a counter of reviews taken
// (review_items.assigned) that one statement raises only while it is below
// the plan's overlap, and each reviewer's assignment is a row unique per
// item and reviewer: so however many reviewers ask at once, no item is
// taken more than k times and no reviewer gets an item twice.

// candidates is how many items one look for the next item considers.
const candidates = 20

// errTaken: someone took the last review of a candidate first.
var errTaken = errors.New("taken")

// reviewer is the person an actor is; reviews are given by people, not by
// API keys.
func reviewer(actor audit.Actor) (uuid.UUID, error) {
	if actor.Kind != "user" || actor.ID == uuid.Nil {
		return uuid.Nil, errs.ErrForbidden
	}
	return actor.ID, nil
}

// Next gives the reviewer the next item of a plan to review: the item they
// hold and have not submitted yet, or else one more item, the one with the
// fewest reviews taken (oldest first among equals) that they have not
// reviewed. uuid.Nil: nothing is left for them.
func (s *Service) Next(ctx context.Context, actor audit.Actor, orgID, planID uuid.UUID) (uuid.UUID, error) {
	who, err := reviewer(actor)
	if err != nil {
		return uuid.Nil, err
	}
	plan, err := s.Plan(ctx, orgID, planID)
	if err != nil {
		return uuid.Nil, err
	}
	if !plan.Active {
		return uuid.Nil, &errs.Conflict{Message: "this plan has ended: it hands out no more items"}
	}
	q := db.New(s.Pool)
	held, err := q.ReviewLabelGetOpen(ctx, db.ReviewLabelGetOpenParams{OrgID: orgID, ReviewerID: who, PlanID: planID})
	if err == nil {
		return held, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, err
	}
	params, err := candidateParams(plan, orgID, who)
	if err != nil {
		return uuid.Nil, err
	}
	// Others may take every candidate between the look and the claims:
	// look again, a few times, before saying nothing is left.
	for range 5 {
		cands, err := q.ReviewListCandidates(ctx, params)
		if err != nil || len(cands) == 0 {
			return uuid.Nil, err
		}
		for _, c := range cands {
			err := s.claim(ctx, orgID, plan, c.ID, who)
			if err == nil {
				return c.ID, nil
			}
			if !errors.Is(err, errTaken) {
				return uuid.Nil, err
			}
		}
	}
	return uuid.Nil, nil
}

// candidateParams asks for the items Next considers handing the reviewer
// in a plan: the first candidates of them in the plan's order.
func candidateParams(plan db.ReviewPlan, orgID, who uuid.UUID) (db.ReviewListCandidatesParams, error) {
	f, err := PlanFilter(plan)
	if err != nil {
		return db.ReviewListCandidatesParams{}, err
	}
	u := unstartedParams(f, orgID)
	return db.ReviewListCandidatesParams{
		ReviewerID: who, RowLimit: candidates, OrgID: orgID, Status: u.Status, FeedbackType: u.FeedbackType, Source: u.Source,
		RatingMin: u.RatingMin, RatingMax: u.RatingMax, DimBelow: u.DimBelow, Tag: u.Tag, Model: u.Model, AssigneeID: u.AssigneeID,
		CreatedFrom: u.CreatedFrom, CreatedTo: u.CreatedTo, WithDuplicates: u.WithDuplicates, PiiOnly: u.PiiOnly, Q: u.Q,
		DatasetID: u.DatasetID, SafetyOnly: u.SafetyOnly, PlanID: plan.ID,
	}, nil
}

// listed reports whether the plan lists an item for the reviewer: it is
// among the items Next would consider handing them now. Items further
// down the plan's order are for others first, so that the overlap is
// reached evenly and nobody picks which items they review.
func (s *Service) listed(ctx context.Context, q *db.Queries, orgID uuid.UUID, plan db.ReviewPlan, feedbackID, who uuid.UUID) (bool, error) {
	params, err := candidateParams(plan, orgID, who)
	if err != nil {
		return false, err
	}
	cands, err := q.ReviewListCandidates(ctx, params)
	if err != nil {
		return false, err
	}
	for _, c := range cands {
		if c.ID == feedbackID {
			return true, nil
		}
	}
	return false, nil
}

// notHanded refuses a review of an item the plan has not handed the
// reviewer, naming the plan.
func notHanded(plan db.ReviewPlan) error {
	return &errs.Conflict{Message: fmt.Sprintf("the plan %q has not handed you this item: review the items its Next gives you", plan.Name)}
}

// claim takes one review of an item of a plan for a reviewer, or answers
// errTaken when its reviews are all taken, it belongs to another plan, or
// the reviewer holds it already.
func (s *Service) claim(ctx context.Context, orgID uuid.UUID, plan db.ReviewPlan, feedbackID, who uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		_, err := q.ReviewItemInsertOrUpdateClaim(ctx, db.ReviewItemInsertOrUpdateClaimParams{
			FeedbackID: feedbackID, OrgID: orgID, PlanID: plan.ID, Overlap: plan.Overlap})
		if errors.Is(err, pgx.ErrNoRows) {
			return errTaken
		}
		if err != nil {
			return err
		}
		_, err = q.ReviewLabelInsert(ctx, db.ReviewLabelInsertParams{OrgID: orgID, FeedbackID: feedbackID, PlanID: plan.ID, ReviewerID: who})
		if errors.Is(err, pgx.ErrNoRows) {
			return errTaken // rolls the claim back
		}
		return err
	})
}

// Take takes one review of a given item for the reviewer, as opening it
// from the queue and starting to review does, when the plan lists it for
// them (see listed). Holding it already is no error.
func (s *Service) Take(ctx context.Context, actor audit.Actor, orgID, feedbackID uuid.UUID) error {
	who, err := reviewer(actor)
	if err != nil {
		return err
	}
	q := db.New(s.Pool)
	if _, err := q.ReviewLabelGet(ctx, db.ReviewLabelGetParams{OrgID: orgID, FeedbackID: feedbackID, ReviewerID: who}); err == nil {
		return nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	plan, err := s.planOf(ctx, q, orgID, feedbackID)
	if err != nil {
		return err
	}
	if !plan.Active {
		return &errs.Conflict{Message: "the plan this item belongs to has ended"}
	}
	if ok, err := s.listed(ctx, q, orgID, plan, feedbackID, who); err != nil {
		return err
	} else if !ok {
		if n, err := q.ReviewItemGet(ctx, db.ReviewItemGetParams{OrgID: orgID, FeedbackID: feedbackID}); err == nil && n.ReviewItem.Assigned >= n.ReviewItem.Overlap {
			return &errs.Conflict{Message: "all the reviews this item asks for are taken by other reviewers"}
		}
		return notHanded(plan)
	}
	err = s.claim(ctx, orgID, plan, feedbackID, who)
	if errors.Is(err, errTaken) {
		if _, err := q.ReviewLabelGet(ctx, db.ReviewLabelGetParams{OrgID: orgID, FeedbackID: feedbackID, ReviewerID: who}); err == nil {
			return nil // a second click of the same reviewer
		}
		return &errs.Conflict{Message: "all the reviews this item asks for are taken by other reviewers"}
	}
	return err
}

// planOf is the plan an item belongs to: the one that started it, or the
// active plan that covers it; errs.ErrNotFound when no plan does.
func (s *Service) planOf(ctx context.Context, q *db.Queries, orgID, feedbackID uuid.UUID) (db.ReviewPlan, error) {
	it, err := q.ReviewItemGet(ctx, db.ReviewItemGetParams{OrgID: orgID, FeedbackID: feedbackID})
	if err == nil {
		return s.Plan(ctx, orgID, it.ReviewItem.PlanID)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return db.ReviewPlan{}, err
	}
	p, err := q.ReviewPlanGetForItem(ctx, db.ReviewPlanGetForItemParams{OrgID: orgID, FeedbackID: feedbackID})
	return p, errs.NotFound(err)
}

// Release gives back a review the reviewer took and has not submitted,
// so that someone else can take it.
func (s *Service) Release(ctx context.Context, actor audit.Actor, orgID, feedbackID uuid.UUID) error {
	who, err := reviewer(actor)
	if err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.ReviewItemGetForUpdate(ctx, db.ReviewItemGetForUpdateParams{OrgID: orgID, FeedbackID: feedbackID}); err != nil {
			return errs.NotFound(err)
		}
		n, err := q.ReviewLabelDelete(ctx, db.ReviewLabelDeleteParams{OrgID: orgID, FeedbackID: feedbackID, ReviewerID: who})
		if err != nil {
			return err
		}
		if n == 0 {
			return &errs.Conflict{Message: "you hold no review of this item to give back"}
		}
		_, err = q.ReviewItemUpdateReleased(ctx, db.ReviewItemUpdateReleasedParams{OrgID: orgID, FeedbackID: feedbackID})
		return err
	})
}
