package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/livescore"
)

// APILiveScorerList lists the organisation's live scorers with what each
// scored and what it cost.
func (h *Handlers) APILiveScorerList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.LiveScore.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[livescore.Live]{Data: list})
}

// APILiveScorerSet makes or changes a live scorer: of an experiment's
// answers ({"experiment": key}) or of those a model's alias serves
// ({"model": name, "alias": "production"}), with the judge endpoint, its
// template, the sampling rate and whether it samples.
func (h *Handlers) APILiveScorerSet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Experiment string `json:"experiment"`
		Model      string `json:"model"`
		Alias      string `json:"alias"`
		livescore.Config
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	var out livescore.Live
	var err error
	switch {
	case in.Experiment != "" && in.Model == "" && in.Alias == "":
		out, err = h.LiveScore.SetForExperiment(ctx(c), actor(c), CallerOf(c).OrgID, in.Experiment, in.Config)
	case in.Experiment == "" && in.Model != "" && in.Alias != "":
		out, err = h.LiveScore.SetForAlias(ctx(c), actor(c), CallerOf(c).OrgID, in.Model, in.Alias, in.Config)
	default:
		err = errs.InvalidField("experiment", "name an experiment, or a model and its alias (such as production)")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// ExperimentLiveScorer sets the experiment's live judge from its panel: the
// endpoint, the template and the share of answers in percent. A refusal is
// shown beside the form.
func (h *Handlers) ExperimentLiveScorer(c echo.Context) error {
	v := &errs.Invalid{}
	cfg := livescore.Config{Scorer: c.FormValue("scorer"), Endpoint: c.FormValue("endpoint"), Template: c.FormValue("template")}
	enabled := c.FormValue("enabled") != "0"
	cfg.Enabled = &enabled
	if share, ok := percentInput(v, "rate", strings.TrimSpace(c.FormValue("rate_percent")), true, true); ok {
		cfg.Rate = share
	}
	err := v.Err()
	if err == nil {
		_, err = h.LiveScore.SetForExperiment(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), cfg)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderPanel(c, http.StatusUnprocessableEntity, map[string]string{"live": namedRefusal(invalid)}, nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The live judge is set: sampled answers are scored in the background.")
	return redirect(c, "/experiments/"+c.Param("key"))
}
