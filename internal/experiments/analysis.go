package experiments

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// Defaults of an experiment's analysis: CUPED reads the 14 days before a
// unit's first exposure; goal metrics are corrected by Benjamini–Hochberg
// and guardrails by Holm.
const (
	DefaultCUPEDDays           = 14
	MaxCUPEDDays               = 90
	DefaultGoalCorrection      = stats.CorrectionBH
	DefaultGuardrailCorrection = stats.CorrectionHolm
	// MaxCriterion bounds a criterion: a tenfold change.
	MaxCriterion = 10
)

// Engines an experiment can be analysed with; "" in an experiment follows
// its organisation's default.
var Engines = []string{stats.EngineFrequentist, stats.EngineBayesian}

// Analysis is how an experiment is analysed, as POST /api/models/ab-test
// takes it beside the experiment's other fields (all optional). Engine ""
// follows the organisation's default. CUPEDDays 0 turns variance reduction
// off. MinImprovement gives goal metrics (of Metrics) their minimum
// relative improvement, MaxHarm guardrails their maximum relative harm,
// both as fractions (0.05 = 5%). ChanceToWin and MaxRisk are the Bayesian
// engine's thresholds for a deploy.
type Analysis struct {
	Engine              string             `json:"engine"`
	CUPEDDays           *int               `json:"cuped_days"`
	GoalCorrection      string             `json:"goal_correction"`
	GuardrailCorrection string             `json:"guardrail_correction"`
	MinImprovement      map[string]float64 `json:"min_improvement"`
	MaxHarm             map[string]float64 `json:"max_harm"`
	ChanceToWin         *float64           `json:"chance_to_win"`
	MaxRisk             *float64           `json:"max_risk"`
}

// analysisRow is an experiment's analysis as stored.
type analysisRow struct {
	engine, goal, guard string
	cupedDays           int
	criteria            map[string]float64
	chance, risk        float64
}

// validate checks the analysis against the experiment's metrics and
// guardrails and fills the defaults.
func (a Analysis) validate(v *errs.Invalid, metrics, guardrails []string) analysisRow {
	out := analysisRow{engine: a.Engine, goal: a.GoalCorrection, guard: a.GuardrailCorrection, cupedDays: DefaultCUPEDDays,
		criteria: map[string]float64{}, chance: stats.DefaultChanceToWin, risk: stats.DefaultMaxRisk}
	if out.engine != "" && !slices.Contains(Engines, out.engine) {
		v.Add("engine", "must be frequentist or bayesian, or left out for the organisation's default")
	}
	if a.CUPEDDays != nil {
		out.cupedDays = *a.CUPEDDays
		if out.cupedDays < 0 || out.cupedDays > MaxCUPEDDays {
			v.Add("cuped_days", "must be 0 (no variance reduction) to %d days", MaxCUPEDDays)
		}
	}
	for _, c := range []struct {
		field string
		value *string
		def   string
	}{{"goal_correction", &out.goal, DefaultGoalCorrection}, {"guardrail_correction", &out.guard, DefaultGuardrailCorrection}} {
		if *c.value == "" {
			*c.value = c.def
		} else if !slices.Contains(stats.Corrections, *c.value) {
			v.Add(c.field, "must be one of %s", strings.Join(stats.Corrections, ", "))
		}
	}
	for _, c := range []struct {
		field string
		m     map[string]float64
		in    []string
		what  string
	}{{"min_improvement", a.MinImprovement, metrics, "a goal metric of the experiment (in metrics)"},
		{"max_harm", a.MaxHarm, guardrails, "a guardrail of the experiment"}} {
		for _, name := range sortedKeys(c.m) {
			x := c.m[name]
			field := c.field + "." + name
			switch {
			case !slices.Contains(c.in, name):
				v.Add(field, "must name %s", c.what)
			case math.IsNaN(x) || x < 0 || x > MaxCriterion:
				v.Add(field, "must be a fraction from 0 to %d (0.05 is 5%%)", MaxCriterion)
			default:
				out.criteria[name] = x
			}
		}
	}
	if a.ChanceToWin != nil {
		if out.chance = *a.ChanceToWin; !(out.chance >= 0.5 && out.chance < 1) {
			v.Add("chance_to_win", "must be at least 0.5 and below 1")
		}
	}
	if a.MaxRisk != nil {
		if out.risk = *a.MaxRisk; !(out.risk > 0 && out.risk <= 1) {
			v.Add("max_risk", "must be above 0 and at most 1 (0.0025 is 0.25%%)")
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// store writes the analysis on the experiment, in the caller's
// transaction.
func (r analysisRow) store(ctx context.Context, q *db.Queries, id uuid.UUID) error {
	criteria, err := json.Marshal(r.criteria)
	if err != nil {
		return err
	}
	return q.ExperimentUpdateAnalysis(ctx, db.ExperimentUpdateAnalysisParams{ID: id, Engine: r.engine, CupedDays: int32(r.cupedDays),
		GoalCorrection: r.goal, GuardrailCorrection: r.guard, Criteria: criteria, ChanceToWin: r.chance, MaxRisk: r.risk})
}

// criteria reads an experiment's stored criteria; a row written by
// another version of this code that does not parse has none.
func criteria(e db.Experiment) map[string]float64 {
	out := map[string]float64{}
	_ = json.Unmarshal(e.Criteria, &out)
	return out
}

// analysisOf is an experiment's analysis as the API shows it.
func analysisOf(e db.Experiment) Analysis {
	days := int(e.CupedDays)
	chance, risk := e.ChanceToWin, e.MaxRisk
	out := Analysis{Engine: e.Engine, CUPEDDays: &days, GoalCorrection: e.GoalCorrection, GuardrailCorrection: e.GuardrailCorrection,
		MinImprovement: map[string]float64{}, MaxHarm: map[string]float64{}, ChanceToWin: &chance, MaxRisk: &risk}
	for m, x := range criteria(e) {
		if slices.Contains(e.Guardrails, m) {
			out.MaxHarm[m] = x
		} else {
			out.MinImprovement[m] = x
		}
	}
	return out
}

// DefaultEngine is the organisation's default statistics engine.
func (s *Service) DefaultEngine(ctx context.Context, orgID uuid.UUID) (string, error) {
	o, err := db.New(s.Pool).OrgGet(ctx, orgID)
	if err != nil {
		return "", errs.NotFound(err)
	}
	return o.ExperimentEngine, nil
}

// SetDefaultEngine changes the organisation's default statistics engine,
// audited: experiments that name none are analysed with it from then on.
func (s *Service) SetDefaultEngine(ctx context.Context, actor audit.Actor, orgID uuid.UUID, engine string) error {
	if !slices.Contains(Engines, engine) {
		return errs.InvalidField("default_engine", "must be frequentist or bayesian")
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.OrgUpdateExperimentEngine(ctx, db.OrgUpdateExperimentEngineParams{ID: orgID, ExperimentEngine: engine}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiments.default_engine", TargetType: "organization",
			TargetID: orgID.String(), Details: map[string]any{"default_engine": engine}})
	})
}

// SetAnalysis changes how an experiment is analysed, audited; the results
// follow at once, from the data already recorded.
func (s *Service) SetAnalysis(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key string, in Analysis) (Experiment, error) {
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		e, err := lockByKey(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		v := &errs.Invalid{}
		row := in.validate(v, e.Metrics, e.Guardrails)
		if err := v.Err(); err != nil {
			return err
		}
		if err := row.store(ctx, q, e.ID); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiment.analysis", TargetType: "experiment",
			TargetID: e.ID.String(), Details: map[string]any{"key": key, "engine": row.engine, "cuped_days": row.cupedDays,
				"goal_correction": row.goal, "guardrail_correction": row.guard, "criteria": row.criteria}})
	})
	if err != nil {
		return Experiment{}, err
	}
	return s.Get(ctx, orgID, key)
}
