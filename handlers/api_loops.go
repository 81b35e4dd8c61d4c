package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/loops"
)

// APILoopCreate stores a loop policy (POST /api/loops): 201 with it,
// active; 422 naming each bad field as the request named it.
func (h *Handlers) APILoopCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var sp loops.Spec
	if err := decodeJSON(c, &sp, ""); err != nil {
		return err
	}
	l, err := h.Loops.Create(ctx(c), actor(c), CallerOf(c).OrgID, sp)
	if err != nil {
		return err
	}
	setETag(c, l.Version)
	return c.JSON(http.StatusCreated, l)
}

// APILoopList lists the organisation's loops by name.
func (h *Handlers) APILoopList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.Loops.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[loops.Loop]{Data: list})
}

// APILoopGet reads one loop.
func (h *Handlers) APILoopGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	l, err := h.Loops.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	setETag(c, l.Version)
	return c.JSON(http.StatusOK, l)
}

// APILoopPatch pauses a loop or makes it active again ({"status": ...}).
func (h *Handlers) APILoopPatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body struct {
		Status string `json:"status"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	l, err := h.Loops.SetStatus(ctx(c), actor(c), CallerOf(c).OrgID, id, body.Status)
	if err != nil {
		return err
	}
	setETag(c, l.Version)
	return c.JSON(http.StatusOK, l)
}

// APILoopRun starts a run of a loop now, trigger or not: 202 with it.
func (h *Handlers) APILoopRun(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Loops.StartNow(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, r)
}

// APILoopRuns lists a loop's runs, newest first, with ?limit= and
// ?cursor=.
func (h *Handlers) APILoopRuns(c echo.Context) error {
	q, err := queryParams(c, pageParams...)
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(loops.RunListName))
	if err != nil {
		return err
	}
	runs, next, err := h.Loops.Runs(ctx(c), CallerOf(c).OrgID, id, cursor, limit)
	if err != nil {
		return err
	}
	return listJSON(c, loops.RunListName, runs, next)
}

// APILoopRunGet reads one run with its steps.
func (h *Handlers) APILoopRunGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Loops.GetRun(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APILoopRunApprove lets a run waiting for approval go on.
func (h *Handlers) APILoopRunApprove(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Loops.Approve(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APILoopRunStop stops a run that has not ended.
func (h *Handlers) APILoopRunStop(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Loops.Stop(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APIFeedbackTrainingData records whether an item may be training data
// ({"is_training_data": true|false}), or withdraws a person's decision so
// that hygiene's flags decide again ({"is_training_data": null}).
func (h *Handlers) APIFeedbackTrainingData(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body struct {
		IsTrainingData json.RawMessage `json:"is_training_data"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	var use *bool
	switch string(body.IsTrainingData) {
	case "true", "false":
		b := string(body.IsTrainingData) == "true"
		use = &b
	case "null":
	default:
		return errs.InvalidField("is_training_data", "must be true, false or null (let hygiene's flags decide)")
	}
	st, err := h.Hygiene.Decide(ctx(c), actor(c), CallerOf(c).OrgID, id, use)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}
