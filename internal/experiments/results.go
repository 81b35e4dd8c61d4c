package experiments

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// Results is an experiment's analysis.
type Results struct {
	Key       string         `json:"key"`
	Status    string         `json:"status"`
	Units     []int64        `json:"units"`
	SRMPValue *float64       `json:"srm_p_value"`
	Metrics   []MetricResult `json:"metrics"`
	// Recommendation is what to do now: the statistics engine's advice
	// while the experiment runs, its state (ActionRolledBack and the
	// others) when it does not.
	Recommendation stats.Recommendation `json:"recommendation"`
	// Decision is who stopped a paused, ended or cancelled experiment,
	// when and why.
	Decision *Decision `json:"decision,omitempty"`
	// Timeline is the primary metric's cumulative relative effect hour by
	// hour (day by day once the phase is two days old) with its confidence
	// sequence (valid to look at every time), from TimelineStart: the
	// phase's start. TimelineUnit says which: "hour" or "day".
	Timeline      []Point    `json:"timeline"`
	TimelineStart *time.Time `json:"timeline_start"`
	TimelineUnit  string     `json:"timeline_unit,omitempty"`
	// Engine is the engine the results come from: the experiment's own,
	// or its organisation's default.
	Engine string `json:"engine"`
	// CUPEDDays is how many days before each unit's first exposure its
	// feedback was read as the covariate; 0 when variance reduction is off.
	CUPEDDays int `json:"cuped_days"`
	// Corrections say how the goal metrics' and the guardrails' p-values
	// and intervals were adjusted for being tested together (frequentist
	// engine only).
	Corrections []Correction `json:"corrections"`
	// Incidents are the answers in each arm the live scorer flagged as
	// unsafe.
	Incidents []int64 `json:"incidents"`
	// Segments are the results broken down by a dimension, when asked
	// for (ResultsBySegment).
	Segments *Segments `json:"segments,omitempty"`
}

// Correction is one family of metrics' adjustment: "goal" or "guardrail",
// the method (bh, holm or none) and how many metrics it adjusted for (those
// with a p-value).
type Correction struct {
	Family  string `json:"family"`
	Method  string `json:"method"`
	Metrics int    `json:"metrics"`
	// IntervalAlpha is the level the family's intervals are drawn at.
	IntervalAlpha float64 `json:"interval_alpha"`
}

// MetricResult is one metric in every arm.
type MetricResult struct {
	Metric    string `json:"metric"`
	Guardrail bool   `json:"guardrail"`
	// Criterion is a goal metric's minimum improvement or a guardrail's
	// maximum harm (relative), when it has one.
	Criterion *float64    `json:"criterion,omitempty"`
	Arms      []ArmResult `json:"arms"`
}

// ArmResult is one metric in one arm; the treatments carry their effect
// against the control, or why there is none.
type ArmResult struct {
	Arm            string     `json:"arm"`
	N              int        `json:"n"`
	Mean           *float64   `json:"mean"`
	RelativeChange *float64   `json:"relative_change,omitempty"`
	CI             []*float64 `json:"ci,omitempty"`
	PValue         *float64   `json:"p_value,omitempty"`
	Significant    bool       `json:"significant"`
	Error          string     `json:"error,omitempty"`
	// AdjustedPValue is the p-value corrected across the metric's family
	// (frequentist engine).
	AdjustedPValue *float64 `json:"adjusted_p_value,omitempty"`
	// ChanceToWin and Risk ([control, treatment], the expected relative
	// loss of choosing each) are the Bayesian engine's; RelativeChange and
	// CI are then the posterior's mean and credible interval.
	ChanceToWin *float64  `json:"chance_to_win,omitempty"`
	Risk        []float64 `json:"risk,omitempty"`
	// VarianceReduction is the share of the effect's variance CUPED
	// removed, and UnadjustedCI the interval without it.
	VarianceReduction *float64   `json:"variance_reduction,omitempty"`
	UnadjustedCI      []*float64 `json:"unadjusted_ci,omitempty"`
	// WithoutHistory counts the arm's units with no feedback before their
	// first exposure: they count with a covariate of 0.
	WithoutHistory int `json:"units_without_history"`
}

// Point is the cumulative effect of the feedback from the phase's start
// until At: the end of the hour or day (UTC) that starts at Day, or now
// while it lasts.
type Point struct {
	Day    time.Time `json:"day"`
	At     time.Time `json:"at"`
	Effect float64   `json:"effect"`
	Low    float64   `json:"low"`
	High   float64   `json:"high"`
}

// sequentialTuning is the confidence sequences' tuning parameter: tightest
// around this many units.
const sequentialTuning = 5000

// armStats turns the moments of each arm into the engine's arms for a
// metric, with the pre-exposure covariate when cuped (units without
// history count with 0, as their sums already do).
func armStats(rows []db.ExperimentListMetricMomentsRow, arms int, metric string, cuped bool) []stats.Arm {
	out := make([]stats.Arm, arms)
	for _, r := range rows {
		if int(r.Arm) >= arms || r.Metric != metric {
			continue
		}
		a := &out[r.Arm]
		a.N, a.Sum, a.SumSquares = r.N, r.Sum, r.SumSquares
		if cuped {
			a.Covariate = &stats.Covariate{Sum: r.PreSum, SumSquares: r.PreSumSquares, CrossSum: r.CrossSum}
		}
	}
	if cuped {
		for i := range out {
			if out[i].Covariate == nil {
				out[i].Covariate = &stats.Covariate{}
			}
		}
	}
	return out
}

// withoutHistory is, per arm, the units with a value of the metric but no
// pre-exposure value.
func withoutHistory(rows []db.ExperimentListMetricMomentsRow, arms int, metric string) []int {
	out := make([]int, arms)
	for _, r := range rows {
		if int(r.Arm) < arms && r.Metric == metric {
			out[r.Arm] = int(r.N - r.PreN)
		}
	}
	return out
}

// Results analyses an experiment: units per arm and the sample-ratio
// check, every metric's mean per arm and the treatment's relative change
// under the experiment's engine (its own, or the organisation's default),
// CUPED-adjusted by each unit's feedback before its first exposure when
// the experiment reads a pre-exposure window. The frequentist engine's
// p-values are corrected across the goal metrics and across the
// guardrails, and its intervals drawn to agree; the Bayesian engine gives
// the chance to win and the risks. Then the recommendation by the
// experiments' criteria, and the primary metric's cumulative effect.
func (s *Service) Results(ctx context.Context, orgID uuid.UUID, key string) (Results, error) {
	q := db.New(s.Pool)
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
	if err != nil {
		return Results{}, errs.NotFound(err)
	}
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil {
		return Results{}, err
	}
	out := Results{Key: e.Key, Status: string(e.Status), Units: make([]int64, len(arms)), Metrics: []MetricResult{}, Timeline: []Point{},
		Engine: e.Engine, CUPEDDays: int(e.CupedDays), Corrections: []Correction{}, Incidents: make([]int64, len(arms))}
	if out.Engine == "" {
		if out.Engine, err = s.DefaultEngine(ctx, orgID); err != nil {
			return Results{}, err
		}
	}
	counts, err := q.ExposureCountByArm(ctx, db.ExposureCountByArmParams{ExperimentID: e.ID, Phase: e.Phase})
	if err != nil {
		return Results{}, err
	}
	for _, c := range counts {
		if int(c.Arm) < len(arms) {
			out.Units[c.Arm] = c.Units
		}
	}
	nPerArm := make([]float64, len(arms))
	weights := make([]float64, len(arms))
	for i, a := range arms {
		nPerArm[i], weights[i] = float64(out.Units[i]), a.Weight
	}
	// The split is checked against the weights units were assigned under:
	// not once a rollout or an admin has changed them within the phase
	// (units keep their first arm), nor with an arm weighted 0.
	if e.RolloutStep == 0 && !e.WeightsChanged {
		if p, err := stats.SRM(nPerArm, weights); err == nil {
			out.SRMPValue = &p
		}
	}
	// The moments and incidents ExperimentListMetricMoments and
	// ExperimentCountIncidents would answer, from the units' kept values
	// (sums.go).
	if err := s.foldFor(ctx, e); err != nil {
		return Results{}, err
	}
	rows, incidents, err := keptMoments(ctx, q, e)
	if err != nil {
		return Results{}, err
	}
	for _, r := range incidents {
		if int(r.Arm) < len(arms) {
			out.Incidents[r.Arm] = r.Incidents
		}
	}
	a := analyser{e: e, engine: out.Engine, rows: rows, arms: arms, crit: criteria(e)}
	out.Metrics, out.Corrections = a.metrics()
	ev := stats.Evidence{SRMPValue: out.SRMPValue, NPerArm: nPerArm, MinPerArm: float64(e.MinSamplePerArm), ChanceToWin: e.ChanceToWin,
		MaxRisk: e.MaxRisk, Incidents: out.Incidents}
	for k, mr := range out.Metrics {
		o := a.outcomes[k]
		switch {
		case mr.Guardrail:
			ev.Guardrails = append(ev.Guardrails, o)
		case k == 0:
			ev.Primary = o
			ev.NeededPerArm = a.needed(mr.Metric)
		}
	}
	if len(out.Metrics) == 0 {
		ev.Primary = stats.Outcome{Name: "The primary metric"}
	}
	out.Recommendation = stats.Recommend(ev)
	if out.Recommendation, out.Decision, err = verdict(ctx, q, e, out.Recommendation); err != nil {
		return Results{}, err
	}
	if start := phaseStart(e); start != nil && len(e.Metrics) > 0 && len(arms) > 1 {
		out.TimelineStart = start
		if out.Timeline, out.TimelineUnit, err = s.timeline(ctx, q, orgID, e, *start, len(arms), e.Metrics[0], rows); err != nil {
			return Results{}, err
		}
	}
	return out, nil
}

// analyser computes an experiment's metrics from its moments.
type analyser struct {
	e      db.Experiment
	engine string
	rows   []db.ExperimentListMetricMomentsRow
	arms   []db.ExperimentArmListRow
	crit   map[string]float64
	// outcomes are the treatment's outcome per metric, in the results'
	// order, for the recommendation.
	outcomes []stats.Outcome
}

// resultAlpha is the level of every test and interval before corrections.
const resultAlpha = 0.05

// metrics analyses every metric: goal metrics first (the primary one
// leading), then the guardrails.
func (a *analyser) metrics() ([]MetricResult, []Correction) {
	e := a.e
	all := append(append([]string{}, e.Metrics...), e.Guardrails...)
	cuped := e.CupedDays > 0
	out := make([]MetricResult, len(all))
	a.outcomes = make([]stats.Outcome, len(all))
	armData := make([][]stats.Arm, len(all))
	for k, metric := range all {
		guard := k >= len(e.Metrics)
		mr := MetricResult{Metric: metric, Guardrail: guard}
		if x, ok := a.crit[metric]; ok && x > 0 {
			mr.Criterion = &x
		}
		as := armStats(a.rows, len(a.arms), metric, cuped)
		armData[k] = as
		missing := withoutHistory(a.rows, len(a.arms), metric)
		for i, arm := range as {
			ar := ArmResult{Arm: a.arms[i].Name, N: int(arm.N)}
			if arm.N > 0 {
				m := arm.Sum / arm.N
				ar.Mean = &m
			}
			if cuped {
				ar.WithoutHistory = missing[i]
			}
			mr.Arms = append(mr.Arms, ar)
		}
		a.outcomes[k] = stats.Outcome{Name: label(metric), HigherIsBetter: higherIsBetter[metric], Guardrail: guard, Criterion: a.crit[metric]}
		out[k] = mr
	}
	if len(a.arms) < 2 {
		return out, []Correction{}
	}
	if a.engine == stats.EngineBayesian {
		for k := range all {
			a.bayesian(&out[k], armData[k], k)
		}
		return out, []Correction{}
	}
	// Frequentist: p-values first, adjusted within each family; then each
	// interval at the family's interval alpha.
	var corrections []Correction
	for _, fam := range []struct {
		name, method string
		from, to     int
	}{{"goal", e.GoalCorrection, 0, len(e.Metrics)}, {"guardrail", e.GuardrailCorrection, len(e.Metrics), len(all)}} {
		var ps []float64
		var tested []int
		for k := fam.from; k < fam.to; k++ {
			as := armData[k]
			eff, err := stats.Compare(as[0], as[1], a.test(resultAlpha))
			if err == nil {
				ps, tested = append(ps, *eff.PValue), append(tested, k)
			}
		}
		adjusted, alpha := stats.Adjust(fam.method, ps, resultAlpha)
		if fam.to > fam.from {
			corrections = append(corrections, Correction{Family: fam.name, Method: fam.method, Metrics: len(tested), IntervalAlpha: alpha})
		}
		for k := fam.from; k < fam.to; k++ {
			j := slices.Index(tested, k)
			var adj *float64
			if j >= 0 {
				adj = &adjusted[j]
			}
			a.frequentist(&out[k], armData[k], k, alpha, adj)
		}
	}
	return out, corrections
}

// test is the experiments' test at an alpha: the relative difference of
// means, two-sided.
func (a *analyser) test(alpha float64) stats.Test {
	return stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: alpha, Alternative: stats.TwoSided}
}

// frequentist fills the treatment's effect at the interval alpha, its
// adjusted p-value and what CUPED took away.
func (a *analyser) frequentist(mr *MetricResult, as []stats.Arm, k int, alpha float64, adjusted *float64) {
	ar := &mr.Arms[1]
	eff, err := stats.Compare(as[0], as[1], a.test(alpha))
	if err != nil {
		ar.Error = "Not enough data yet."
		return
	}
	ar.RelativeChange, ar.PValue, ar.CI = &eff.Expected, eff.PValue, []*float64{eff.CI[0], eff.CI[1]}
	ar.AdjustedPValue = adjusted
	if adjusted != nil {
		ar.Significant = *adjusted < resultAlpha
	}
	if eff.Theta != 0 { // CUPED applied: the pre-exposure values varied
		if raw, err := stats.Compare(uncovered(as[0]), uncovered(as[1]), a.test(alpha)); err == nil && raw.SE > 0 {
			vr := 1 - (eff.SE*eff.SE)/(raw.SE*raw.SE)
			ar.VarianceReduction, ar.UnadjustedCI = &vr, []*float64{raw.CI[0], raw.CI[1]}
		}
	}
	a.outcomes[k].Effect = &eff
}

// bayesian fills the treatment's posterior: mean, credible interval,
// chance to win and risks, and what CUPED took away.
func (a *analyser) bayesian(mr *MetricResult, as []stats.Arm, k int) {
	ar := &mr.Arms[1]
	b := stats.Bayesian{LowerIsBetter: !higherIsBetter[mr.Metric]}
	p, err := stats.CompareBayesian(as[0], as[1], a.test(resultAlpha), b)
	if err != nil {
		ar.Error = "Not enough data yet."
		return
	}
	ar.RelativeChange, ar.CI = &p.Expected, []*float64{&p.CI[0], &p.CI[1]}
	ar.ChanceToWin, ar.Risk = &p.ChanceToWin, []float64{p.Risk[0], p.Risk[1]}
	threshold := a.e.ChanceToWin
	ar.Significant = p.ChanceToWin >= threshold || p.ChanceToWin <= 1-threshold
	if as[0].Covariate != nil && cupedApplies(as) {
		if raw, err := stats.CompareBayesian(uncovered(as[0]), uncovered(as[1]), a.test(resultAlpha), b); err == nil && raw.SD > 0 {
			vr := 1 - (p.SD*p.SD)/(raw.SD*raw.SD)
			ar.VarianceReduction, ar.UnadjustedCI = &vr, []*float64{&raw.CI[0], &raw.CI[1]}
		}
	}
	a.outcomes[k].Posterior = &p
}

// cupedApplies says whether CUPED adjusts the arms: their joint
// pre-exposure values and metric values vary.
func cupedApplies(as []stats.Arm) bool {
	th, err := stats.Theta(stats.MetricMean, as[0], as[1])
	return err == nil && th != 0
}

// uncovered is an arm without its covariate.
func uncovered(a stats.Arm) stats.Arm {
	a.Covariate = nil
	return a
}

// needed is the units per arm that would detect the primary metric's
// difference seen now, 0 when unknown.
func (a *analyser) needed(metric string) float64 {
	as := armStats(a.rows, len(a.arms), metric, false)
	if len(as) < 2 || as[0].N < 2 || as[1].N < 2 {
		return 0
	}
	c, t := as[0], as[1]
	v := (c.SumSquares - c.Sum*c.Sum/c.N) / (c.N - 1)
	d := t.Sum/t.N - c.Sum/c.N
	if p, err := stats.PowerFor(v, min(t.N, c.N), resultAlpha, 0.8, d); err == nil {
		return p.NeededPerArm
	}
	return 0
}

// phaseStart is when the current phase began: the experiment's start for
// the first, the re-randomisation for later ones; nil before it starts.
func phaseStart(e db.Experiment) *time.Time {
	if e.PhaseStartedAt != nil {
		return e.PhaseStartedAt
	}
	return e.StartedAt
}

// timelineHours is how long a phase is drawn hour by hour; an older one is
// drawn day by day.
const timelineHours = 48 * time.Hour

// timeline is the primary metric's relative effect at the end of each hour
// (each day, once the phase is older than timelineHours) that brought
// feedback, with its confidence sequence. upToNow are the phase's moments
// over all its feedback: the last bucket's point reads them rather than
// reading the feedback again, since no feedback comes after that bucket
// (unless the buckets stopped at the query's limit of 120).
func (s *Service) timeline(ctx context.Context, q *db.Queries, orgID uuid.UUID, e db.Experiment, start time.Time, arms int, metric string,
	upToNow []db.ExperimentListMetricMomentsRow) ([]Point, string, error) {
	now := s.now()
	unit, step := "hour", time.Hour
	if now.Sub(start) > timelineHours {
		unit, step = "day", 24*time.Hour
	}
	buckets, err := q.ExperimentListBuckets(ctx, db.ExperimentListBucketsParams{Unit: unit, OrgID: orgID,
		ExperimentID: uuid.NullUUID{UUID: e.ID, Valid: true}, Since: e.PhaseStartedAt})
	if err != nil {
		return nil, "", err
	}
	out := []Point{}
	test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Alternative: stats.TwoSided, Sequential: sequentialTuning}
	for i, b := range buckets {
		// The query reads the whole bucket; the point is drawn at now while
		// the bucket lasts.
		end := b.Add(step)
		at := end
		if at.After(now) {
			at = now
		}
		rows := upToNow
		if i < len(buckets)-1 || len(buckets) >= 120 {
			var err error
			if rows, err = q.ExperimentListMetricMoments(ctx, db.ExperimentListMetricMomentsParams{OrgID: orgID, ExperimentID: e.ID,
				Phase: e.Phase, Since: e.PhaseStartedAt, Before: &end}); err != nil {
				return nil, "", err
			}
		}
		as := armStats(rows, arms, metric, false)
		eff, err := stats.Compare(as[0], as[1], test)
		if err != nil {
			continue // not enough data by then
		}
		out = append(out, Point{Day: b, At: at, Effect: eff.Expected, Low: *eff.CI[0], High: *eff.CI[1]})
	}
	return out, unit, nil
}

// label is a metric's name in words.
func label(metric string) string {
	switch metric {
	case ThumbsUpRate:
		return "The thumbs-up rate"
	case AvgRating:
		return "The average rating"
	case CorrectionRate:
		return "The share of corrections"
	case Latency:
		return "Latency"
	case AvgAccuracy:
		return "The average accuracy score"
	case AvgHelpfulness:
		return "The average helpfulness score"
	case AvgClarity:
		return "The average clarity score"
	case AvgSafety:
		return "The average safety score"
	case AvgJudgeScore:
		return "The average judge score"
	}
	return metric
}

// HigherIsBetter says whether a metric's rise is good news.
func HigherIsBetter(metric string) bool { return higherIsBetter[metric] }
