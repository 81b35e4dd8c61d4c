package experiments

import (
	"context"
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
}

// MetricResult is one metric in every arm.
type MetricResult struct {
	Metric    string      `json:"metric"`
	Guardrail bool        `json:"guardrail"`
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

// armStats turns the metric sums of each arm into the engine's arms.
func armStats(rows []db.ExperimentListMetricSumsRow, arms int, metric string) []stats.Arm {
	out := make([]stats.Arm, arms)
	for _, r := range rows {
		if int(r.Arm) >= arms {
			continue
		}
		a := &out[r.Arm]
		switch metric {
		case ThumbsUpRate:
			a.N, a.Sum, a.SumSquares = r.ThumbsN, r.ThumbsSum, r.ThumbsSs
		case AvgRating:
			a.N, a.Sum, a.SumSquares = r.RatingN, r.RatingSum, r.RatingSs
		case CorrectionRate:
			a.N, a.Sum, a.SumSquares = r.CorrectedN, r.CorrectedSum, r.CorrectedSs
		case Latency:
			a.N, a.Sum, a.SumSquares = r.LatencyN, r.LatencySum, r.LatencySs
		case AvgAccuracy:
			a.N, a.Sum, a.SumSquares = r.AccuracyN, r.AccuracySum, r.AccuracySs
		case AvgHelpfulness:
			a.N, a.Sum, a.SumSquares = r.HelpfulnessN, r.HelpfulnessSum, r.HelpfulnessSs
		case AvgClarity:
			a.N, a.Sum, a.SumSquares = r.ClarityN, r.ClaritySum, r.ClaritySs
		case AvgSafety:
			a.N, a.Sum, a.SumSquares = r.SafetyN, r.SafetySum, r.SafetySs
		}
	}
	return out
}

// Results analyses an experiment: units per arm and the sample-ratio
// check, every metric's mean per arm and each treatment's relative change
// (Welch's t-test, delta method, two-sided at 0.05), the recommendation,
// and the primary metric's cumulative effect by day.
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
	out := Results{Key: e.Key, Status: string(e.Status), Units: make([]int64, len(arms)), Metrics: []MetricResult{}, Timeline: []Point{}}
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
	sums, err := q.ExperimentListMetricSums(ctx, db.ExperimentListMetricSumsParams{OrgID: orgID, ExperimentID: e.ID, Phase: e.Phase, Since: e.PhaseStartedAt})
	if err != nil {
		return Results{}, err
	}
	test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Alternative: stats.TwoSided}
	var primary stats.Outcome
	var guards []stats.Outcome
	needed := 0.0
	all := append(append([]string{}, e.Metrics...), e.Guardrails...)
	for k, metric := range all {
		guard := k >= len(e.Metrics)
		mr := MetricResult{Metric: metric, Guardrail: guard}
		as := armStats(sums, len(arms), metric)
		for i, a := range as {
			ar := ArmResult{Arm: arms[i].Name, N: int(a.N)}
			if a.N > 0 {
				m := a.Sum / a.N
				ar.Mean = &m
			}
			if i > 0 {
				eff, err := stats.Compare(as[0], a, test)
				if err != nil {
					ar.Error = "Not enough data yet."
				} else {
					ar.RelativeChange, ar.PValue, ar.CI = &eff.Expected, eff.PValue, []*float64{eff.CI[0], eff.CI[1]}
					ar.Significant = *eff.PValue < test.Alpha
				}
				if i == 1 {
					o := stats.Outcome{Name: label(metric), HigherIsBetter: higherIsBetter[metric], Guardrail: guard}
					if err == nil {
						o.Effect = &eff
					}
					switch {
					case guard:
						guards = append(guards, o)
					case k == 0:
						primary = o
						if err == nil && a.N >= 2 && as[0].N >= 2 {
							v := (as[0].SumSquares - as[0].Sum*as[0].Sum/as[0].N) / (as[0].N - 1)
							d := a.Sum/a.N - as[0].Sum/as[0].N
							if p, err := stats.PowerFor(v, min(a.N, as[0].N), 0.05, 0.8, d); err == nil {
								needed = p.NeededPerArm
							}
						}
					}
				}
			}
			mr.Arms = append(mr.Arms, ar)
		}
		out.Metrics = append(out.Metrics, mr)
	}
	out.Recommendation = stats.Recommend(primary, guards, out.SRMPValue, nPerArm, float64(e.MinSamplePerArm), needed)
	if out.Recommendation, out.Decision, err = verdict(ctx, q, e, out.Recommendation); err != nil {
		return Results{}, err
	}
	if start := phaseStart(e); start != nil && len(e.Metrics) > 0 && len(arms) > 1 {
		out.TimelineStart = start
		if out.Timeline, out.TimelineUnit, err = s.timeline(ctx, q, orgID, e, *start, len(arms), e.Metrics[0]); err != nil {
			return Results{}, err
		}
	}
	return out, nil
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
// feedback, with its confidence sequence.
func (s *Service) timeline(ctx context.Context, q *db.Queries, orgID uuid.UUID, e db.Experiment, start time.Time, arms int, metric string) ([]Point, string, error) {
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
	for _, b := range buckets {
		// The query reads the whole bucket; the point is drawn at now while
		// the bucket lasts.
		end := b.Add(step)
		at := end
		if at.After(now) {
			at = now
		}
		sums, err := q.ExperimentListMetricSums(ctx, db.ExperimentListMetricSumsParams{OrgID: orgID, ExperimentID: e.ID, Phase: e.Phase, Since: e.PhaseStartedAt, Before: &end})
		if err != nil {
			return nil, "", err
		}
		as := armStats(sums, arms, metric)
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
	}
	return metric
}

// HigherIsBetter says whether a metric's rise is good news.
func HigherIsBetter(metric string) bool { return higherIsBetter[metric] }
