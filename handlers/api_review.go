package handlers

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/review"
)

// Overlapping review's JSON API: plans, the next item, each reviewer's
// label (blind until the caller has submitted theirs), adjudication and
// agreement.

// planObject is a plan as the API shows it.
type planObject struct {
	ID        uuid.UUID      `json:"id"`
	Name      string         `json:"name"`
	Overlap   int            `json:"overlap"`
	Filter    string         `json:"filter"`
	Rules     review.Rules   `json:"rules"`
	Active    bool           `json:"active"`
	Progress  progressObject `json:"progress"`
	CreatedBy string         `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	EndedAt   *time.Time     `json:"ended_at,omitempty"`
}

// progressObject: reviews[n] items have n reviews submitted.
type progressObject struct {
	Reviews     []int `json:"reviews"`
	Total       int   `json:"total"`
	Open        int   `json:"open"`
	Agreed      int   `json:"agreed"`
	Disputed    int   `json:"disputed"`
	Adjudicated int   `json:"adjudicated"`
}

func toPlanObject(p db.ReviewPlan, pr review.Progress) planObject {
	if pr.Reviews == nil {
		pr.Reviews = make([]int, p.Overlap+1)
	}
	return planObject{ID: p.ID, Name: p.Name, Overlap: int(p.Overlap), Filter: p.Filter, Rules: review.PlanRules(p), Active: p.Active,
		Progress: progressObject{Reviews: pr.Reviews, Total: pr.Total, Open: pr.Open, Agreed: pr.Agreed, Disputed: pr.Disputed,
			Adjudicated: pr.Adjudicated}, CreatedBy: p.CreatedByLabel, CreatedAt: p.CreatedAt, EndedAt: p.EndedAt}
}

// APIReviewPlanList lists the organisation's plans with their progress,
// active ones first ({"data": [...]}; plans are few, so one page).
func (h *Handlers) APIReviewPlanList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	plans, err := h.Review.Plans(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	out := make([]planObject, len(plans))
	for i, p := range plans {
		out[i] = toPlanObject(p.Plan, p.Progress)
	}
	return c.JSON(http.StatusOK, listBody[planObject]{Data: out})
}

// planBody is POST /api/review/plans: the scope as a queue filter, a tag
// or a dataset (together they narrow each other), the reviews per item and
// the disagreement rules.
type planBody struct {
	Name               string  `json:"name"`
	Filter             string  `json:"filter"`
	Tag                string  `json:"tag"`
	DatasetID          *string `json:"dataset_id"`
	Overlap            int     `json:"overlap"`
	RatingTolerance    *int    `json:"rating_tolerance"`
	DimensionTolerance *int    `json:"dimension_tolerance"`
	TagsMustMatch      bool    `json:"tags_must_match"`
}

// APIReviewPlanCreate asks for overlap: 201 with the plan.
func (h *Handlers) APIReviewPlanCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body planBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	in := review.NewPlan{Name: body.Name, Overlap: body.Overlap, Rules: review.DefaultRules}
	in.Rules.TagsMustMatch = body.TagsMustMatch
	if body.RatingTolerance != nil {
		in.Rules.RatingTolerance = *body.RatingTolerance
	}
	if body.DimensionTolerance != nil {
		in.Rules.DimensionTolerance = *body.DimensionTolerance
	}
	v := &errs.Invalid{}
	if body.Filter != "" {
		f, err := parseFilterText(body.Filter)
		if err != nil {
			v.Add("filter", "is not a queue filter: %s", filterProblem(err))
		}
		in.Filter = f
	}
	if body.Tag != "" {
		tags, msg := feedback.NormalizeTags([]string{body.Tag})
		if msg != "" {
			v.Add("tag", "%s", msg)
		} else {
			in.Filter.Tag = tags[0]
		}
	}
	if body.DatasetID != nil {
		id, err := uuid.Parse(*body.DatasetID)
		if err != nil {
			v.Add("dataset_id", "is not a dataset id")
		}
		in.Filter.DatasetID = id
	}
	if v.Has() {
		return v
	}
	p, err := h.Review.CreatePlan(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toPlanObject(p, review.Progress{}))
}

// APIReviewNext gives the caller the next item of a plan to review: 200
// with its id, or 204 when nothing is left for them. Reviews are given by
// people: an API key is refused.
func (h *Handlers) APIReviewNext(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	next, err := h.Review.Next(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	if next == uuid.Nil {
		return c.NoContent(http.StatusNoContent)
	}
	return c.JSON(http.StatusOK, map[string]any{"feedback_id": next, "plan_id": id, "url": "/api/feedback/" + next.String() + "/reviews"})
}

// reviewObject is one reviewer's label.
type reviewObject struct {
	Reviewer    reviewerObject      `json:"reviewer"`
	Status      string              `json:"status"`
	Rating      *int                `json:"rating"`
	Dimensions  feedback.Dimensions `json:"dimensions"`
	Tags        []string            `json:"tags"`
	Correction  string              `json:"correction"`
	Note        string              `json:"note"`
	SubmittedAt *time.Time          `json:"submitted_at"`
}

type reviewerObject struct {
	ID    uuid.UUID `json:"id"`
	Email string    `json:"email"`
}

func toReviewObject(r review.Review) reviewObject {
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	d := r.Dimensions
	return reviewObject{Reviewer: reviewerObject{ID: r.ReviewerID, Email: r.Reviewer}, Status: r.Status, Rating: r.Rating,
		Dimensions: feedback.Dimensions{Accuracy: d[0], Helpfulness: d[1], Clarity: d[2], Safety: d[3]}, Tags: tags,
		Correction: r.Correction, Note: r.Note, SubmittedAt: r.Submitted}
}

// itemReviewsObject is GET /api/feedback/:id/reviews: the reviews the
// caller may read, where the item stands, and how many reviews are hidden
// from the caller until they submit their own.
type itemReviewsObject struct {
	Data          []reviewObject `json:"data"`
	Mine          *reviewObject  `json:"mine"`
	PlanID        uuid.UUID      `json:"plan_id"`
	State         string         `json:"state"`
	Overlap       int            `json:"overlap"`
	Submitted     int            `json:"submitted"`
	Hidden        int            `json:"hidden"`
	Disagreements []string       `json:"disagreements"`
	Decision      *decisionObj   `json:"decision,omitempty"`
}

type decisionObj struct {
	By        string     `json:"by"`
	Note      string     `json:"note"`
	DecidedAt *time.Time `json:"decided_at"`
}

// viewerOf is the caller as a reviewer: a signed-in curator or admin; an
// API key or a viewer has no review of their own.
func viewerOf(caller *Caller) uuid.UUID {
	if caller.Kind == "session" && caller.Role.AtLeast(auth.Curator) {
		return caller.UserID
	}
	return uuid.Nil
}

func (h *Handlers) itemReviews(c echo.Context, id uuid.UUID) (itemReviewsObject, error) {
	caller := CallerOf(c)
	it, err := h.Review.ForItem(ctx(c), caller.OrgID, id, viewerOf(caller))
	if err != nil {
		return itemReviewsObject{}, err
	}
	if it == nil {
		// Not under overlapping review, or not the organisation's item.
		if _, err := h.Feedback.Get(ctx(c), caller.OrgID, id); err != nil {
			return itemReviewsObject{}, err
		}
		return itemReviewsObject{}, errs.InvalidField("id", "this item is not under overlapping review: it has the queue's single review")
	}
	out := itemReviewsObject{Data: []reviewObject{}, PlanID: it.PlanID, State: it.State, Overlap: it.Overlap, Submitted: it.Submitted,
		Hidden: it.Hidden, Disagreements: it.Disagreements}
	if out.Disagreements == nil {
		out.Disagreements = []string{}
	}
	for _, r := range it.Reviews {
		out.Data = append(out.Data, toReviewObject(r))
	}
	if it.Mine != nil {
		m := toReviewObject(*it.Mine)
		out.Mine = &m
	}
	if it.State == "adjudicated" {
		out.Decision = &decisionObj{By: it.DecidedBy, Note: it.DecisionNote, DecidedAt: it.DecidedAt}
	}
	return out, nil
}

// APIFeedbackReviews lists an item's reviews, blind: until the caller has
// submitted their own, and while the item's reviews are open, only the
// caller's own is shown and the others are counted in "hidden".
func (h *Handlers) APIFeedbackReviews(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	out, err := h.itemReviews(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// reviewBody is POST /api/feedback/:id/reviews.
type reviewBody struct {
	Status     string               `json:"status"`
	Rating     *int                 `json:"rating"`
	Dimensions *feedback.Dimensions `json:"dimensions"`
	Tags       []string             `json:"tags"`
	Correction string               `json:"correction"`
	Note       string               `json:"note"`
}

// APIFeedbackReviewCreate submits the caller's label of an item under
// overlapping review (taking one of its reviews when they hold none): 201
// with the item's reviews, which the caller may now read.
func (h *Handlers) APIFeedbackReviewCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body reviewBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	in := review.Input{Status: body.Status, Rating: body.Rating, Tags: body.Tags, Correction: body.Correction, Note: body.Note}
	if body.Dimensions != nil {
		in.Dimensions = *body.Dimensions
	}
	if _, err := h.Review.Submit(ctx(c), actor(c), CallerOf(c).OrgID, id, in); err != nil {
		return err
	}
	out, err := h.itemReviews(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

// decisionBody is POST /api/feedback/:id/adjudication.
type decisionBody struct {
	Status     string `json:"status"`
	Correction string `json:"correction"`
	Note       string `json:"note"`
	// Answers decide the rubric questions in dispute: by rubric id, then
	// question key, one of the answers the reviewers gave.
	Answers map[uuid.UUID]map[string]json.RawMessage `json:"answers"`
}

// APIFeedbackAdjudicate decides a disputed item (admins and named
// adjudicators): 200 with the item's reviews and the decision.
func (h *Handlers) APIFeedbackAdjudicate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body decisionBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	caller := CallerOf(c)
	if err := h.Review.Decide(ctx(c), actor(c), judgeOf(caller), caller.OrgID, id,
		review.Decision{Status: body.Status, Correction: body.Correction, Note: body.Note, Answers: body.Answers}); err != nil {
		return err
	}
	out, err := h.itemReviews(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// kindObject is the agreement on one kind of label.
type kindObject struct {
	Kind          string         `json:"kind"`
	Level         string         `json:"level"`
	Alpha         review.Figure  `json:"krippendorff_alpha"`
	AlphaInterval *review.Figure `json:"krippendorff_alpha_interval,omitempty"`
	Fleiss        review.Figure  `json:"fleiss_kappa"`
	Pairs         []pairObject   `json:"pairs"`
	Trend         []trendObject  `json:"trend"`
}

type pairObject struct {
	Reviewers [2]reviewerObject `json:"reviewers"`
	Kappa     review.Figure     `json:"cohen_kappa"`
	Agreed    int               `json:"agreed"`
}

type trendObject struct {
	Week  string        `json:"week"`
	Alpha review.Figure `json:"krippendorff_alpha"`
}

// APIAgreement is how well reviewers agree on the items of a queue filter
// (?tag=, ?dataset_id= or any of the queue's), one entry of "data" per
// kind of label (?kind= for one), each with its coefficients, the counts
// behind them, Cohen's kappa for every pair of reviewers and alpha by week.
func (h *Handlers) APIAgreement(c echo.Context) error {
	f, kind, question, err := agreementScopeQuestion(c)
	if err != nil {
		return err
	}
	if question != nil {
		qa, err := h.Review.QuestionAgreement(ctx(c), CallerOf(c).OrgID, f, question.RubricID, question.Key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toQuestionObject(qa))
	}
	var kinds []string
	if kind != "" {
		kinds = []string{kind}
	}
	a, err := h.Review.Agreement(ctx(c), CallerOf(c).OrgID, f, kinds)
	if err != nil {
		return err
	}
	out := struct {
		Scope     string           `json:"scope"`
		Items     int              `json:"items"`
		Reviews   int              `json:"reviews"`
		Truncated bool             `json:"truncated"`
		Reviewers []reviewerObject `json:"reviewers"`
		Data      []kindObject     `json:"data"`
	}{Scope: f.Values().Encode(), Items: a.Items, Reviews: a.Labels, Truncated: a.Truncated, Reviewers: []reviewerObject{}, Data: []kindObject{}}
	for _, r := range a.Reviewers {
		out.Reviewers = append(out.Reviewers, reviewerObject{ID: r.ID, Email: r.Email})
	}
	for _, k := range a.Kinds {
		out.Data = append(out.Data, toKindObject(k))
	}
	return c.JSON(http.StatusOK, out)
}

func toKindObject(k review.KindAgreement) kindObject {
	ko := kindObject{Kind: k.Kind, Level: string(k.Level), Alpha: k.Alpha, AlphaInterval: k.AlphaInterval, Fleiss: k.Fleiss,
		Pairs: []pairObject{}, Trend: []trendObject{}}
	for _, p := range k.Pairs {
		ko.Pairs = append(ko.Pairs, pairObject{Reviewers: [2]reviewerObject{{p.A.ID, p.A.Email}, {p.B.ID, p.B.Email}}, Kappa: p.Figure, Agreed: p.Agreed})
	}
	for _, t := range k.Trend {
		ko.Trend = append(ko.Trend, trendObject{Week: t.Week.Format("2006-01-02"), Alpha: t.Figure})
	}
	return ko
}
