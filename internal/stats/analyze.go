package stats

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/curate/curate/internal/errs"
)

// Engines of an analysis.
const (
	EngineFrequentist = "frequentist"
	EngineBayesian    = "bayesian"
)

// Limits on an analysis's numbers. Within them every sum, square and
// product the engine forms stays finite; what still overflows (a relative
// effect over a control mean next to 0, an interval at an alpha of 1e-20)
// is refused by the field at fault.
const (
	MaxArms = 20
	// MaxUnits bounds an arm's n: a trillion units.
	MaxUnits = 1e12
	// MaxSum bounds the magnitude of a sum of values; MaxSquares of a sum
	// of squares or of products.
	MaxSum     = 1e150
	MaxSquares = 1e300
)

// Analysis is an A/B analysis of one metric: each arm against arm 0 (the
// control) by the chosen engine, and the sample-ratio check when
// SRMWeights are given.
type Analysis struct {
	Test Test
	Arms []Arm
	// Engine is EngineFrequentist (the default when empty) or
	// EngineBayesian.
	Engine string
	// Prior is the Bayesian engine's prior; nil is the flat prior.
	Prior      *Prior
	SRMWeights []float64
}

// ArmResult is one treatment arm against the control: Effect under the
// frequentist engine or Posterior under the Bayesian one, or, when the
// data cannot answer yet (fewer than 2 units, no variance, a control mean
// of 0 for a relative effect), Error saying why.
type ArmResult struct {
	Arm       int
	Effect    *Effect
	Posterior *Posterior
	Error     string
}

// Report is an analysis's answer.
type Report struct {
	Results   []ArmResult
	SRMPValue *float64
}

// Analyze validates the analysis and runs it. Invalid input is an
// *errs.Invalid naming the fields as POST /api/stats/analyze spells them
// (alpha, arms[1].successes, prior.variance, srm_weights); every number of
// a Report is finite.
func Analyze(a Analysis) (Report, error) {
	if err := a.Validate(); err != nil {
		return Report{}, err
	}
	out := Report{Results: []ArmResult{}}
	if len(a.SRMWeights) > 0 {
		counts := make([]float64, len(a.Arms))
		for i, arm := range a.Arms {
			counts[i] = arm.N
		}
		p, err := SRM(counts, a.SRMWeights)
		switch {
		case err == nil:
			out.SRMPValue = &p
		case !isNotEnough(err):
			return Report{}, fieldInvalid(err, 0)
		}
	}
	for i := 1; i < len(a.Arms); i++ {
		r := ArmResult{Arm: i}
		var err error
		if a.Engine == EngineBayesian {
			var p Posterior
			if p, err = CompareBayesian(a.Arms[0], a.Arms[i], a.Test, Bayesian{Prior: a.Prior}); err == nil {
				r.Posterior = &p
			}
		} else {
			var e Effect
			if e, err = Compare(a.Arms[0], a.Arms[i], a.Test); err == nil {
				r.Effect = &e
			}
		}
		switch {
		case err == nil:
		case isNotEnough(err):
			r.Error = err.Error()
		default:
			return Report{}, fieldInvalid(err, i)
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// fieldInvalid turns an engine's error on the comparison of arm i with the
// control into a message on the request's field: the control is arms[0],
// the treatment arms[i].
func fieldInvalid(err error, arm int) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return errs.InvalidField(fmt.Sprintf("arms[%d]", arm), "%v", err)
	}
	field := fe.field
	for _, r := range []struct {
		role string
		idx  int
	}{{"control", 0}, {"treatment", arm}} {
		if rest, ok := strings.CutPrefix(field, r.role); ok && (rest == "" || rest[0] == '.') {
			field = fmt.Sprintf("arms[%d]%s", r.idx, rest)
			break
		}
	}
	return errs.InvalidField(field, "%s", fe.msg)
}

// Validate checks every field of the analysis, each problem a message on
// its field.
func (a Analysis) Validate() error {
	v := &errs.Invalid{}
	t := a.Test
	if !(t.Alpha > 0 && t.Alpha < 1) {
		v.Add("alpha", "must lie between 0 and 1")
	}
	bayesian := a.Engine == EngineBayesian
	switch a.Engine {
	case "", EngineFrequentist, EngineBayesian:
	default:
		v.Add("engine", "must be frequentist or bayesian")
	}
	switch t.Alternative {
	case "", TwoSided:
	case Greater, Less:
		if bayesian {
			v.Add("alternative", "the bayesian engine answers a two-sided credible interval, with the chance to win for one side")
		}
	default:
		v.Add("alternative", "must be two-sided, greater or less")
	}
	if t.Sequential != 0 {
		switch {
		case bayesian:
			v.Add("sequential", "is taken by the frequentist engine only")
		case !(t.Sequential >= 1 && t.Sequential <= MaxUnits):
			v.Add("sequential.tuning", "must be a number of units from 1 to %g", MaxUnits)
		case (t.Alternative == Greater || t.Alternative == Less) && t.Alpha >= 0.5:
			v.Add("alpha", "must be below 0.5 for a one-sided confidence sequence")
		}
	}
	if p := a.Prior; p != nil {
		switch {
		case !bayesian:
			v.Add("prior", "is taken by the bayesian engine only")
		default:
			if !allFinite(p.Mean) || math.Abs(p.Mean) > MaxSum {
				v.Add("prior.mean", "must be a number of magnitude at most %g", MaxSum)
			}
			if !(p.Variance > 0) || p.Variance > MaxSquares {
				v.Add("prior.variance", "must be a number above 0 and at most %g", MaxSquares)
			}
		}
	}
	if t.Metric != MetricMean && t.Metric != MetricProportion {
		v.Add("metric", "must be mean or proportion")
	}
	switch {
	case len(a.Arms) < 2:
		v.Add("arms", "give at least 2 arms: the control first")
	case len(a.Arms) > MaxArms:
		v.Add("arms", "at most %d arms", MaxArms)
	}
	if len(a.SRMWeights) > 0 {
		sum := 0.0
		for i, w := range a.SRMWeights {
			if !(w > 0 && w <= 1) {
				v.Add(fmt.Sprintf("srm_weights[%d]", i), "must be above 0 and at most 1")
			}
			sum += w
		}
		if len(a.SRMWeights) != len(a.Arms) {
			v.Add("srm_weights", "give one weight per arm (%d), not %d", len(a.Arms), len(a.SRMWeights))
		} else if !(math.Abs(sum-1) <= 1e-6) {
			v.Add("srm_weights", "must sum to 1, not %g", sum)
		}
	}
	withCov := 0
	for i, arm := range a.Arms {
		if arm.Covariate != nil {
			withCov++
		}
		arm.validate(v, fmt.Sprintf("arms[%d].", i), t.Metric)
	}
	if withCov > 0 && withCov < len(a.Arms) {
		v.Add("arms", "give the covariate for every arm or for none")
	}
	return v.Err()
}

// validate checks that an arm's numbers are finite, within the limits and
// possible for one set of values.
func (a Arm) validate(v *errs.Invalid, f, metric string) {
	within := func(name string, x, lo, hi float64) bool {
		if !(x >= lo && x <= hi) {
			v.Add(f+name, "must be a number from %g to %g", lo, hi)
			return false
		}
		return true
	}
	if !within("n", a.N, 0, MaxUnits) {
		return
	}
	switch metric {
	case MetricMean:
		okSum := within("sum", a.Sum, -MaxSum, MaxSum)
		if within("sum_squares", a.SumSquares, 0, MaxSquares) && okSum && a.N >= 2 {
			if _, err := sampleVariance(a.N, a.Sum, a.SumSquares); err != nil {
				v.Add(f+"sum_squares", "is smaller than sum²/n: not the sums of one set of values")
			}
		}
		if c := a.Covariate; c != nil {
			ok := within("covariate.sum", c.Sum, -MaxSum, MaxSum)
			ok = within("covariate.sum_squares", c.SumSquares, 0, MaxSquares) && ok
			ok = within("covariate.cross_sum", c.CrossSum, -MaxSquares, MaxSquares) && ok
			if !ok || !okSum || a.N < 2 {
				return
			}
			vx, err := sampleVariance(a.N, c.Sum, c.SumSquares)
			if err != nil {
				v.Add(f+"covariate.sum_squares", "is smaller than covariate.sum²/n: not the sums of one set of values")
				return
			}
			vy, err := sampleVariance(a.N, a.Sum, a.SumSquares)
			cxy := (c.CrossSum - c.Sum*a.Sum/a.N) / (a.N - 1)
			// Cauchy–Schwarz: the covariance of one set of units' values is
			// at most the product of their standard deviations.
			slack := 1e-9*math.Sqrt(vx*vy) + 1e-12*(math.Abs(c.CrossSum)+math.Abs(c.Sum*a.Sum/a.N))/(a.N-1)
			if err == nil && math.Abs(cxy) > math.Sqrt(vx*vy)+slack {
				v.Add(f+"covariate.cross_sum", "is not a sum of products of these values: the covariance exceeds the product of the standard deviations")
			}
		}
	case MetricProportion:
		within("successes", a.Successes, 0, a.N)
		if c := a.Covariate; c != nil {
			if within("covariate.sum", c.Sum, 0, a.N) {
				within("covariate.cross_sum", c.CrossSum, max(0, a.Successes+c.Sum-a.N), min(a.Successes, c.Sum))
			}
		}
	}
}
