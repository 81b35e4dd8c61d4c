package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/views"
)

// Overlapping review's pages: the plans and their progress, the next item
// of a plan, a reviewer's label on the item page, adjudication and the
// agreement between reviewers.

// ReviewHome lists the plans with their progress; admins ask for overlap
// and name adjudicators here.
func (h *Handlers) ReviewHome(c echo.Context) error {
	return h.renderReviewHome(c, http.StatusOK, views.ReviewHomeView{Form: views.ReviewPlanForm{Scope: "tag", Overlap: "2",
		RatingTolerance: strconv.Itoa(review.DefaultRules.RatingTolerance), DimensionTolerance: strconv.Itoa(review.DefaultRules.DimensionTolerance)}})
}

func (h *Handlers) renderReviewHome(c echo.Context, status int, v views.ReviewHomeView) error {
	caller := CallerOf(c)
	plans, err := h.Review.Plans(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	if v.Disputed, err = h.Review.Disputed(ctx(c), caller.OrgID); err != nil {
		return err
	}
	questions, err := h.Review.AgreementQuestions(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v.CanReview, v.IsAdmin = caller.Role.AtLeast(auth.Curator), caller.Role.AtLeast(auth.Admin)
	for _, pp := range plans {
		row := planRow(pp)
		// Each rubric question's agreement over the plan's items.
		sep := "?"
		if pp.Plan.Filter != "" {
			sep = "&"
		}
		for _, q := range questions {
			link := url.Values{"rubric_id": {q.RubricID.String()}, "question": {q.Key}}
			row.QuestionLinks = append(row.QuestionLinks, views.Option{Label: q.Title, Value: row.AgreementURL + sep + link.Encode()})
		}
		v.Plans = append(v.Plans, row)
	}
	if v.IsAdmin {
		rows, _, err := h.Datasets.List(ctx(c), caller.OrgID, datasets.ListFilter{}, nil, 200)
		if err != nil {
			return err
		}
		for _, d := range rows {
			v.Datasets = append(v.Datasets, views.Option{Value: d.TrainingDataset.ID.String(), Label: d.TrainingDataset.Name})
		}
		adj, err := h.Review.Adjudicators(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		named := map[uuid.UUID]bool{}
		for _, a := range adj {
			named[a.UserID] = true
			v.Adjudicators = append(v.Adjudicators, views.ReviewAdjudicatorRow{UserID: a.UserID.String(), Email: a.Email, AddedBy: a.AddedBy})
		}
		users, err := h.Accounts.ListUsers(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		for _, u := range users {
			if u.Active && u.Role == db.UserRoleCurator && !named[u.ID] {
				v.Candidates = append(v.Candidates, views.Option{Value: u.ID.String(), Label: u.Email})
			}
		}
	}
	return render(c, status, views.ReviewHomePage(h.page(c, "Overlapping review", "queue"), v))
}

func planRow(pp review.PlanProgress) views.ReviewPlanRow {
	p, pr := pp.Plan, pp.Progress
	row := views.ReviewPlanRow{ID: p.ID.String(), Name: p.Name, Filter: "Show them in the queue", QueueURL: feedbackQueueURL(nil),
		AgreementURL: "/review/agreement" + withPrefix("?", p.Filter), Overlap: int(p.Overlap), Active: p.Active,
		Rules: rulesText(review.PlanRules(p)), Created: views.When(p.CreatedAt), CreatedBy: p.CreatedByLabel,
		Total: pr.Total, Agreed: pr.Agreed, Disputed: pr.Disputed, Adjudicated: pr.Adjudicated}
	if p.Filter != "" {
		row.QueueURL = "/feedback?" + p.Filter
	}
	for n, items := range pr.Reviews {
		row.Reviews = append(row.Reviews, views.ReviewCount{Reviews: n, Items: items})
	}
	return row
}

// rulesText says in words when a plan's reviewers disagree.
func rulesText(r review.Rules) string {
	parts := []string{"statuses differ", fmt.Sprintf("ratings more than %d apart", r.RatingTolerance),
		fmt.Sprintf("a dimension's scores more than %d apart", r.DimensionTolerance)}
	if r.TagsMustMatch {
		parts = append(parts, "tags differ")
	}
	return strings.Join(parts, ", ")
}

// ReviewPlanCreate asks for overlap on a tag, a dataset or a queue filter.
func (h *Handlers) ReviewPlanCreate(c echo.Context) error {
	form := views.ReviewPlanForm{Scope: c.FormValue("scope"), Tag: c.FormValue("tag"), DatasetID: c.FormValue("dataset_id"),
		Filter: c.FormValue("filter"), Name: c.FormValue("name"), Overlap: c.FormValue("overlap"),
		RatingTolerance: c.FormValue("rating_tolerance"), DimensionTolerance: c.FormValue("dimension_tolerance"),
		TagsMustMatch: c.FormValue("tags_must_match") == "1"}
	in, err := planFromForm(form)
	if err == nil {
		var p db.ReviewPlan
		if p, err = h.Review.CreatePlan(ctx(c), actor(c), CallerOf(c).OrgID, in); err == nil {
			h.Sessions.Flash(c, "ok", fmt.Sprintf("%s now asks for %d reviews per item.", p.Name, p.Overlap))
			return redirect(c, "/review")
		}
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderReviewHome(c, http.StatusUnprocessableEntity, views.ReviewHomeView{Form: form, Errors: invalid.ByField()})
	}
	return err
}

// planFromForm reads the plan form: the scope chosen decides which of tag,
// dataset and filter is read.
func planFromForm(form views.ReviewPlanForm) (review.NewPlan, error) {
	v := &errs.Invalid{}
	in := review.NewPlan{Name: form.Name, Rules: review.DefaultRules}
	in.Rules.TagsMustMatch = form.TagsMustMatch
	switch form.Scope {
	case "tag":
		tags, msg := feedback.NormalizeTags([]string{form.Tag})
		if msg != "" {
			v.Add("tag", "write the tag whose items need several reviews")
		} else {
			in.Filter.Tag = tags[0]
		}
	case "dataset":
		id, err := uuid.Parse(form.DatasetID)
		if err != nil {
			v.Add("dataset_id", "choose a dataset")
		}
		in.Filter.DatasetID = id
	case "filter":
		f, err := parseFilterText(form.Filter)
		if err != nil {
			v.Add("filter", "is not a queue filter: %s", filterProblem(err))
		}
		in.Filter = f
	default:
		v.Add("scope", "choose items with a tag, a dataset's members or a queue filter")
	}
	whole := func(field, s string, into *int) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			v.Add(field, "must be a whole number")
			return
		}
		*into = n
	}
	whole("overlap", form.Overlap, &in.Overlap)
	whole("rating_tolerance", form.RatingTolerance, &in.Rules.RatingTolerance)
	whole("dimension_tolerance", form.DimensionTolerance, &in.Rules.DimensionTolerance)
	return in, v.Err()
}

// parseFilterText reads a queue filter typed as query parameters, or as a
// queue address copied whole.
func parseFilterText(s string) (feedback.Filter, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[i+1:]
	}
	q, err := url.ParseQuery(s)
	if err != nil {
		return feedback.Filter{}, errs.InvalidField("filter", "cannot be read as query parameters")
	}
	for k := range q {
		if !containsString(feedback.FilterParams, k) {
			return feedback.Filter{}, errs.InvalidField(k, "is not a filter of the queue")
		}
	}
	return feedback.ParseFilter(q)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ReviewPlanEnd stops a plan handing out items.
func (h *Handlers) ReviewPlanEnd(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	p, err := h.Review.EndPlan(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", p.Name+" has ended: its items keep their reviews.")
	return redirect(c, "/review")
}

// ReviewNext opens the next item of a plan for the curator, its review
// taken for them, within the plan's filter so the item page steps through
// the plan.
func (h *Handlers) ReviewNext(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	next, err := h.Review.Next(ctx(c), actor(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	if next == uuid.Nil {
		h.Sessions.Flash(c, "ok", "Nothing is left for you in this plan: you have reviewed every item that still needs a review.")
		return redirect(c, "/review")
	}
	p, err := h.Review.Plan(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	return redirect(c, feedbackItemURL(next.String(), p.Filter))
}

// ReviewAdjudicatorAdd names an adjudicator.
func (h *Handlers) ReviewAdjudicatorAdd(c echo.Context) error {
	id, err := uuid.Parse(c.FormValue("user_id"))
	if err == nil {
		err = h.Review.AddAdjudicator(ctx(c), actor(c), CallerOf(c).OrgID, id)
	} else {
		err = errs.InvalidField("user_id", "choose a curator")
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderReviewHome(c, http.StatusUnprocessableEntity, views.ReviewHomeView{Errors: invalid.ByField(),
			Form: views.ReviewPlanForm{Scope: "tag", Overlap: "2", RatingTolerance: "1", DimensionTolerance: "1"}})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Named an adjudicator.")
	return redirect(c, "/review")
}

// ReviewAdjudicatorRemove takes a user off the adjudicators.
func (h *Handlers) ReviewAdjudicatorRemove(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Review.RemoveAdjudicator(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Removed the adjudicator.")
	return redirect(c, "/review")
}

// disputePage is how many disputed items one page of the tab shows.
const disputePage = 20

// Adjudication is the tab of disputed items, or of decided ones with
// ?decided=1.
func (h *Handlers) Adjudication(c echo.Context) error {
	return h.renderAdjudication(c, http.StatusOK, views.AdjudicationView{})
}

func (h *Handlers) renderAdjudication(c echo.Context, status int, v views.AdjudicationView) error {
	caller := CallerOf(c)
	q := c.QueryParams()
	v.Decided = q.Get("decided") == "1"
	cursor, err := keyset.Parse(review.ListName, q.Get("cursor"))
	if err != nil {
		return err
	}
	rows, next, err := h.Review.Disputes(ctx(c), caller.OrgID, v.Decided, cursor, disputePage)
	if err != nil {
		return err
	}
	if v.Disputed, err = h.Review.Disputed(ctx(c), caller.OrgID); err != nil {
		return err
	}
	if v.CanDecide, err = h.Review.CanAdjudicate(ctx(c), caller.OrgID, judgeOf(caller)); err != nil {
		return err
	}
	v.Statuses = review.Statuses
	for _, d := range rows {
		row := views.DisputeRow{FeedbackID: d.FeedbackID.String(), URL: feedbackItemURL(d.FeedbackID.String(), ""), Plan: d.PlanName,
			Query: d.Query, Response: d.Response, Disagreements: d.Disagreements, Status: d.Status, DecidedBy: d.DecidedBy,
			Note: d.DecisionNote, DecidedAt: views.WhenPtr(d.DecidedAt)}
		for _, r := range d.Reviews {
			row.Reviews = append(row.Reviews, reviewCard(r))
		}
		for _, dq := range d.Questions {
			qr := views.DisputedQuestionRow{Field: "answer." + dq.RubricID.String() + "." + dq.Question.Key, ErrorKey: "answers." + dq.Question.Key,
				Title: dq.Question.Title, Rubric: dq.Rubric}
			for _, a := range dq.Answers {
				qr.Answers = append(qr.Answers, views.DisputedAnswer{Reviewer: a.Reviewer, Text: answerText(dq.Question, a.Value),
					Value: string(a.Value), Adjudicated: a.Adjudicated})
			}
			row.Questions = append(row.Questions, qr)
		}
		v.Rows = append(v.Rows, row)
	}
	if next != nil {
		nq := url.Values{"cursor": {next.Encode(review.ListName)}}
		if v.Decided {
			nq.Set("decided", "1")
		}
		v.NextURL = "/review/adjudication?" + nq.Encode()
	}
	return render(c, status, views.AdjudicationPage(h.page(c, "Adjudication", "queue"), v))
}

func judgeOf(caller *Caller) review.Judge {
	j := review.Judge{Admin: caller.Role.AtLeast(auth.Admin)}
	if caller.Kind == "session" {
		j.UserID = caller.UserID
	}
	return j
}

// reviewCard shows one reviewer's label.
func reviewCard(r review.Review) views.ReviewCard {
	c := views.ReviewCard{Reviewer: r.Reviewer, Status: r.Status, Tags: r.Tags, Correction: r.Correction, Note: r.Note,
		Submitted: views.WhenPtr(r.Submitted)}
	if r.Rating != nil {
		c.Rating = strconv.Itoa(*r.Rating)
	}
	for i, d := range r.Dimensions {
		if d != nil {
			c.Dims = append(c.Dims, views.ItemDim{Name: review.Dimensions[i], Value: strconv.Itoa(*d) + "/5"})
		}
	}
	return c
}

// AdjudicationDecide records an adjudicator's decision on a disputed item.
func (h *Handlers) AdjudicationDecide(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	d := review.Decision{Status: c.FormValue("status"), Correction: c.FormValue("correction"), Note: c.FormValue("note")}
	// A disputed rubric question's decision: answer.<rubric id>.<key>,
	// one of the answers given, as the JSON it was given in.
	form, err := c.FormParams()
	if err != nil {
		return errs.InvalidField("status", "the form could not be read")
	}
	for name, vals := range form {
		rest, ok := strings.CutPrefix(name, "answer.")
		if !ok || len(vals) == 0 {
			continue
		}
		rid, key, ok := strings.Cut(rest, ".")
		rubricID, perr := uuid.Parse(rid)
		if !ok || perr != nil || !json.Valid([]byte(vals[0])) {
			return errs.InvalidField(name, "is not an answer to a rubric's question")
		}
		if d.Answers == nil {
			d.Answers = map[uuid.UUID]map[string]json.RawMessage{}
		}
		if d.Answers[rubricID] == nil {
			d.Answers[rubricID] = map[string]json.RawMessage{}
		}
		d.Answers[rubricID][key] = json.RawMessage(vals[0])
	}
	err = h.Review.Decide(ctx(c), actor(c), judgeOf(caller), caller.OrgID, id, d)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderAdjudication(c, http.StatusUnprocessableEntity, views.AdjudicationView{Errors: invalid.ByField(),
			TypedID: id.String(), TypedStatus: d.Status, TypedCorrection: d.Correction, TypedNote: d.Note})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Decided: the item is "+strings.ToLower(views.Label(d.Status))+".")
	return redirect(c, "/review/adjudication")
}

// itemReview fills the item page's review panel: nil when no plan covers
// the item.
func (h *Handlers) itemReview(c echo.Context, id uuid.UUID, typed *views.ReviewLabelForm, problems map[string]string) (*views.ItemReviewView, error) {
	caller := CallerOf(c)
	viewer := uuid.Nil
	if caller.Kind == "session" && caller.Role.AtLeast(auth.Curator) {
		viewer = caller.UserID
	}
	it, err := h.Review.ForItem(ctx(c), caller.OrgID, id, viewer)
	if err != nil || it == nil {
		return nil, err
	}
	v := &views.ItemReviewView{PlanName: it.PlanName, PlanID: it.PlanID.String(), PlanActive: it.PlanActive, State: it.State,
		Overlap: it.Overlap, Submitted: it.Submitted, Blind: it.Blind(), Hidden: it.Hidden, CanReview: it.CanReview,
		Holds: it.Mine != nil && it.Mine.Submitted == nil, Disagreements: it.Disagreements, DecidedBy: it.DecidedBy,
		Decision: it.DecisionNote, DecidedAt: views.WhenPtr(it.DecidedAt),
		Locked: (it.State == "open" && it.PlanActive) || it.State == "disputed", Errors: problems}
	for _, r := range it.Reviews {
		v.Reviews = append(v.Reviews, reviewCard(r))
	}
	if it.State == "disputed" {
		if v.CanDecide, err = h.Review.CanAdjudicate(ctx(c), caller.OrgID, judgeOf(caller)); err != nil {
			return nil, err
		}
	}
	if typed != nil {
		v.Form = *typed
	}
	return v, nil
}

// reviewForm reads the review form as typed, and as the service takes it.
func reviewForm(c echo.Context) (views.ReviewLabelForm, review.Input, error) {
	form := views.ReviewLabelForm{Status: c.FormValue("status"), Rating: c.FormValue("rating"), Tags: c.FormValue("tags"),
		Correction: c.FormValue("correction"), Note: strings.TrimSpace(c.FormValue("note")), Dims: map[string]string{}}
	in := review.Input{Status: form.Status, Correction: form.Correction, Note: form.Note, Tags: []string{}}
	v := &errs.Invalid{}
	score := func(field, s string) *int {
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			v.Add(field, "must be 1 to 5")
			return nil
		}
		return &n
	}
	in.Rating = score("rating", form.Rating)
	dims := []**int{&in.Dimensions.Accuracy, &in.Dimensions.Helpfulness, &in.Dimensions.Clarity, &in.Dimensions.Safety}
	for i, d := range review.Dimensions {
		form.Dims[d] = c.FormValue("dim_" + d)
		*dims[i] = score("dimensions."+d, form.Dims[d])
	}
	for _, t := range strings.Split(form.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			in.Tags = append(in.Tags, t)
		}
	}
	return form, in, v.Err()
}

// FeedbackReviewSubmit records the curator's own label of an item under
// overlapping review and shows the item again, now with every review in.
func (h *Handlers) FeedbackReviewSubmit(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	form, in, err := reviewForm(c)
	var out review.Outcome
	if err == nil {
		out, err = h.Review.Submit(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderItem(c, http.StatusUnprocessableEntity, id, feedbackItemState{review: &form, errors: invalid.ByField()})
	}
	if err != nil {
		return err
	}
	_, queueQuery, err := itemQueue(c)
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", outcomeText(out))
	return redirect(c, feedbackItemURL(id.String(), queueQuery))
}

// outcomeText says where an item stands after a review.
func outcomeText(o review.Outcome) string {
	switch o.State {
	case "agreed":
		return "Review submitted. The reviewers agree: the item is " + strings.ToLower(views.Label(o.Status)) + "."
	case "disputed":
		return "Review submitted. The reviewers disagree; the item goes to adjudication."
	}
	return fmt.Sprintf("Review submitted: %d of %d reviews are in.", o.Submitted, o.Overlap)
}

// FeedbackReviewRelease gives back a review the curator took.
func (h *Handlers) FeedbackReviewRelease(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Review.Release(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	_, queueQuery, err := itemQueue(c)
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "You gave the review back: someone else can take it.")
	return redirect(c, feedbackItemURL(id.String(), queueQuery))
}
