package handlers

import (
	"cmp"
	"errors"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/views"
)

// The new-experiment form: the fields of POST /api/models/ab-test in the
// units a person thinks in (percent, hours, a day), with the metrics as
// rows.

// experimentDefaults are the form's values before anything is typed; the
// rollout plan is the design's 10% → 50% → 100%, a day per step.
var experimentDefaults = map[string]string{"treatment_percent": "50", "coverage_percent": "100", "min_sample_per_arm": "100",
	"rollout_steps": "10, 50, 100", "rollout_hold_hours": "24", "rollout_min_units": "100",
	"cuped_days": strconv.Itoa(experiments.DefaultCUPEDDays), "goal_correction": experiments.DefaultGoalCorrection,
	"guardrail_correction": experiments.DefaultGuardrailCorrection,
	// The seed's success criteria: user satisfaction up more than 5%,
	// latency up less than 10%, latency watched as a guardrail.
	criterionField(experiments.ThumbsUpRate): "5", criterionField(experiments.AvgRating): "5", criterionField(experiments.Latency): "10",
	metricField(experiments.Latency): "guardrail"}

// experimentInputs are the form's fields besides each metric's use.
var experimentInputs = []string{"key", "name", "control", "treatment", "treatment_percent", "coverage_percent", "min_sample_per_arm",
	"ends_on", "rollout", "rollout_steps", "rollout_hold_hours", "rollout_min_units", "engine", "cuped_days", "goal_correction",
	"guardrail_correction"}

// metricField is the form field holding a metric's use in the experiment.
func metricField(metric string) string { return "metric." + metric }

// criterionField is the form field holding a metric's criterion in
// percent.
func criterionField(metric string) string { return "criterion." + metric }

// ExperimentNew is the new-experiment form, from the experiments list or
// from a version's page (?treatment=ID: that version on trial, its model
// chosen); ?model= chooses another model.
func (h *Handlers) ExperimentNew(c echo.Context) error {
	var treatment uuid.UUID
	if s := c.QueryParam("treatment"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			return errs.ErrNotFound
		}
		treatment = id
	}
	ch, err := h.Experiments.Choices(ctx(c), CallerOf(c).OrgID, c.QueryParam("model"), treatment)
	if err != nil {
		return err
	}
	values := map[string]string{}
	for k, v := range experimentDefaults {
		values[k] = v
	}
	values[metricField(experiments.ThumbsUpRate)] = "primary"
	if ch.Control != uuid.Nil {
		values["control"] = ch.Control.String()
	}
	if ch.Treatment != uuid.Nil {
		values["treatment"] = ch.Treatment.String()
		// Prefilled with a key no other experiment has.
		if values["key"], err = h.Experiments.FreeKey(ctx(c), CallerOf(c).OrgID, keySuggestion(ch.Model+"-"+versionOf(ch, ch.Treatment))); err != nil {
			return err
		}
	}
	return h.renderExperimentForm(c, http.StatusOK, ch, values, nil)
}

// ExperimentCreate creates a draft experiment from the form and opens its
// panel; a refusal brings the form back as typed, each message beside its
// field.
func (h *Handlers) ExperimentCreate(c echo.Context) error {
	values := map[string]string{}
	for _, f := range experimentInputs {
		values[f] = strings.TrimSpace(c.FormValue(f))
	}
	for _, m := range experiments.Metrics {
		values[metricField(m)] = c.FormValue(metricField(m))
		values[criterionField(m)] = strings.TrimSpace(c.FormValue(criterionField(m)))
	}
	ch, err := h.Experiments.Choices(ctx(c), CallerOf(c).OrgID, c.FormValue("model"), uuid.Nil)
	if err != nil {
		return err
	}
	in, err := experimentInput(values)
	if err == nil {
		if in.Name == "" {
			in.Name = experimentName(ch, in.ControlModelID, in.TreatmentModelID)
		}
		var e experiments.Experiment
		if e, err = h.Experiments.Create(ctx(c), actor(c), CallerOf(c).OrgID, in); err == nil {
			h.Sessions.Flash(c, "ok", "The experiment "+e.Key+" is created as a draft: start it when the arms are ready.")
			return redirect(c, "/experiments/"+e.Key)
		}
	}
	var invalid *errs.Invalid
	if !errors.As(err, &invalid) {
		return err
	}
	return h.renderExperimentForm(c, http.StatusUnprocessableEntity, ch, values, experimentErrors(invalid, experimentFields, "form"))
}

func (h *Handlers) renderExperimentForm(c echo.Context, status int, ch experiments.Choices, values, problems map[string]string) error {
	engine, err := h.Experiments.DefaultEngine(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	m := views.ExperimentFormView{Models: ch.Models, Model: ch.Model, Values: values, Errors: problems,
		NamePlaceholder: experimentName(ch, ch.Control, ch.Treatment), DefaultEngine: engine}
	for _, v := range ch.Versions {
		m.Versions = append(m.Versions, views.Option{Value: v.ID.String(), Label: v.Version + " · " + servedText(v)})
	}
	for _, mi := range experiments.MetricInfos() {
		m.Metrics = append(m.Metrics, views.ExperimentMetricRow{Name: mi.Name, Measures: mi.Measures, HigherIsBetter: mi.HigherIsBetter,
			Role: values[metricField(mi.Name)], Criterion: values[criterionField(mi.Name)]})
	}
	return render(c, status, views.ExperimentNewPage(h.page(c, "New experiment", "models"), m))
}

// servedText is where a version is served now, for its option.
func servedText(v experiments.Candidate) string {
	aliases := strings.Join(v.Aliases, ", ")
	switch {
	case aliases != "" && v.Target != "":
		return aliases + " on " + v.Target
	case aliases != "":
		return aliases
	case v.Target != "":
		return "on " + v.Target + ", no alias"
	}
	return "not deployed"
}

// versionOf is a version's number among the choices, "" when it is not
// one of them.
func versionOf(ch experiments.Choices, id uuid.UUID) string {
	for _, v := range ch.Versions {
		if v.ID == id {
			return v.Version
		}
	}
	return ""
}

// experimentName is the name an experiment gets when none is typed:
// "support: 1.0.0 vs 1.1.0".
func experimentName(ch experiments.Choices, control, treatment uuid.UUID) string {
	c, t := versionOf(ch, control), versionOf(ch, treatment)
	if c == "" || t == "" {
		return ""
	}
	return ch.Model + ": " + c + " vs " + t
}

var notKey = regexp.MustCompile(`[^a-z0-9._-]+`)

// keySuggestion turns a model's name and a version into a key the API
// takes: "support-1.1.0".
func keySuggestion(s string) string {
	k := strings.Trim(notKey.ReplaceAllString(strings.ToLower(s), "-"), "-._")
	if len(k) > 64 {
		k = strings.TrimRight(k[:64], "-._")
	}
	return k
}

// experimentFields names the form's field for each field the service can
// refuse; indexes ("metrics[1]") are dropped first.
var experimentFields = map[string]string{"key": "key", "name": "name", "seed": "key", "traffic_split": "treatment_percent",
	"coverage": "coverage_percent", "control_model_id": "control", "treatment_model_id": "treatment", "metrics": "metrics",
	"guardrails": "metrics", "min_sample_per_arm": "min_sample_per_arm", "ends_at": "ends_on", "rollout.steps": "rollout_steps",
	"rollout.hold_minutes": "rollout_hold_hours", "rollout.min_units_per_arm": "rollout_min_units",
	// The form's own names, refused before the service is asked.
	"control": "control", "treatment": "treatment", "treatment_percent": "treatment_percent", "coverage_percent": "coverage_percent",
	"ends_on": "ends_on", "rollout_steps": "rollout_steps", "rollout_hold_hours": "rollout_hold_hours", "rollout_min_units": "rollout_min_units",
	// The analysis.
	"engine": "engine", "cuped_days": "cuped_days", "goal_correction": "goal_correction", "guardrail_correction": "guardrail_correction",
	"min_improvement": "criteria", "max_harm": "criteria", "criteria": "criteria", "chance_to_win": "criteria", "max_risk": "criteria"}

// experimentErrors puts each message beside the form field it is about (fields
// maps the service's names to the form's), the first message per field;
// a message about no field of the form goes to fallback, named.
func experimentErrors(inv *errs.Invalid, fields map[string]string, fallback string) map[string]string {
	out := map[string]string{}
	for _, f := range inv.Errors {
		name, msg := f.Field, f.Message
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		field, ok := fields[name]
		if before, _, cut := strings.Cut(name, "."); !ok && cut {
			field, ok = fields[before] // min_improvement.latency
		}
		if !ok {
			field, msg = fallback, views.Label(f.Field)+": "+msg
		}
		if _, seen := out[field]; !seen {
			out[field] = msg
		}
	}
	return out
}

// experimentInput reads the form into what the service takes, refusing
// what cannot be read in the form's own units.
func experimentInput(values map[string]string) (experiments.NewExperiment, error) {
	v := &errs.Invalid{}
	in := experiments.NewExperiment{Key: values["key"], Name: values["name"]}
	for _, arm := range []struct {
		field string
		id    *uuid.UUID
	}{{"control", &in.ControlModelID}, {"treatment", &in.TreatmentModelID}} {
		if values[arm.field] == "" {
			v.Add(arm.field, "is required: choose a version")
		} else if id, err := uuid.Parse(values[arm.field]); err != nil {
			v.Add(arm.field, "is not a version of this model")
		} else {
			*arm.id = id
		}
	}
	rollout := values["rollout"] == "1"
	if !rollout {
		if share, ok := percentInput(v, "treatment_percent", values["treatment_percent"], true, false); ok {
			in.TrafficSplit = &share
		}
	}
	if cov, ok := percentInput(v, "coverage_percent", values["coverage_percent"], true, true); ok {
		in.Coverage = &cov
	}
	if n, ok := wholeInput(v, "min_sample_per_arm", values["min_sample_per_arm"], 2); ok {
		in.MinSamplePerArm = &n
	}
	if s := values["ends_on"]; s != "" {
		if day, err := time.Parse("2006-01-02", s); err != nil {
			v.Add("ends_on", "must be a date")
		} else {
			end := day.Add(24*time.Hour - time.Second)
			in.EndsAt = &end
		}
	}
	in.Engine, in.GoalCorrection, in.GuardrailCorrection = values["engine"], values["goal_correction"], values["guardrail_correction"]
	if days, ok := wholeInput(v, "cuped_days", cmp.Or(values["cuped_days"], "0"), 0); ok {
		in.CUPEDDays = &days
	}
	in.MinImprovement, in.MaxHarm = map[string]float64{}, map[string]float64{}
	var primary []string
	for _, m := range experiments.Metrics {
		role := values[metricField(m)]
		if typed := values[criterionField(m)]; typed != "" && role != "" {
			x, err := strconv.ParseFloat(strings.TrimSuffix(typed, "%"), 64)
			switch {
			case err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > 100*experiments.MaxCriterion:
				v.Add("criteria", "%s: the criterion must be a number of percent from 0 to %d, such as 5", views.Label(m), 100*experiments.MaxCriterion)
			case role == "guardrail":
				in.MaxHarm[m] = x / 100
			default:
				in.MinImprovement[m] = x / 100
			}
		}
		switch role {
		case "primary":
			primary = append(primary, m)
		case "secondary":
			in.Metrics = append(in.Metrics, m)
		case "guardrail":
			in.Guardrails = append(in.Guardrails, m)
		case "":
		default:
			v.Add("metrics", "%s: %q is not a use of a metric", views.Label(m), role)
		}
	}
	switch len(primary) {
	case 0:
		v.Add("metrics", "choose one primary metric: the one that decides")
	case 1:
		in.Metrics = append(primary, in.Metrics...)
	default:
		v.Add("metrics", "choose only one primary metric (now %s)", strings.Join(labels(primary), ", "))
	}
	if rollout {
		r := &experiments.Rollout{Steps: stepsInput(v, values["rollout_steps"])}
		if h, ok := numberInput(v, "rollout_hold_hours", values["rollout_hold_hours"]); ok {
			if h < 0 || h > 90*24 {
				v.Add("rollout_hold_hours", "must be 0 to 2160 hours (90 days)")
			}
			r.HoldMins = int(math.Round(h * 60))
		}
		if n, ok := wholeInput(v, "rollout_min_units", values["rollout_min_units"], 1); ok {
			r.MinUnits = n
		}
		in.Rollout = r
	}
	return in, v.Err()
}

func labels(values []string) []string {
	out := make([]string, len(values))
	for i, s := range values {
		out[i] = views.Label(s)
	}
	return out
}

// numberInput reads a decimal number.
func numberInput(v *errs.Invalid, field, s string) (float64, bool) {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		v.Add(field, "must be a number")
		return 0, false
	}
	return x, true
}

// wholeInput reads a whole number from lo up to 10,000,000.
func wholeInput(v *errs.Invalid, field, s string, lo int) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < lo || n > 10_000_000 {
		v.Add(field, "must be a whole number from %d to 10,000,000", lo)
		return 0, false
	}
	return n, true
}

// percentInput reads a share typed in percent ("30" or "30%") as a
// fraction: above 0 and below 100, or up to 100 when upTo.
func percentInput(v *errs.Invalid, field, s string, required, upTo bool) (float64, bool) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if s == "" {
		if required {
			v.Add(field, "is required: a share in percent")
		}
		return 0, false
	}
	x, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
		v.Add(field, "must be a number of percent, such as 50")
	case upTo && (x <= 0 || x > 100):
		v.Add(field, "must be above 0%% and at most 100%%")
	case !upTo && (x <= 0 || x >= 100):
		v.Add(field, "must be above 0%% and below 100%%")
	default:
		return x / 100, true
	}
	return 0, false
}

var stepSeparators = regexp.MustCompile(`[\s,;→%]+`)

// stepsInput reads a rollout's steps in percent ("10, 50, 100" or
// "10% → 50% → 100%") as fractions.
func stepsInput(v *errs.Invalid, s string) []float64 {
	var steps []float64
	for _, part := range stepSeparators.Split(strings.TrimSpace(s), -1) {
		if part == "" {
			continue
		}
		x, err := strconv.ParseFloat(part, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			v.Add("rollout_steps", "give shares in percent separated by commas, such as 10, 50, 100")
			return nil
		}
		steps = append(steps, x/100)
	}
	switch {
	case len(steps) == 0 || len(steps) > 10:
		v.Add("rollout_steps", "give 1 to 10 shares in percent, such as 10, 50, 100")
		return nil
	case steps[len(steps)-1] != 1:
		v.Add("rollout_steps", "must end at 100: the full rollout")
		return nil
	}
	for i, st := range steps {
		if st <= 0 || i > 0 && st <= steps[i-1] {
			v.Add("rollout_steps", "must rise from step to step, each above 0%% (step %d is %s%%)", i+1, strconv.FormatFloat(100*st, 'f', -1, 64))
			return nil
		}
	}
	return steps
}
