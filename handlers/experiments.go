package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/stats"
	"github.com/curate/curate/views"
)

// ExperimentList is the page listing the A/B experiments.
func (h *Handlers) ExperimentList(c echo.Context) error {
	caller := CallerOf(c)
	list, err := h.Experiments.List(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	engine, err := h.Experiments.DefaultEngine(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	m := views.ExperimentsView{CanCreate: caller.Role.AtLeast(auth.Admin), DefaultEngine: engine}
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

// ExperimentSettingsSave changes the organisation's default statistics
// engine from the experiments list.
func (h *Handlers) ExperimentSettingsSave(c echo.Context) error {
	engine := c.FormValue("default_engine")
	err := h.Experiments.SetDefaultEngine(ctx(c), actor(c), CallerOf(c).OrgID, engine)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		h.Sessions.Flash(c, "error", "The default engine "+invalid.ByField()["default_engine"]+".")
		return redirect(c, "/experiments")
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Experiments that name no engine are analysed with the "+views.Label(engine)+" engine.")
	return redirect(c, "/experiments")
}

func percent(x float64) string { return strconv.FormatFloat(100*x, 'f', -1, 64) + "%" }

// percentValue is a share as a form shows it: percent, without the sign.
func percentValue(x float64) string { return strconv.FormatFloat(100*x, 'f', -1, 64) }

// pPrecision is the smallest p-value the panel shows as a number; a smaller
// one reads "< 0.0001", never 0.
const pPrecision = 0.0001

// formatP shows a p-value to four decimals.
func formatP(p float64) string {
	if p < pPrecision {
		return "< 0.0001"
	}
	return strconv.FormatFloat(p, 'f', 4, 64)
}

// ExperimentPanel is one experiment's A/B panel.
func (h *Handlers) ExperimentPanel(c echo.Context) error {
	return h.renderPanel(c, http.StatusOK, nil, nil)
}

// panelForm is the split form as it was posted, kept on a refusal.
type panelForm struct {
	treatment, coverage string
	reseed              bool
}

func (h *Handlers) renderPanel(c echo.Context, status int, problems map[string]string, typed *panelForm) error {
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
		Started: "Not started", Action: r.Recommendation.Action, Reason: r.Recommendation.Reason,
		Conflicts: e.Conflicts, CanAct: caller.Role.AtLeast(auth.Admin), Errors: problems, Phase: e.Phase,
		TreatmentPercent: percentValue(e.TrafficSplit), CoveragePercent: percentValue(e.Coverage)}
	if typed != nil {
		m.TreatmentPercent, m.CoveragePercent, m.Reseed = typed.treatment, typed.coverage, typed.reseed
	}
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
		m.Rollout = strings.Join(steps, " → ") + fmt.Sprintf(", each held %s with %d units per arm", holdText(ro.HoldMins), ro.MinUnits)
	}
	verdict(&m, e, r)
	m.SRM, m.SRMChecked = srmText(e, r)
	if m.SRMChecked {
		m.SRMOK = *r.SRMPValue >= stats.SRMThreshold
	}
	var targets []string
	for i, a := range e.Arms {
		pa := views.PanelArm{Name: a.Name, Version: a.Version, VersionURL: "/models/versions/" + a.ModelVersionID.String(), Weight: percent(a.Weight)}
		if i < len(r.Units) {
			pa.Units = r.Units[i]
		}
		m.Arms = append(m.Arms, pa)
		m.TreatmentVersion = a.Version
		if a.DeploymentID != nil {
			d, err := h.Models.GetDeployment(ctx(c), caller.OrgID, *a.DeploymentID)
			if err != nil {
				return err
			}
			targets = append(targets, d.Target)
		}
	}
	if m.Health, err = h.targetHealth(c, targets); err != nil {
		return err
	}
	if err := h.panelSegments(c, &m, r); err != nil {
		return err
	}
	if len(e.Arms) == 2 {
		m.CompareURL = "/models/compare?a=" + e.Arms[0].ModelVersionID.String() + "&b=" + e.Arms[1].ModelVersionID.String()
	}
	analysisText(&m, e, r)
	if m.DefaultEngine, err = h.Experiments.DefaultEngine(ctx(c), caller.OrgID); err != nil {
		return err
	}
	m.AnalysisEngine, m.GoalCorrection, m.GuardrailCorrection = e.Analysis.Engine, e.Analysis.GoalCorrection, e.Analysis.GuardrailCorrection
	if d := e.Analysis.CUPEDDays; d != nil {
		m.CUPEDDays = strconv.Itoa(*d)
	}
	if err := h.liveJudge(c, &m); err != nil {
		return err
	}
	for _, mr := range r.Metrics {
		m.Metrics = append(m.Metrics, panelMetric(mr, m.Bayesian))
	}
	if err := effectChart(&m, r); err != nil {
		return err
	}
	m.Loop = h.loopOrigin(c, "experiment_key", e.Key)
	return render(c, status, views.ExperimentPanel(h.page(c, e.Name, "models"), m))
}

// liveJudge fills the panel's live judge: what it scored, and for admins
// the form's choices.
func (h *Handlers) liveJudge(c echo.Context, m *views.PanelView) error {
	org := CallerOf(c).OrgID
	live, ok, err := h.LiveScore.ForExperiment(ctx(c), org, m.Key)
	if err != nil {
		return err
	}
	m.LiveTemplate, m.LiveRatePercent = "default", "10"
	if ok {
		state := "scores"
		if !live.Enabled {
			state = "is off; it scored"
		}
		how := "judged by the template " + live.Template
		if live.Scorer != livescore.ScorerJudge {
			how = "scored on " + strings.ToLower(scorers.Describe(live.Scorer).Label)
		}
		m.Live = fmt.Sprintf("%s of answers, %s through %s: it %s %s, %s flagged unsafe, %s skipped, $%.4f so far.",
			percent(live.Rate), how, live.Endpoint, state, views.Count(live.Scored, "answer", "answers"),
			views.Count(live.Flagged, "answer", "answers"), views.Count(live.Skipped, "answer", "answers"), live.CostUSD)
		if live.Pending > 0 {
			m.Live += fmt.Sprintf(" %d waiting.", live.Pending)
		}
		m.LiveEndpoint, m.LiveTemplate, m.LiveRatePercent, m.LiveScorer = live.Endpoint, live.Template, percentValue(live.Rate), live.Scorer
	}
	if !m.CanAct {
		return nil
	}
	eps, err := h.Endpoints.List(ctx(c), org)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		m.LiveEndpoints = append(m.LiveEndpoints, ep.Name)
	}
	tpls, err := h.Judge.Templates(ctx(c), org)
	if err != nil {
		return err
	}
	for _, t := range tpls {
		if t.Name != judge.ReflectorName && !slices.Contains(m.LiveTemplates, t.Name) {
			m.LiveTemplates = append(m.LiveTemplates, t.Name)
		}
	}
	return nil
}

// panelSegments fills the panel's breakdown by the dimension the query
// asks for (?segment=, or ?segment_key= for a tag or a context key): the
// primary metric's effect in each segment, corrected for their number.
func (h *Handlers) panelSegments(c echo.Context, m *views.PanelView, r experiments.Results) error {
	m.Segment, m.SegmentKey = c.QueryParam("segment"), strings.TrimSpace(c.QueryParam("segment_key"))
	d := m.Segment
	if m.SegmentKey != "" {
		d = m.SegmentKey
	}
	if d == "" || len(r.Metrics) == 0 {
		return nil
	}
	seg, err := h.Experiments.ResultsBySegment(ctx(c), CallerOf(c).OrgID, m.Key, d, r)
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		if m.Errors == nil {
			m.Errors = map[string]string{}
		}
		m.Errors["segment"] = "The breakdown " + inv.ByField()["segment"] + "."
		return nil
	}
	if err != nil {
		return err
	}
	m.SegmentNote = fmt.Sprintf("%s by %s, each unit in the segment of its first feedback; p-values corrected for the %d segments; "+
		"a segment with fewer than %d units in an arm is too small to act on.", views.Label(r.Metrics[0].Metric), d, len(seg.Segments), seg.MinUnits)
	for _, sg := range seg.Segments {
		row := views.PanelSegment{Value: sg.Value, TooSmall: sg.TooSmall, Change: "Not enough data", AdjustedP: "—"}
		if len(sg.Units) >= 2 {
			row.Units = fmt.Sprintf("%d / %d", sg.Units[0], sg.Units[1])
		}
		if len(sg.Metrics) > 0 {
			pm := panelMetric(sg.Metrics[0], r.Engine == stats.EngineBayesian)
			row.Change, row.AdjustedP = pm.Change, pm.AdjustedP
			if row.AdjustedP == "" {
				row.AdjustedP = pm.ChanceToWin
			}
			row.Opposite = slices.Contains(sg.Opposite, sg.Metrics[0].Metric)
			row.Harmful = slices.Contains(sg.Harmful, sg.Metrics[0].Metric)
		}
		m.Segments = append(m.Segments, row)
	}
	return nil
}

// panelMetric is one metric's row: the arms' means, the treatment's
// change with its interval, and the engine's figures.
func panelMetric(mr experiments.MetricResult, bayesian bool) views.PanelMetric {
	row := views.PanelMetric{Name: mr.Metric, Guardrail: mr.Guardrail, Control: "—", Treatment: "—", Change: "Not enough data", PValue: "—"}
	if x := mr.Criterion; x != nil {
		row.Criterion = criterionText(mr.Metric, mr.Guardrail, *x)
	}
	if len(mr.Arms) > 0 && mr.Arms[0].Mean != nil {
		row.Control = fmt.Sprintf("%.3f (n %d)", *mr.Arms[0].Mean, mr.Arms[0].N)
	}
	if len(mr.Arms) < 2 {
		return row
	}
	t := mr.Arms[1]
	if t.Mean != nil {
		row.Treatment = fmt.Sprintf("%.3f (n %d)", *t.Mean, t.N)
	}
	if t.RelativeChange == nil {
		return row
	}
	row.Change = fmt.Sprintf("%+.1f%% (%s to %s)", 100**t.RelativeChange, bound(t.CI[0]), bound(t.CI[1]))
	row.Significant = t.Significant
	row.Better = (*t.RelativeChange > 0) == experiments.HigherIsBetter(mr.Metric)
	if t.PValue != nil {
		row.PValue = formatP(*t.PValue)
	}
	if t.AdjustedPValue != nil {
		row.AdjustedP = formatP(*t.AdjustedPValue)
	} else if !bayesian {
		row.AdjustedP = "—"
	}
	if t.ChanceToWin != nil {
		row.ChanceToWin = stats.Share(*t.ChanceToWin)
		row.Better = *t.ChanceToWin >= 0.5
	}
	if len(t.Risk) == 2 {
		row.Risk = stats.RiskText(t.Risk[1])
	}
	if vr := t.VarianceReduction; vr != nil && len(t.UnadjustedCI) == 2 {
		row.CUPED = fmt.Sprintf("CUPED: variance %s; without it %s to %s", signedPercent(-*vr), bound(t.UnadjustedCI[0]), bound(t.UnadjustedCI[1]))
	}
	return row
}

// bound is an interval's end in percent; an open end is ∞.
func bound(x *float64) string {
	if x == nil {
		return "∞"
	}
	return fmt.Sprintf("%+.1f%%", 100**x)
}

// signedPercent is a fraction as a whole signed percentage: −0.38 is
// "−38%".
func signedPercent(x float64) string {
	s := fmt.Sprintf("%+.0f%%", 100*x)
	return strings.Replace(s, "-", "−", 1)
}

// criterionText words a metric's criterion: "Criterion: improves by more
// than +5.0%" for a goal metric, "Limit: rises by less than +10.0%" for a
// guardrail.
func criterionText(metric string, guard bool, x float64) string {
	switch {
	case !guard:
		return "Criterion: improves by more than " + stats.Percent(x)
	case experiments.HigherIsBetter(metric):
		return "Limit: falls by less than " + stats.Percent(x)
	}
	return "Limit: rises by less than " + stats.Percent(x)
}

// analysisText fills the lines on how the results were computed: the
// engine and whose choice it is, CUPED's window and the units without
// history, the corrections ("adjusted for 4 metrics") and the incidents.
func analysisText(m *views.PanelView, e experiments.Experiment, r experiments.Results) {
	m.Bayesian = r.Engine == stats.EngineBayesian
	whose := "the organisation's default"
	if e.Analysis.Engine != "" {
		whose = "chosen for this experiment"
	}
	if m.Bayesian {
		m.Engine = "Bayesian engine (" + whose + "): the relative change's posterior under a flat prior, the chance that the treatment wins and the risk of choosing it (its expected loss)."
	} else {
		m.Engine = "Frequentist engine (" + whose + "): Welch's t-test on the relative change."
	}
	if r.CUPEDDays > 0 {
		var units, without int
		if len(r.Metrics) > 0 {
			for _, a := range r.Metrics[0].Arms {
				units += a.N
				without += a.WithoutHistory
			}
		}
		m.CUPED = fmt.Sprintf("Variance reduction (CUPED): each unit's feedback in the %s before its first exposure is its covariate.", views.Count(r.CUPEDDays, "day", "days"))
		if units > 0 {
			m.CUPED += fmt.Sprintf(" %s of the primary metric's %s had none and count with 0.", views.Count(without, "unit", "units"), views.Count(units, "unit", "units"))
		}
	} else {
		m.CUPED = "No variance reduction: the experiment reads no feedback from before each unit's exposure."
	}
	var parts []string
	for _, c := range r.Corrections {
		family := "goal metrics' p-values"
		if c.Family == "guardrail" {
			family = "guardrails' p-values"
		}
		switch {
		case c.Method == stats.CorrectionNone:
			parts = append(parts, fmt.Sprintf("The %s are not adjusted", family))
		case c.Metrics > 1:
			parts = append(parts, fmt.Sprintf("The %s are adjusted for %s (%s), their intervals drawn at %s", family,
				views.Count(c.Metrics, "metric", "metrics"), views.Label(c.Method), strconv.FormatFloat(100*(1-c.IntervalAlpha), 'f', -1, 64)+"%"))
		}
	}
	if len(parts) > 0 {
		m.Corrections = strings.Join(parts, "; ") + "."
	}
	if len(r.Incidents) == 2 && (r.Incidents[0] > 0 || r.Incidents[1] > 0) {
		m.Incidents = fmt.Sprintf("Safety incidents (answers the live judge flagged): control %d, treatment %d.", r.Incidents[0], r.Incidents[1])
	}
}

// holdText is a rollout step's hold in words.
func holdText(mins int) string {
	switch {
	case mins%(60*24) == 0 && mins > 0:
		return views.Count(mins/(60*24), "day", "days")
	case mins%60 == 0 && mins > 0:
		return views.Count(mins/60, "hour", "hours")
	}
	return views.Count(mins, "minute", "minutes")
}

// verdict fills the panel's verdict: its title, who decided and when, and
// which decision's button leads.
func verdict(m *views.PanelView, e experiments.Experiment, r experiments.Results) {
	m.Winner = "inconclusive"
	switch m.Action {
	case stats.DeployTreatment:
		m.Primary, m.Winner = "deploy", "treatment"
	case stats.KeepControl:
		m.Primary, m.Winner = "end", "control"
	case stats.StopNow:
		m.Primary = "end"
	case experiments.ActionStart:
		m.Primary = "start"
	case experiments.ActionRolledBack:
		// The rollout found harm: ending keeps the control.
		m.Primary, m.Winner = "end", "control"
	case experiments.ActionPaused:
		m.Primary = "resume"
	}
	switch m.Action {
	case experiments.ActionStart:
		m.Title = "Not started"
	case experiments.ActionRolledBack, experiments.ActionPaused, experiments.ActionCancelled:
		m.Title = views.Label(m.Action)
	case experiments.ActionEnded:
		m.Title = map[string]string{"control": "Ended: the control won", "treatment": "Ended: the treatment won"}[e.Winner]
		if m.Title == "" {
			m.Title = "Ended without a winner"
		}
	default:
		m.Title = "Recommendation: " + views.Label(m.Action)
	}
	if d := r.Decision; d != nil && d.By != "" {
		m.DecidedBy, m.DecidedAt = d.By, views.When(d.At)
	}
}

// srmText says what the sample-ratio check found, or why it did not run.
func srmText(e experiments.Experiment, r experiments.Results) (string, bool) {
	if r.SRMPValue != nil {
		p := formatP(*r.SRMPValue)
		if !strings.HasPrefix(p, "<") {
			p = "= " + p
		}
		return "p " + p + " against the configured weights", true
	}
	var units int64
	for _, n := range r.Units {
		units += n
	}
	zero := false
	for _, a := range e.Arms {
		zero = zero || a.Weight == 0
	}
	switch {
	case units == 0:
		return "Not checked: no unit is assigned yet.", false
	case e.WeightsChanged || e.RolloutStep > 0:
		return "Not checked: the split or the coverage changed within this phase, and units assigned before keep their arm.", false
	case zero:
		return "Not checked: an arm's weight is 0, so its units were assigned under other weights.", false
	}
	return "Not checked.", false
}

// effectChart fills the cumulative-effect chart's data and its table: time
// since the phase's start, in the hours or days the timeline is read in.
func effectChart(m *views.PanelView, r experiments.Results) error {
	if len(r.Timeline) == 0 || r.TimelineStart == nil {
		return nil
	}
	start := *r.TimelineStart
	unit := time.Hour
	m.EffectUnit = "hours"
	if r.TimelineUnit == "day" {
		m.EffectUnit, unit = "days", 24*time.Hour
	}
	d := struct {
		Start int64     `json:"start"`
		Unit  string    `json:"unit"`
		X     []float64 `json:"x"`
		Y     []float64 `json:"effect"`
		Low   []float64 `json:"low"`
		High  []float64 `json:"high"`
	}{Start: start.Unix(), Unit: m.EffectUnit}
	for _, p := range r.Timeline {
		since := p.At.Sub(start).Seconds() / unit.Seconds()
		d.X, d.Y, d.Low, d.High = append(d.X, since), append(d.Y, p.Effect), append(d.Low, p.Low), append(d.High, p.High)
		m.Effect = append(m.Effect, views.PanelEffect{Since: strconv.FormatFloat(since, 'f', 1, 64) + " " + m.EffectUnit, At: views.When(p.At),
			Effect: fmt.Sprintf("%+.1f%%", 100*p.Effect), Interval: fmt.Sprintf("%+.1f%% to %+.1f%%", 100*p.Low, 100*p.High)})
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	m.EffectJSON = string(b)
	return nil
}

// experimentMove starts, pauses or ends an experiment from its panel.
// A refusal (a start that finds an arm not served, a move the status
// does not allow) is shown beside the buttons.
func (h *Handlers) experimentMove(c echo.Context, status, winner, done string) error {
	_, err := h.Experiments.SetStatus(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), status, winner, "")
	field := "status" // beside Start, Resume and Pause; an end's beside the end form
	if status == experiments.Completed {
		field = "winner"
	}
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return h.renderPanel(c, http.StatusUnprocessableEntity, map[string]string{field: namedRefusal(invalid)}, nil)
	case errors.As(err, &conflict):
		return h.renderPanel(c, http.StatusConflict, map[string]string{field: conflict.Message}, nil)
	case err != nil:
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
		return h.renderPanel(c, http.StatusUnprocessableEntity, invalid.ByField(), nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The experiment runs until "+c.FormValue("until")+".")
	return redirect(c, "/experiments/"+c.Param("key"))
}

// trafficFields names the split form's field for each field the service
// can refuse.
var trafficFields = map[string]string{"weights": "treatment_percent", "coverage": "coverage_percent",
	"treatment_percent": "treatment_percent", "coverage_percent": "coverage_percent"}

// ExperimentTraffic changes an experiment's split and coverage from the
// panel (PATCH /api/experiments/:key's form), re-randomising when asked. A
// refusal keeps what was typed and names the field.
func (h *Handlers) ExperimentTraffic(c echo.Context) error {
	form := panelForm{treatment: strings.TrimSpace(c.FormValue("treatment_percent")), coverage: strings.TrimSpace(c.FormValue("coverage_percent")),
		reseed: c.FormValue("reseed") == "1"}
	in := experiments.Traffic{Reseed: form.reseed}
	v := &errs.Invalid{}
	if form.treatment != "" {
		if share, ok := percentInput(v, "treatment_percent", form.treatment, false, false); ok {
			in.Weights = []float64{1 - share, share}
		}
	}
	if form.coverage != "" {
		if cov, ok := percentInput(v, "coverage_percent", form.coverage, false, true); ok {
			in.Coverage = &cov
		}
	}
	err := v.Err()
	if err == nil {
		_, err = h.Experiments.SetTraffic(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), in)
	}
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return h.renderPanel(c, http.StatusUnprocessableEntity, experimentErrors(invalid, trafficFields, "traffic"), &form)
	case errors.As(err, &conflict):
		return h.renderPanel(c, http.StatusConflict, map[string]string{"traffic": conflict.Message}, &form)
	case err != nil:
		return err
	}
	h.Sessions.Flash(c, "ok", "The traffic split is changed.")
	return redirect(c, "/experiments/"+c.Param("key"))
}

// ExperimentDeploy sends all traffic to the treatment through the
// registry's deploy, then shows the deployment on the version's page.
// A refusal (the evaluation gate, a treatment served nowhere) is shown
// beside the button.
func (h *Handlers) ExperimentDeploy(c echo.Context) error {
	d, err := h.Experiments.FullDeploy(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("key"), "")
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return h.renderPanel(c, http.StatusUnprocessableEntity, map[string]string{"deploy": namedRefusal(invalid)}, nil)
	case errors.As(err, &conflict):
		return h.renderPanel(c, http.StatusConflict, map[string]string{"deploy": conflict.Message}, nil)
	case err != nil:
		return err
	}
	where := ""
	if d.Target != "" {
		where = " on " + d.Target
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Full deploy of %s: the treatment is going to production%s, and the experiment has ended with it as the winner.",
		c.Param("key"), where))
	return redirect(c, "/models/versions/"+d.VersionID.String())
}

// namedRefusal is a refused decision's messages in one line, each named by its
// field ("Treatment: is not loaded on gpu-1"), for the panel's buttons.
func namedRefusal(inv *errs.Invalid) string {
	parts := make([]string, len(inv.Errors))
	for i, f := range inv.Errors {
		parts[i] = views.Label(f.Field) + ": " + f.Message
	}
	return strings.Join(parts, " ")
}

// ExperimentAnalysis changes how an experiment is analysed from its panel:
// the engine, CUPED's days and the corrections; its criteria and Bayesian
// thresholds stay. A refusal is shown beside the form.
func (h *Handlers) ExperimentAnalysis(c echo.Context) error {
	org := CallerOf(c).OrgID
	e, err := h.Experiments.Get(ctx(c), org, c.Param("key"))
	if err != nil {
		return err
	}
	in := e.Analysis
	in.Engine, in.GoalCorrection, in.GuardrailCorrection = c.FormValue("engine"), c.FormValue("goal_correction"), c.FormValue("guardrail_correction")
	v := &errs.Invalid{}
	if days, ok := wholeInput(v, "cuped_days", c.FormValue("cuped_days"), 0); ok {
		in.CUPEDDays = &days
	}
	err = v.Err()
	if err == nil {
		_, err = h.Experiments.SetAnalysis(ctx(c), actor(c), org, e.Key, in)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderPanel(c, http.StatusUnprocessableEntity, map[string]string{"analysis": namedRefusal(invalid)}, nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The analysis is changed: the results are computed again.")
	return redirect(c, "/experiments/"+e.Key)
}
