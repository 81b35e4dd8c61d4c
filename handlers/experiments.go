package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/views"
)

// ExperimentList is the page listing the A/B experiments.
func (h *Handlers) ExperimentList(c echo.Context) error {
	list, err := h.Experiments.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	var m views.ExperimentsView
	for _, e := range list {
		row := views.ExperimentRow{Key: e.Key, Name: e.Name, Status: e.Status, Traffic: percent(e.TrafficSplit), Started: "Not started"}
		var versions []string
		for _, a := range e.Arms {
			versions = append(versions, a.Version)
		}
		row.Arms = strings.Join(versions, " against ")
		if e.StartedAt != nil {
			row.Started = views.When(*e.StartedAt)
		}
		m.Rows = append(m.Rows, row)
	}
	return render(c, http.StatusOK, views.ExperimentsPage(h.page(c, "A/B experiments", "models"), m))
}

func percent(x float64) string { return strconv.FormatFloat(100*x, 'f', -1, 64) + "%" }

// ExperimentPanel is one experiment's A/B panel.
func (h *Handlers) ExperimentPanel(c echo.Context) error {
	return h.renderPanel(c, http.StatusOK, nil)
}

func (h *Handlers) renderPanel(c echo.Context, status int, problems map[string]string) error {
	caller := CallerOf(c)
	key := c.Param("key")
	e, err := h.Experiments.Get(ctx(c), caller.OrgID, key)
	if err != nil {
		return err
	}
	r, err := h.Experiments.Results(ctx(c), caller.OrgID, key)
	if err != nil {
		return err
	}
	m := views.PanelView{Key: e.Key, Name: e.Name, Status: e.Status, Traffic: percent(e.TrafficSplit), Coverage: percent(e.Coverage),
		Started: "Not started", StopReason: e.StopReason, Action: r.Recommendation.Action, Reason: r.Recommendation.Reason,
		Conflicts: e.Conflicts, CanAct: caller.Role.AtLeast(auth.Admin), Errors: problems, Phase: e.Phase,
		TreatmentPercent: strconv.FormatFloat(e.TrafficSplit*100, 'f', -1, 64)}
	if e.StartedAt != nil {
		m.Started = views.When(*e.StartedAt)
	}
	if e.EndsAt != nil {
		m.Ends = views.When(*e.EndsAt)
	}
	if ro := e.Rollout; ro != nil {
		steps := make([]string, len(ro.Steps))
		for i, s := range ro.Steps {
			steps[i] = percent(s)
			if i == e.RolloutStep {
				steps[i] = "[" + steps[i] + "]"
			}
		}
		m.Rollout = strings.Join(steps, " → ") + fmt.Sprintf(", each held %d minutes with %d units per arm", ro.HoldMins, ro.MinUnits)
	}
	switch {
	case r.SRMPValue == nil:
		m.SRM = "Not checked: the weights changed within this phase (a rollout or an admin), or no unit is assigned yet."
	default:
		m.SRMOK = *r.SRMPValue >= 0.001
		m.SRM = fmt.Sprintf("p = %.3g against the configured weights", *r.SRMPValue)
	}
	for i, a := range e.Arms {
		pa := views.PanelArm{Name: a.Name, Version: a.Version, VersionURL: "/models/versions/" + a.ModelVersionID.String(), Weight: percent(a.Weight)}
		if i < len(r.Units) {
			pa.Units = r.Units[i]
		}
		m.Arms = append(m.Arms, pa)
	}
	for _, mr := range r.Metrics {
		row := views.PanelMetric{Name: mr.Metric, Guardrail: mr.Guardrail, Control: "—", Treatment: "—", Change: "Not enough data", PValue: "—"}
		if len(mr.Arms) > 0 && mr.Arms[0].Mean != nil {
			row.Control = fmt.Sprintf("%.3f (n %d)", *mr.Arms[0].Mean, mr.Arms[0].N)
		}
		if len(mr.Arms) > 1 {
			t := mr.Arms[1]
			if t.Mean != nil {
				row.Treatment = fmt.Sprintf("%.3f (n %d)", *t.Mean, t.N)
			}
			if t.RelativeChange != nil {
				row.Change = fmt.Sprintf("%+.1f%% (%+.1f%% to %+.1f%%)", 100**t.RelativeChange, 100**t.CI[0], 100**t.CI[1])
				row.PValue = fmt.Sprintf("%.3g", *t.PValue)
				row.Significant = t.Significant
				row.Better = (*t.RelativeChange > 0) == experiments.HigherIsBetter(mr.Metric)
			}
		}
		m.Metrics = append(m.Metrics, row)
	}
	if len(r.Timeline) > 0 {
		var d struct {
			X    []int64   `json:"x"`
			Y    []float64 `json:"effect"`
			Low  []float64 `json:"low"`
			High []float64 `json:"high"`
		}
		for _, p := range r.Timeline {
			d.X, d.Y, d.Low, d.High = append(d.X, p.Day.Unix()), append(d.Y, p.Effect), append(d.Low, p.Low), append(d.High, p.High)
		}
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		m.EffectJSON, m.HasTimeline = string(b), true
	}
	return render(c, status, views.ExperimentPanel(h.page(c, e.Name, "models"), m))
}

// experimentMove starts, pauses or ends an experiment from its panel.
func (h *Handlers) experimentMove(c echo.Context, status, winner, done string) error {
	if _, err := h.Experiments.SetStatus(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), status, winner, ""); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", done)
	return redirect(c, "/experiments/"+c.Param("key"))
}

// ExperimentStart starts (or resumes) an experiment.
func (h *Handlers) ExperimentStart(c echo.Context) error {
	return h.experimentMove(c, experiments.Running, "", "The experiment is running: units are assigned.")
}

// ExperimentPause pauses an experiment.
func (h *Handlers) ExperimentPause(c echo.Context) error {
	return h.experimentMove(c, experiments.Paused, "", "The experiment is paused.")
}

// ExperimentEnd ends an experiment with its winner.
func (h *Handlers) ExperimentEnd(c echo.Context) error {
	return h.experimentMove(c, experiments.Completed, c.FormValue("winner"), "The experiment has ended.")
}

// ExperimentExtend moves the planned end to a day.
func (h *Handlers) ExperimentExtend(c echo.Context) error {
	until, err := time.Parse("2006-01-02", c.FormValue("until"))
	if err == nil {
		_, err = h.Experiments.Extend(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), until.Add(24*time.Hour-time.Second))
	} else {
		err = errs.InvalidField("until", "must be a date")
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderPanel(c, http.StatusUnprocessableEntity, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The experiment runs until "+c.FormValue("until")+".")
	return redirect(c, "/experiments/"+c.Param("key"))
}

// ExperimentTraffic changes a two-arm experiment's split from the panel,
// re-randomising when asked.
func (h *Handlers) ExperimentTraffic(c echo.Context) error {
	share, err := strconv.ParseFloat(c.FormValue("treatment_percent"), 64)
	if err == nil {
		_, err = h.Experiments.SetTraffic(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"),
			experiments.Traffic{Weights: []float64{1 - share/100, share / 100}, Reseed: c.FormValue("reseed") == "1"})
	} else {
		err = errs.InvalidField("weights", "the treatment's share must be a number of percent")
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderPanel(c, http.StatusUnprocessableEntity, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The traffic split is changed.")
	return redirect(c, "/experiments/"+c.Param("key"))
}

// ExperimentDeploy sends all traffic to the treatment through the
// registry's deploy, then shows the deployment on the version's page.
func (h *Handlers) ExperimentDeploy(c echo.Context) error {
	d, err := h.Experiments.FullDeploy(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), "")
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The treatment is being deployed to production.")
	return redirect(c, "/models/versions/"+d.VersionID.String())
}
