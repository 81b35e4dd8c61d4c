package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/experiments"
)

// APIExperimentCreate creates a draft experiment (POST /api/models/ab-test,
// the design's path): 201 with it.
func (h *Handlers) APIExperimentCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in experiments.NewExperiment
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	e, err := h.Experiments.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

// APIExperimentList lists the organisation's experiments.
func (h *Handlers) APIExperimentList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.Experiments.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[experiments.Experiment]{Data: list})
}

// APIExperimentGet reads one experiment by key.
func (h *Handlers) APIExperimentGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	e, err := h.Experiments.Get(ctx(c), CallerOf(c).OrgID, c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// apiExperimentMove is start, pause, end (with the winner) or cancel.
func (h *Handlers) apiExperimentMove(c echo.Context, status string) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Winner string `json:"winner"`
		Reason string `json:"reason"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeJSON(c, &in, ""); err != nil {
			return err
		}
	}
	if status == experiments.Completed && in.Winner == "" {
		in.Winner = "inconclusive"
	}
	e, err := h.Experiments.SetStatus(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), status, in.Winner, in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// APIExperimentStart starts a draft or paused experiment.
func (h *Handlers) APIExperimentStart(c echo.Context) error {
	return h.apiExperimentMove(c, experiments.Running)
}

// APIExperimentPause pauses a running experiment.
func (h *Handlers) APIExperimentPause(c echo.Context) error {
	return h.apiExperimentMove(c, experiments.Paused)
}

// APIExperimentEnd ends an experiment with its winner.
func (h *Handlers) APIExperimentEnd(c echo.Context) error {
	return h.apiExperimentMove(c, experiments.Completed)
}

// APIExperimentExtend moves the planned end: {"until": time}.
func (h *Handlers) APIExperimentExtend(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Until time.Time `json:"until"`
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	e, err := h.Experiments.Extend(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), in.Until)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// APIExperimentPatch changes the weights or coverage, or re-randomises.
func (h *Handlers) APIExperimentPatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in experiments.Traffic
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	e, err := h.Experiments.SetTraffic(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// APIExperimentAssign gives one unit its arm and what to call.
func (h *Handlers) APIExperimentAssign(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		UnitID string `json:"unit_id"`
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	out, err := h.Experiments.Assign(ctx(c), CallerOf(c).OrgID, c.Param("key"), []string{in.UnitID})
	if err != nil {
		return err
	}
	a := out[0]
	a.UnitID = ""
	return c.JSON(http.StatusOK, a)
}

// APIExperimentAssignBatch assigns many units at once.
func (h *Handlers) APIExperimentAssignBatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		UnitIDs []string `json:"unit_ids"`
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	out, err := h.Experiments.Assign(ctx(c), CallerOf(c).OrgID, c.Param("key"), in.UnitIDs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[experiments.Assignment]{Data: out})
}

// APIExperimentResults analyses an experiment.
func (h *Handlers) APIExperimentResults(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	r, err := h.Experiments.Results(ctx(c), CallerOf(c).OrgID, c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APIExperimentDeploy sends all traffic to the treatment through the
// registry's deploy (and the evaluation gate): 202 with the deployment.
func (h *Handlers) APIExperimentDeploy(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeJSON(c, &in, ""); err != nil {
			return err
		}
	}
	d, err := h.Experiments.FullDeploy(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}
