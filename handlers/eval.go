package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/leak"
	"github.com/curate/curate/views"
)

// Evaluations is the evaluation page: the golden sets.
func (h *Handlers) Evaluations(c echo.Context) error {
	return h.renderEvaluations(c, http.StatusOK, views.GoldenSetForm{SplitTags: "gold_set, red_team"}, nil, nil, nil)
}

// renderEvaluations shows the page with a golden-set form and, when typed
// and refused, the gate's form as typed (nil: the gate as stored).
func (h *Handlers) renderEvaluations(c echo.Context, status int, form views.GoldenSetForm, problems map[string]string, typed *views.GateForm, start *views.StartForm) error {
	caller := CallerOf(c)
	m := views.EvaluationsView{IsAdmin: caller.Role.AtLeast(auth.Admin), Form: form, Errors: problems}
	if err := h.evaluationRuns(c, &m, start); err != nil {
		return err
	}
	sets, err := h.Eval.GoldenSets(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, g := range sets {
		m.GoldenSets = append(m.GoldenSets, views.GoldenSetRow{VersionID: g.VersionID.String(), Name: g.Name,
			Dataset: g.DatasetName + " v" + strconv.Itoa(g.VersionNumber), DatasetURL: "/datasets/" + g.DatasetID.String(), Kind: g.Kind,
			SplitTags: strings.Join(g.SplitTags, ", "), CreatedBy: g.CreatedBy, CreatedAt: views.When(g.CreatedAt), Items: g.Items})
	}
	if m.IsAdmin {
		frozen, err := h.Eval.Frozen(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		for _, f := range frozen {
			m.Frozen = append(m.Frozen, views.Option{Value: f.ID.String(), Label: f.Label})
		}
	}
	gate, set, err := h.Eval.GetGate(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	m.GateSet = set
	switch {
	case typed != nil:
		m.Gate = *typed
	case set:
		m.Gate = views.GateForm{GoldenSetVersionID: gate.GoldenSetVersionID.String(), MaxMeanDrop: ftoa(gate.MaxMeanDrop),
			RegressionMargin: ftoa(gate.RegressionMargin), MaxRegressions: strconv.Itoa(gate.MaxRegressions),
			NoNewRedTeamFlags: gate.NoNewRedTeamFlags, UpdatedBy: gate.UpdatedBy, LeakCheck: gate.LeakCheck,
			LeakMinWords: strconv.Itoa(gate.LeakMinWords)}
	default:
		m.Gate = views.GateForm{MaxMeanDrop: "0.02", RegressionMargin: "0.1", MaxRegressions: "0", NoNewRedTeamFlags: true,
			LeakMinWords: strconv.Itoa(leak.DefaultMinWords)}
	}
	return render(c, status, views.EvaluationsPage(h.page(c, "Evaluation", "models"), m))
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// EvaluationGateSave sets the promotion gate.
func (h *Handlers) EvaluationGateSave(c echo.Context) error {
	form := views.GateForm{GoldenSetVersionID: c.FormValue("golden_set_version_id"), MaxMeanDrop: c.FormValue("max_mean_drop"),
		RegressionMargin: c.FormValue("regression_margin"), MaxRegressions: c.FormValue("max_regressions"),
		NoNewRedTeamFlags: c.FormValue("no_new_red_team_flags") != "", LeakCheck: c.FormValue("leak_check") != "",
		LeakMinWords: c.FormValue("leak_min_words")}
	bad := map[string]string{}
	g := eval.Gate{NoNewRedTeamFlags: form.NoNewRedTeamFlags, LeakCheck: form.LeakCheck}
	var err error
	if g.GoldenSetVersionID, err = uuid.Parse(form.GoldenSetVersionID); err != nil {
		bad["golden_set_version_id"] = "choose a golden set"
	}
	if g.MaxMeanDrop, err = strconv.ParseFloat(form.MaxMeanDrop, 64); err != nil {
		bad["max_mean_drop"] = "must be a number from 0 to 1"
	}
	if g.RegressionMargin, err = strconv.ParseFloat(form.RegressionMargin, 64); err != nil {
		bad["regression_margin"] = "must be a number from 0 to 1"
	}
	if g.MaxRegressions, err = strconv.Atoi(form.MaxRegressions); err != nil {
		bad["max_regressions"] = "must be a whole number"
	}
	if form.LeakMinWords != "" {
		if g.LeakMinWords, err = strconv.Atoi(form.LeakMinWords); err != nil {
			bad["leak_min_words"] = "must be a whole number from 8 to 1000"
		}
	}
	if len(bad) == 0 {
		err := h.Eval.SetGate(ctx(c), actor(c), CallerOf(c).OrgID, g)
		var invalid *errs.Invalid
		if errors.As(err, &invalid) {
			bad = invalid.ByField()
		} else if err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return h.renderEvaluations(c, http.StatusUnprocessableEntity, views.GoldenSetForm{}, bad, &form, nil)
	}
	h.Sessions.Flash(c, "ok", "The promotion gate is set.")
	return redirect(c, "/evaluations")
}

// EvaluationGateRemove removes the promotion gate.
func (h *Handlers) EvaluationGateRemove(c echo.Context) error {
	if err := h.Eval.RemoveGate(ctx(c), actor(c), CallerOf(c).OrgID); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The promotion gate is removed: production deployments need no evaluation.")
	return redirect(c, "/evaluations")
}

// GoldenSetMark makes a frozen version a golden set.
func (h *Handlers) GoldenSetMark(c echo.Context) error {
	form := views.GoldenSetForm{VersionID: c.FormValue("version_id"), Name: c.FormValue("name"), SplitTags: c.FormValue("split_tags")}
	var tags []string
	for _, t := range strings.Split(form.SplitTags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	id, err := uuid.Parse(form.VersionID)
	if err != nil {
		return h.renderEvaluations(c, http.StatusUnprocessableEntity, form, map[string]string{"version_id": "choose a frozen dataset version"}, nil, nil)
	}
	g, err := h.Eval.Mark(ctx(c), actor(c), CallerOf(c).OrgID, id, form.Name, tags)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		fields := map[string]string{}
		for f, msg := range invalid.ByField() {
			if strings.HasPrefix(f, "split_tags[") {
				f = "split_tags"
			}
			fields[f] = msg
		}
		return h.renderEvaluations(c, http.StatusUnprocessableEntity, form, fields, nil, nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", g.Name+" is a golden set: "+views.Count(g.Items, "item", "items")+".")
	return redirect(c, "/evaluations")
}

// GoldenSetUnmark stops using a version as a golden set.
func (h *Handlers) GoldenSetUnmark(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Eval.Unmark(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The version is no longer a golden set.")
	return redirect(c, "/evaluations")
}

// APIEvaluationStart starts an evaluation run: 202 with it.
func (h *Handlers) APIEvaluationStart(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var cfg eval.Config
	if err := decodeJSON(c, &cfg, ""); err != nil {
		return err
	}
	run, err := h.Eval.Start(ctx(c), actor(c), CallerOf(c).OrgID, cfg)
	if err != nil {
		return err
	}
	out, err := h.Eval.GetRun(ctx(c), CallerOf(c).OrgID, run.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

// APIEvaluationGet reads a run with its progress, summary and items.
func (h *Handlers) APIEvaluationGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	out, err := h.Eval.GetRun(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// APIGoldenSetCreate marks a frozen version a golden set, as the
// evaluations page's form does ({version_id, name, split_tags}): 201 with
// it. Marking a version that is one already renames it and changes its
// split tags.
func (h *Handlers) APIGoldenSetCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body struct {
		VersionID string   `json:"version_id"`
		Name      string   `json:"name"`
		SplitTags []string `json:"split_tags"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	id, err := uuid.Parse(body.VersionID)
	if err != nil {
		return errs.InvalidField("version_id", "must be the id of a frozen dataset version")
	}
	g, err := h.Eval.Mark(ctx(c), actor(c), CallerOf(c).OrgID, id, body.Name, body.SplitTags)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, g)
}

// APIGoldenSetList lists the organisation's golden sets, newest first, in
// one page: an organisation keeps a handful.
func (h *Handlers) APIGoldenSetList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	sets, err := h.Eval.GoldenSets(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[eval.GoldenSet]{Data: sets})
}

// APIGoldenSetDelete stops using a version as a golden set (the version
// itself stays): 204, or 404 when it is not one.
func (h *Handlers) APIGoldenSetDelete(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Eval.Unmark(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
