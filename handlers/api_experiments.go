package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
)

// abTestBody is what POST /api/models/ab-test takes: Curate's fields and
// the seed's words for three of them, converted here to Curate's.
type abTestBody struct {
	experiments.NewExperiment
	// success_metrics is metrics: a metric's name or a list of them.
	SuccessMetrics json.RawMessage `json:"success_metrics"`
	// start_date and end_date are starts_at and ends_at.
	StartDate *time.Time `json:"start_date"`
	EndDate   *time.Time `json:"end_date"`
}

// toNew converts the seed's words to Curate's, refusing a field sent under
// both names.
func (b abTestBody) toNew() (experiments.NewExperiment, error) {
	in, bad := b.NewExperiment, &errs.Invalid{}
	alias := func(seed, own string, sent, ownSent bool) bool {
		if sent && ownSent {
			bad.Add(seed, "is the seed's name for %s: send one of them", own)
			return false
		}
		return sent
	}
	if alias("success_metrics", "metrics", len(b.SuccessMetrics) > 0 && string(b.SuccessMetrics) != "null", in.Metrics != nil) {
		var one string
		if err := json.Unmarshal(b.SuccessMetrics, &in.Metrics); err != nil {
			if err := json.Unmarshal(b.SuccessMetrics, &one); err != nil {
				bad.Add("success_metrics", "must be a metric's name or a list of names (%s)", strings.Join(experiments.Metrics, ", "))
			} else {
				in.Metrics = []string{one}
			}
		}
	}
	if alias("start_date", "starts_at", b.StartDate != nil, in.StartsAt != nil) {
		in.StartsAt = b.StartDate
	}
	if alias("end_date", "ends_at", b.EndDate != nil, in.EndsAt != nil) {
		in.EndsAt = b.EndDate
	}
	return in, bad.Err()
}

// abTestFields names a refusal's fields as the request did.
func abTestFields(b abTestBody) func(string) string {
	return func(f string) string {
		switch {
		case b.SuccessMetrics != nil && (f == "metrics" || strings.HasPrefix(f, "metrics[")):
			return "success_metrics" + strings.TrimPrefix(f, "metrics")
		case b.StartDate != nil && f == "starts_at":
			return "start_date"
		case b.EndDate != nil && f == "ends_at":
			return "end_date"
		}
		return f
	}
}

// APIExperimentCreate creates a draft experiment (POST /api/models/ab-test,
// the design's path): 201 with it, in Curate's names. The seed's
// success_metrics, start_date and end_date are taken for metrics,
// starts_at and ends_at, and without a key one is derived from the name.
func (h *Handlers) APIExperimentCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body abTestBody
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	in, err := body.toNew()
	if err != nil {
		return err
	}
	e, err := h.Experiments.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return renameFields(err, abTestFields(body))
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

// APIExperimentConfig answers what a client needs to assign units
// itself (seed, phase, coverage, weights, and what to call for each arm),
// with the count of changes made to it as its ETag: 304 when the caller's
// copy, named in If-None-Match, is current.
func (h *Handlers) APIExperimentConfig(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	cfg, err := h.Experiments.Config(ctx(c), CallerOf(c).OrgID, c.Param("key"))
	if err != nil {
		return err
	}
	etag := `"` + strconv.FormatInt(cfg.ConfigVersion, 10) + `"`
	header := c.Response().Header()
	header.Set("ETag", etag)
	header.Set("Cache-Control", "private, no-cache")
	if etagListed(c.Request().Header.Get("If-None-Match"), etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSON(http.StatusOK, cfg)
}

// APIExperimentExposures records the exposures of units a client assigned
// itself: {"exposures": [{"unit_id", "arm_index", "at"}, ...]}.
func (h *Handlers) APIExperimentExposures(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Exposures []experiments.Exposure `json:"exposures"`
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	r, err := h.Experiments.RecordExposures(ctx(c), CallerOf(c).OrgID, c.Param("key"), in.Exposures)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APIExperimentResults analyses an experiment.
func (h *Handlers) APIExperimentResults(c echo.Context) error {
	q, err := queryParams(c, "segment")
	if err != nil {
		return err
	}
	r, err := h.Experiments.Results(ctx(c), CallerOf(c).OrgID, c.Param("key"))
	if err != nil {
		return err
	}
	if d := q.Get("segment"); d != "" {
		seg, err := h.Experiments.ResultsBySegment(ctx(c), CallerOf(c).OrgID, c.Param("key"), d, r)
		if err != nil {
			return err
		}
		r.Segments = &seg
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

// APIExperimentAnalysis changes how an experiment is analysed: its
// engine, CUPED's pre-exposure days, the corrections and the criteria.
func (h *Handlers) APIExperimentAnalysis(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in experiments.Analysis
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	e, err := h.Experiments.SetAnalysis(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// experimentSettings is the organisation's experiment settings as the API
// shows them.
type experimentSettings struct {
	DefaultEngine string `json:"default_engine"`
}

// APIExperimentSettings reads the organisation's default engine.
func (h *Handlers) APIExperimentSettings(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	engine, err := h.Experiments.DefaultEngine(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, experimentSettings{DefaultEngine: engine})
}

// APIExperimentSettingsSave changes the organisation's default engine.
func (h *Handlers) APIExperimentSettingsSave(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in experimentSettings
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	if err := h.Experiments.SetDefaultEngine(ctx(c), actor(c), CallerOf(c).OrgID, in.DefaultEngine); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}
