// Package review is overlapping review: a plan asks for k independent
// reviews of every item a queue filter selects (a tag, a dataset's
// members, any filter), items are handed to reviewers so that each sees an
// item at most once and every item reaches k evenly, each reviewer's label
// is kept apart and hidden from the others until they submit their own,
// and items whose reviewers disagree go to an adjudicator, whose decision
// becomes the item's label. It also measures how well reviewers agree
// (agreement.go) and tells datasets and pair generation which items are
// settled (settled.go).
//
// Items no plan covers keep the queue's single review (k = 1), untouched:
// nothing here runs on the queue's own pages.
package review

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds overlapping review on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Limits.
const (
	MinOverlap     = 2
	MaxOverlap     = 10
	MaxActivePlans = 50
	MaxPlanName    = 200
	// MaxPlansListed bounds the plans a page or the API lists.
	MaxPlansListed = 200
)

// NewPlan asks for Overlap reviews of every item Filter selects.
type NewPlan struct {
	Name    string // "" names the plan after its filter
	Filter  feedback.Filter
	Overlap int
	Rules   Rules
}

// CreatePlan starts a plan. A dataset in the filter must be the
// organisation's.
func (s *Service) CreatePlan(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewPlan) (db.ReviewPlan, error) {
	v := &errs.Invalid{}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name != "" && v.Text("name", in.Name, MaxPlanName*4, false) && utf8.RuneCountInString(in.Name) > MaxPlanName {
		v.Add("name", "at most %d characters", MaxPlanName)
	}
	if in.Overlap < MinOverlap || in.Overlap > MaxOverlap {
		v.Add("overlap", "must be %d to %d reviews per item (1 is the queue's single review: no plan needed)", MinOverlap, MaxOverlap)
	}
	if in.Rules.RatingTolerance < 0 || in.Rules.RatingTolerance > MaxTolerance {
		v.Add("rating_tolerance", "must be 0 to %d rating points", MaxTolerance)
	}
	if in.Rules.DimensionTolerance < 0 || in.Rules.DimensionTolerance > MaxTolerance {
		v.Add("dimension_tolerance", "must be 0 to %d points", MaxTolerance)
	}
	if v.Has() {
		return db.ReviewPlan{}, v
	}
	var out db.ReviewPlan
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		datasetName := ""
		if in.Filter.DatasetID != uuid.Nil {
			d, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: orgID, ID: in.Filter.DatasetID})
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.InvalidField("dataset_id", "no dataset %s in this organisation", in.Filter.DatasetID)
			}
			if err != nil {
				return err
			}
			datasetName = d.TrainingDataset.Name
		}
		n, err := q.ReviewPlanCountActive(ctx, orgID)
		if err != nil {
			return err
		}
		if n >= MaxActivePlans {
			return errs.InvalidField("overlap", "the organisation has %d active plans, the most it may have: end one first", n)
		}
		name := in.Name
		if name == "" {
			name = describeFilter(in.Filter, datasetName)
		}
		p := in.Filter.ListParams(orgID, nil, 0)
		out, err = q.ReviewPlanInsert(ctx, db.ReviewPlanInsertParams{
			OrgID: orgID, Name: name, Overlap: int16(in.Overlap), Filter: in.Filter.Values().Encode(),
			Status: p.Status, FeedbackType: p.FeedbackType, Source: p.Source, RatingMin: p.RatingMin, RatingMax: p.RatingMax,
			DimBelow: p.DimBelow, Tag: p.Tag, Model: p.Model, AssigneeID: p.AssigneeID, CreatedFrom: p.CreatedFrom,
			CreatedTo: p.CreatedTo, WithDuplicates: p.WithDuplicates, PiiOnly: p.PiiOnly, Q: p.Q, DatasetID: p.DatasetID,
			SafetyOnly: p.SafetyOnly, RatingTolerance: int16(in.Rules.RatingTolerance),
			DimensionTolerance: int16(in.Rules.DimensionTolerance), TagsMustMatch: in.Rules.TagsMustMatch, CreatedByLabel: actor.Label,
		})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.plan_create", TargetType: "review_plan",
			TargetID: out.ID.String(), Details: map[string]any{"name": out.Name, "overlap": out.Overlap, "filter": out.Filter,
				"rules": in.Rules}})
	})
	return out, err
}

// describeFilter names a plan after what it covers.
func describeFilter(f feedback.Filter, datasetName string) string {
	rest := f
	rest.Tag, rest.DatasetID = "", uuid.Nil
	var parts []string
	if f.Tag != "" {
		parts = append(parts, "Tag “"+f.Tag+"”")
	}
	if datasetName != "" {
		parts = append(parts, "Dataset “"+datasetName+"”")
	}
	if q := rest.Values().Encode(); q != "" {
		if decoded, err := url.QueryUnescape(q); err == nil {
			q = decoded
		}
		parts = append(parts, "Filter "+q)
	}
	if len(parts) == 0 {
		return "All feedback"
	}
	name := strings.Join(parts, ", ")
	if utf8.RuneCountInString(name) > MaxPlanName {
		name = string([]rune(name)[:MaxPlanName-1]) + "…"
	}
	return name
}

// EndPlan stops a plan handing out items. Its labels, agreed and disputed
// items stay; its open items are no longer held from the queue.
func (s *Service) EndPlan(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) (db.ReviewPlan, error) {
	var out db.ReviewPlan
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		out, err = q.ReviewPlanUpdateEnd(ctx, db.ReviewPlanUpdateEndParams{OrgID: orgID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := q.ReviewPlanGet(ctx, db.ReviewPlanGetParams{OrgID: orgID, ID: id}); err != nil {
				return errs.NotFound(err)
			}
			return &errs.Conflict{Message: "the plan has ended already"}
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.plan_end", TargetType: "review_plan",
			TargetID: id.String(), Details: map[string]any{"name": out.Name}})
	})
	return out, err
}

// Plan returns a plan of the organisation, or errs.ErrNotFound.
func (s *Service) Plan(ctx context.Context, orgID, id uuid.UUID) (db.ReviewPlan, error) {
	p, err := db.New(s.Pool).ReviewPlanGet(ctx, db.ReviewPlanGetParams{OrgID: orgID, ID: id})
	return p, errs.NotFound(err)
}

// PlanFilter is a plan's filter as the queue reads it.
func PlanFilter(p db.ReviewPlan) (feedback.Filter, error) {
	q, err := url.ParseQuery(p.Filter)
	if err != nil {
		return feedback.Filter{}, fmt.Errorf("plan %s: filter %q: %w", p.ID, p.Filter, err)
	}
	return feedback.ParseFilter(q)
}

// PlanRules are a plan's disagreement rules.
func PlanRules(p db.ReviewPlan) Rules {
	return Rules{RatingTolerance: int(p.RatingTolerance), DimensionTolerance: int(p.DimensionTolerance), TagsMustMatch: p.TagsMustMatch}
}

// Progress is how far a plan has come: Reviews[n] items have n reviews
// submitted (n from 0 to the overlap), and the items by where they stand.
type Progress struct {
	Reviews     []int
	Total       int
	Open        int // fewer than the overlap submitted, started or not
	Agreed      int
	Disputed    int
	Adjudicated int
}

// PlanProgress is a plan with its progress.
type PlanProgress struct {
	Plan     db.ReviewPlan
	Progress Progress
}

// Plans lists the organisation's plans, active first, with their progress.
// An ended plan's items it never started are not counted.
func (s *Service) Plans(ctx context.Context, orgID uuid.UUID) ([]PlanProgress, error) {
	q := db.New(s.Pool)
	plans, err := q.ReviewPlanList(ctx, db.ReviewPlanListParams{OrgID: orgID, RowLimit: MaxPlansListed})
	if err != nil {
		return nil, err
	}
	out := make([]PlanProgress, len(plans))
	for i, p := range plans {
		out[i].Plan = p
		if out[i].Progress, err = s.progress(ctx, q, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Service) progress(ctx context.Context, q *db.Queries, p db.ReviewPlan) (Progress, error) {
	pr := Progress{Reviews: make([]int, p.Overlap+1)}
	rows, err := q.ReviewItemCountByPlan(ctx, db.ReviewItemCountByPlanParams{OrgID: p.OrgID, PlanID: p.ID})
	if err != nil {
		return pr, err
	}
	for _, r := range rows {
		n := int(r.Count)
		if int(r.Submitted) < len(pr.Reviews) {
			pr.Reviews[r.Submitted] += n
		}
		pr.Total += n
		switch r.State {
		case db.ReviewStateOpen:
			pr.Open += n
		case db.ReviewStateAgreed:
			pr.Agreed += n
		case db.ReviewStateDisputed:
			pr.Disputed += n
		case db.ReviewStateAdjudicated:
			pr.Adjudicated += n
		}
	}
	if !p.Active {
		return pr, nil
	}
	f, err := PlanFilter(p)
	if err != nil {
		return pr, err
	}
	c := unstartedParams(f, p.OrgID)
	n, err := q.ReviewCountUnstarted(ctx, c)
	if err != nil {
		return pr, err
	}
	pr.Reviews[0] += int(n)
	pr.Open += int(n)
	pr.Total += int(n)
	return pr, nil
}

func unstartedParams(f feedback.Filter, orgID uuid.UUID) db.ReviewCountUnstartedParams {
	p := f.ListParams(orgID, nil, 0)
	return db.ReviewCountUnstartedParams{
		OrgID: orgID, Status: p.Status, FeedbackType: p.FeedbackType, Source: p.Source, RatingMin: p.RatingMin,
		RatingMax: p.RatingMax, DimBelow: p.DimBelow, Tag: p.Tag, Model: p.Model, AssigneeID: p.AssigneeID,
		CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, WithDuplicates: p.WithDuplicates, PiiOnly: p.PiiOnly,
		Q: p.Q, DatasetID: p.DatasetID, SafetyOnly: p.SafetyOnly,
	}
}

// Adjudicator is a senior curator on the organisation's list.
type Adjudicator struct {
	UserID  uuid.UUID
	Email   string
	AddedBy string
}

// Adjudicators lists the named adjudicators; admins decide too, listed or
// not.
func (s *Service) Adjudicators(ctx context.Context, orgID uuid.UUID) ([]Adjudicator, error) {
	rows, err := db.New(s.Pool).ReviewAdjudicatorList(ctx, orgID)
	out := make([]Adjudicator, len(rows))
	for i, r := range rows {
		out[i] = Adjudicator{UserID: r.UserID, Email: r.Email, AddedBy: r.AddedByLabel}
	}
	return out, err
}

// AddAdjudicator puts a user of the organisation on the list.
func (s *Service) AddAdjudicator(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.ReviewAdjudicatorInsert(ctx, db.ReviewAdjudicatorInsertParams{OrgID: orgID, UserID: userID, AddedByLabel: actor.Label})
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := q.UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: userID}); errors.Is(err, pgx.ErrNoRows) {
				return errs.InvalidField("user_id", "no such user in this organisation")
			}
			return nil // listed already
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.adjudicator_add", TargetType: "user", TargetID: userID.String()})
	})
}

// RemoveAdjudicator takes a user off the list.
func (s *Service) RemoveAdjudicator(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.ReviewAdjudicatorDelete(ctx, db.ReviewAdjudicatorDeleteParams{OrgID: orgID, UserID: userID})
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.ErrNotFound // not on this organisation's list
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "review.adjudicator_remove", TargetType: "user", TargetID: userID.String()})
	})
}

// Judge is who is asking, for the decisions only some may take: the
// person's user id (uuid.Nil for an API key) and whether they are an
// admin.
type Judge struct {
	UserID uuid.UUID
	Admin  bool
}

// CanAdjudicate reports whether the person decides disputed items: an
// admin, or a user on the list.
func (s *Service) CanAdjudicate(ctx context.Context, orgID uuid.UUID, who Judge) (bool, error) {
	if who.Admin {
		return true, nil
	}
	if who.UserID == uuid.Nil {
		return false, nil
	}
	n, err := db.New(s.Pool).ReviewAdjudicatorCount(ctx, db.ReviewAdjudicatorCountParams{OrgID: orgID, UserID: who.UserID})
	return n > 0, err
}

// Disputed counts the items waiting for an adjudicator.
func (s *Service) Disputed(ctx context.Context, orgID uuid.UUID) (int, error) {
	n, err := db.New(s.Pool).ReviewItemCountDisputed(ctx, orgID)
	return int(n), err
}
