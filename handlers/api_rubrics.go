package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/rubrics"
)

// Review rubrics' JSON API: define and edit rubrics (each edit a new
// version), list and read them, and answer one for an item.

// rubricBody is POST /api/rubrics and PATCH /api/rubrics/:id.
type rubricBody struct {
	Name       string             `json:"name"`
	Guidelines string             `json:"guidelines"`
	Questions  []rubrics.Question `json:"questions"`
	AppliesTo  *rubrics.AppliesTo `json:"applies_to"`
}

func (b rubricBody) input() rubrics.Input {
	in := rubrics.Input{Name: b.Name, Guidelines: b.Guidelines, Questions: b.Questions}
	if b.AppliesTo != nil {
		in.AppliesTo = *b.AppliesTo
	}
	return in
}

// APIRubricCreate defines a rubric: 201 with it, at version 1.
func (h *Handlers) APIRubricCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body rubricBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	r, err := h.Rubrics.Create(ctx(c), actor(c), CallerOf(c).OrgID, body.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

// APIRubricUpdate edits a rubric: 200 with its new version.
func (h *Handlers) APIRubricUpdate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body rubricBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	r, err := h.Rubrics.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, body.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APIRubricList lists the organisation's rubrics at their current
// versions ({"data": [...]}; rubrics are few, so one page).
func (h *Handlers) APIRubricList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	rs, err := h.Rubrics.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[rubrics.Rubric]{Data: rs})
}

// APIRubricGet is one rubric at its current version, or ?version=N.
func (h *Handlers) APIRubricGet(c echo.Context) error {
	q, err := queryParams(c, "version")
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var r rubrics.Rubric
	if q.Has("version") {
		n, ok := positiveInt(q.Get("version"))
		if !ok {
			return errs.InvalidField("version", "must be a version number, 1 or more")
		}
		r, err = h.Rubrics.GetVersion(ctx(c), CallerOf(c).OrgID, id, n)
	} else {
		r, err = h.Rubrics.Get(ctx(c), CallerOf(c).OrgID, id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// answersBody is POST /api/feedback/:id/answers.
type answersBody struct {
	RubricID string                     `json:"rubric_id"`
	Answers  map[string]json.RawMessage `json:"answers"`
}

// APIFeedbackAnswersCreate records the caller's answers to a rubric for an
// item: 201 with them as stored, or 422 naming each refused answer
// (answers.<key>), nothing stored.
func (h *Handlers) APIFeedbackAnswersCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body answersBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	rubricID, err := uuid.Parse(body.RubricID)
	if err != nil {
		return errs.InvalidField("rubric_id", "must be a rubric's id")
	}
	a, err := h.Rubrics.Answer(ctx(c), actor(c), CallerOf(c).OrgID, id, rubricID, body.Answers)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, a)
}

// APIFeedbackAnswerList is the answers given for an item: the caller's
// own, and the others' once the item's overlapping review lets the caller
// see them (as its reviews are shown).
func (h *Handlers) APIFeedbackAnswerList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	all, _, err := h.visibleAnswers(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[rubrics.Answer]{Data: all})
}

// visibleAnswers is an item's answers the caller may read: all of them,
// unless the item's overlapping review is still blind to the caller, who
// then reads only their own. final: the caller's review of the item is
// submitted, and their answers with it.
func (h *Handlers) visibleAnswers(c echo.Context, id uuid.UUID) (answers []rubrics.Answer, final bool, err error) {
	caller := CallerOf(c)
	all, err := h.Rubrics.ForItem(ctx(c), caller.OrgID, id)
	if err != nil {
		return nil, false, err
	}
	viewer := uuid.Nil
	if caller.Kind == "session" {
		viewer = caller.UserID
	}
	it, err := h.Review.ForItem(ctx(c), caller.OrgID, id, viewer)
	if err != nil {
		return nil, false, err
	}
	if it == nil {
		return all, false, nil
	}
	final = it.Mine != nil && it.Mine.Submitted != nil
	if !it.Blind() {
		return all, final, nil
	}
	mine, _ := rubrics.ReviewerKey(actor(c))
	out := []rubrics.Answer{}
	for _, a := range all {
		if a.ReviewerKey == mine {
			out = append(out, a)
		}
	}
	return out, final, nil
}

// positiveInt reads a whole number of 1 or more.
func positiveInt(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1
}

// APIRubricExport is a rubric's answers with their items as JSON Lines
// (one line per item and reviewer, the adjudicator's marked), leaving out
// items whose overlapping review is still open.
func (h *Handlers) APIRubricExport(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "application/x-ndjson; charset=utf-8")
	res.Header().Set(echo.HeaderContentDisposition, `attachment; filename="rubric-`+id.String()+`-answers.jsonl"`)
	if _, err := h.Rubrics.Export(ctx(c), CallerOf(c).OrgID, id, res); err != nil {
		if !res.Committed {
			res.Header().Del(echo.HeaderContentDisposition)
			res.Header().Del(echo.HeaderContentType)
			return err
		}
		h.Log.Warn("rubric export ended early", "rubric", id, "error", err)
	}
	if !res.Committed {
		res.WriteHeader(http.StatusOK)
	}
	return nil
}

// bulkAnswersBody is POST /api/rubrics/:id/answers.
type bulkAnswersBody struct {
	FeedbackIDs []uuid.UUID                `json:"feedback_ids"`
	Answers     map[string]json.RawMessage `json:"answers"`
}

// APIRubricAnswersBulk gives the same answers to the rubric for every item
// of a selection, all or none: 201 with how many items were answered.
func (h *Handlers) APIRubricAnswersBulk(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body bulkAnswersBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	n, err := h.Rubrics.AnswerMany(ctx(c), actor(c), CallerOf(c).OrgID, id, body.FeedbackIDs, body.Answers)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, struct {
		RubricID uuid.UUID `json:"rubric_id"`
		Answered int       `json:"answered"`
	}{id, n})
}

type rubricJudgeBody struct {
	Endpoint    string      `json:"endpoint"`
	FeedbackIDs []uuid.UUID `json:"feedback_ids"`
}

// APIRubricJudge asks a judge endpoint the rubric's label and rating
// questions about the items; its answers are stored as a rater's.
func (h *Handlers) APIRubricJudge(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body rubricJudgeBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	out, err := h.Rubrics.AskJudge(ctx(c), actor(c), CallerOf(c).OrgID, id, body.Endpoint, body.FeedbackIDs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
