package experiments

import (
	"cmp"
	"context"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// Segments is an experiment's results broken down by one dimension: each
// segment's units and every metric's effect in it, its p-values corrected
// for the number of segments by the experiment's correction method (the
// goal metrics' for goal metrics, the guardrails' for guardrails), so that
// looking at many segments does not find effects by chance.
type Segments struct {
	// Dimension is what the units were split by, as asked:
	// "model", "source", "tag:<tag>" or "context.<key>".
	Dimension string    `json:"dimension"`
	Segments  []Segment `json:"segments"`
	// MinUnits is the units per arm below which a segment is too small to
	// read.
	MinUnits int `json:"min_units"`
}

// Segment is one value of the dimension.
type Segment struct {
	Value   string         `json:"value"`
	Units   []int64        `json:"units"`
	Metrics []MetricResult `json:"metrics"`
	// TooSmall says an arm has fewer units than MinUnits: its effects are
	// shown but not to be acted on.
	TooSmall bool `json:"too_small"`
	// Opposite lists the metrics whose effect in this segment has the
	// opposite sign to the experiment's overall effect; Harmful those of
	// them where the segment is made worse.
	Opposite []string `json:"opposite"`
	Harmful  []string `json:"harmful"`
}

// Segment limits: the most segments shown (the smaller ones are grouped
// into one), and the fewest units per arm a segment is read with when
// the experiment sets no minimum sample.
const (
	MaxSegments     = 20
	DefaultMinUnits = 30
	// OtherSegment is the segment the smallest values are grouped into.
	OtherSegment = "(other)"
)

var segmentPattern = regexp.MustCompile(`^(model|source|tag:[^\s]{1,100}|context\.[A-Za-z0-9_.-]{1,100})$`)

// parseDimension reads a dimension into the query's kind and value.
func parseDimension(d string) (kind, value string, err error) {
	if !segmentPattern.MatchString(d) {
		return "", "", errs.InvalidField("segment", `must be "model", "source", "tag:<tag>" or "context.<key>"`)
	}
	switch {
	case strings.HasPrefix(d, "tag:"):
		return "tag", strings.TrimPrefix(d, "tag:"), nil
	case strings.HasPrefix(d, "context."):
		return "context", strings.TrimPrefix(d, "context."), nil
	}
	return d, "", nil
}

// ResultsBySegment breaks an experiment's results down by a dimension: a
// unit belongs to the segment its first feedback of the phase falls in.
// Effects are computed per segment by the experiment's engine, without
// CUPED (the covariate adjusts the overall effect); overall is the
// experiment's own results, whose effects the segments' signs are
// compared with.
func (s *Service) ResultsBySegment(ctx context.Context, orgID uuid.UUID, key, dimension string, overall Results) (Segments, error) {
	kind, value, err := parseDimension(dimension)
	if err != nil {
		return Segments{}, err
	}
	q := db.New(s.Pool)
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
	if err != nil {
		return Segments{}, errs.NotFound(err)
	}
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil {
		return Segments{}, err
	}
	units, err := q.ExperimentListUnitSegments(ctx, db.ExperimentListUnitSegmentsParams{ExperimentID: e.ID, Phase: e.Phase, Dimension: kind,
		Value: value, OrgID: orgID, Since: e.PhaseStartedAt})
	if err != nil {
		return Segments{}, err
	}
	out := Segments{Dimension: dimension, Segments: []Segment{}, MinUnits: DefaultMinUnits}
	if e.MinSamplePerArm > 0 {
		out.MinUnits = int(e.MinSamplePerArm)
	}
	groups := groupSegments(units)
	e.CupedDays = 0
	analysers := make([]*analyser, len(groups))
	for i, g := range groups {
		a := &analyser{e: e, engine: overall.Engine, rows: moments(g.units, len(arms)), arms: arms, crit: criteria(e)}
		metrics, _ := a.metrics()
		seg := Segment{Value: g.value, Units: make([]int64, len(arms)), Metrics: metrics, Opposite: []string{}, Harmful: []string{}}
		for _, u := range g.units {
			if int(u.Arm) < len(arms) {
				seg.Units[u.Arm]++
			}
		}
		for _, n := range seg.Units {
			seg.TooSmall = seg.TooSmall || n < int64(out.MinUnits)
		}
		analysers[i] = a
		out.Segments = append(out.Segments, seg)
	}
	if len(arms) >= 2 && overall.Engine != stats.EngineBayesian {
		correctAcrossSegments(e, out.Segments, analysers)
	}
	for i := range out.Segments {
		markOpposite(&out.Segments[i], overall)
	}
	return out, nil
}

// segmentGroup is one segment's units.
type segmentGroup struct {
	value string
	units []db.ExperimentListUnitSegmentsRow
}

// groupSegments splits the units by segment, the largest first; past
// MaxSegments the smallest are grouped into OtherSegment.
func groupSegments(units []db.ExperimentListUnitSegmentsRow) []segmentGroup {
	by := map[string][]db.ExperimentListUnitSegmentsRow{}
	for _, u := range units {
		by[u.Segment] = append(by[u.Segment], u)
	}
	var out []segmentGroup
	for v, us := range by {
		out = append(out, segmentGroup{value: v, units: us})
	}
	slices.SortFunc(out, func(a, b segmentGroup) int {
		if c := cmp.Compare(len(b.units), len(a.units)); c != 0 {
			return c
		}
		return cmp.Compare(a.value, b.value)
	})
	if len(out) > MaxSegments {
		other := segmentGroup{value: OtherSegment}
		for _, g := range out[MaxSegments-1:] {
			other.units = append(other.units, g.units...)
		}
		out = append(out[:MaxSegments-1], other)
	}
	return out
}

// moments sums the units' values per arm and metric, as the overall
// results' moments are summed (no pre-exposure covariate).
func moments(units []db.ExperimentListUnitSegmentsRow, arms int) []db.ExperimentListMetricMomentsRow {
	type key struct {
		arm    int32
		metric string
	}
	sums := map[key]*db.ExperimentListMetricMomentsRow{}
	add := func(arm int32, metric string, y float64) {
		if math.IsNaN(y) { // no value of this metric
			return
		}
		k := key{arm, metric}
		r := sums[k]
		if r == nil {
			r = &db.ExperimentListMetricMomentsRow{Arm: arm, Metric: metric}
			sums[k] = r
		}
		r.N++
		r.Sum += y
		r.SumSquares += y * y
	}
	for _, u := range units {
		if int(u.Arm) >= arms {
			continue
		}
		add(u.Arm, ThumbsUpRate, u.Thumbs)
		add(u.Arm, AvgRating, u.Rating)
		add(u.Arm, CorrectionRate, u.Corrected)
		add(u.Arm, Latency, u.Latency)
		add(u.Arm, AvgAccuracy, u.Accuracy)
		add(u.Arm, AvgHelpfulness, u.Helpfulness)
		add(u.Arm, AvgClarity, u.Clarity)
		add(u.Arm, AvgSafety, u.Safety)
		add(u.Arm, AvgJudgeScore, u.Judge)
	}
	out := make([]db.ExperimentListMetricMomentsRow, 0, len(sums))
	for _, r := range sums {
		out = append(out, *r)
	}
	return out
}

// correctAcrossSegments adjusts each metric's treatment p-value across the
// segments by its family's method, and draws the intervals at the
// corrected level.
func correctAcrossSegments(e db.Experiment, segs []Segment, analysers []*analyser) {
	all := append(append([]string{}, e.Metrics...), e.Guardrails...)
	for k, metric := range all {
		method := e.GoalCorrection
		if k >= len(e.Metrics) {
			method = e.GuardrailCorrection
		}
		var ps []float64
		var tested []int
		for i, a := range analysers {
			as := armStats(a.rows, len(a.arms), metric, false)
			if eff, err := stats.Compare(as[0], as[1], a.test(resultAlpha)); err == nil {
				ps, tested = append(ps, *eff.PValue), append(tested, i)
			}
		}
		adjusted, alpha := stats.Adjust(method, ps, resultAlpha)
		for i, a := range analysers {
			j := slices.Index(tested, i)
			if j < 0 {
				continue // not enough data in this segment: already said so
			}
			as := armStats(a.rows, len(a.arms), metric, false)
			segs[i].Metrics[k].Arms[1] = ArmResult{Arm: segs[i].Metrics[k].Arms[1].Arm, N: segs[i].Metrics[k].Arms[1].N, Mean: segs[i].Metrics[k].Arms[1].Mean}
			a.frequentist(&segs[i].Metrics[k], as, k, alpha, &adjusted[j])
		}
	}
}

// markOpposite lists the metrics whose segment effect points against the
// overall one, and which of them harm the segment.
func markOpposite(seg *Segment, overall Results) {
	for k, mr := range seg.Metrics {
		if k >= len(overall.Metrics) || len(mr.Arms) < 2 || len(overall.Metrics[k].Arms) < 2 {
			continue
		}
		here, all := mr.Arms[1].RelativeChange, overall.Metrics[k].Arms[1].RelativeChange
		if here == nil || all == nil || *here == 0 || *all == 0 || (*here > 0) == (*all > 0) {
			continue
		}
		seg.Opposite = append(seg.Opposite, mr.Metric)
		if (*here > 0) != higherIsBetter[mr.Metric] {
			seg.Harmful = append(seg.Harmful, mr.Metric)
		}
	}
}
