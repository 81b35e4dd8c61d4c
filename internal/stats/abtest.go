package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Arm is one arm's sufficient statistics for a metric: for a mean metric
// the number of units, the sum and the sum of squares of their values; for
// a proportion, Successes out of N. Covariate, when set, holds the same
// units' pre-period values for CUPED.
type Arm struct {
	N          float64
	Sum        float64
	SumSquares float64
	Successes  float64
	Covariate  *Covariate
}

// Covariate is the pre-period value x of an arm's units: Σx, Σx² and Σxy
// with the metric's values y. For a proportion x is 0 or 1 as y is: Sum
// counts the units with a pre-period success, CrossSum those with a
// success in both periods, and SumSquares is not used (x² = x).
type Covariate struct {
	Sum        float64
	SumSquares float64
	CrossSum   float64
}

// Metric kinds.
const (
	MetricMean       = "mean"
	MetricProportion = "proportion"
)

// Alternatives of a test.
const (
	TwoSided = "two-sided"
	Greater  = "greater" // treatment above control
	Less     = "less"
)

// Test says how to compare an arm with the control.
type Test struct {
	Metric      string
	Relative    bool
	Alpha       float64
	Alternative string
	// Sequential, when above 0, is the tuning parameter N of an
	// always-valid confidence sequence (Waudby-Smith et al. 2023): results
	// may be looked at any number of times without inflating false
	// positives.
	Sequential float64
}

// Effect is one arm's difference from the control: the point estimate
// (absolute, or relative to the control's mean), its standard error, the
// interval at the test's level (nil on the unbounded side of a one-sided
// test) and, for a fixed-horizon test, the p-value.
type Effect struct {
	Expected float64
	SE       float64
	CI       [2]*float64
	PValue   *float64
	// DF is Welch–Satterthwaite's degrees of freedom.
	DF float64
	// Theta is CUPED's coefficient, 0 when no covariate was used.
	Theta float64
}

// moments are an arm's mean and unit variance for a metric, CUPED applied
// when theta is not 0.
type moments struct {
	n, mean, variance float64
	// raw and rawVariance are the unadjusted mean (the relative effect's
	// denominator) and unit variance.
	raw, rawVariance float64
	// preVariance and cov are the covariate's variance and its covariance
	// with the metric (0 without a covariate).
	preVariance, cov float64
}

// moments reads an arm's statistics; errors name the arm's field at fault
// (see fieldError).
func (a Arm) moments(metric string) (moments, error) {
	if a.N < 2 {
		return moments{}, notEnough("an arm needs at least 2 units, not %v", a.N)
	}
	m := moments{n: a.N}
	if metric == MetricProportion {
		if a.Successes < 0 || a.Successes > a.N {
			return moments{}, inField("successes", "%v must lie between 0 and n %v", a.Successes, a.N)
		}
		p := a.Successes / a.N
		m.raw, m.rawVariance = p, p*(1-p)
	} else {
		v, err := sampleVariance(a.N, a.Sum, a.SumSquares)
		if err != nil {
			return moments{}, inField("sum_squares", "%v is smaller than sum²/n: not the sums of one set of values", a.SumSquares)
		}
		m.raw, m.rawVariance = a.Sum/a.N, v
	}
	m.mean, m.variance = m.raw, m.rawVariance
	if a.Covariate != nil {
		var err error
		if m.preVariance, m.cov, err = a.covTerms(metric); err != nil {
			return moments{}, err
		}
	}
	if !allFinite(m.raw, m.rawVariance, m.rawVariance/m.n) {
		return moments{}, inField("", "the sums are too large for a finite mean and variance")
	}
	return m, nil
}

// sampleVariance is the unbiased variance from n, Σx and Σx²; a small
// negative value from rounding a constant metric is 0, a larger one means
// the sums cannot come from one set of values.
func sampleVariance(n, sum, sumSquares float64) (float64, error) {
	v := (sumSquares - sum*sum/n) / (n - 1)
	if v < 0 && v > -1e-9*math.Abs(sumSquares) {
		v = 0
	}
	if v < 0 {
		return 0, invalid("sum_squares %v is smaller than sum²/n", sumSquares)
	}
	return v, nil
}

// covTerms are the covariate's variance and its covariance with the
// metric, as GrowthBook's RegressionAdjustedStatistic computes them: with
// n − 1 for a mean, and with n (the Bernoulli variance) for a proportion.
func (a Arm) covTerms(metric string) (vx, cxy float64, err error) {
	c := a.Covariate
	if metric == MetricProportion {
		q := c.Sum / a.N
		return q * (1 - q), c.CrossSum/a.N - a.Successes*c.Sum/(a.N*a.N), nil
	}
	vx, err = sampleVariance(a.N, c.Sum, c.SumSquares)
	if err != nil {
		return 0, 0, inField("covariate.sum_squares", "%v is smaller than covariate.sum²/n: not the sums of one set of values", c.SumSquares)
	}
	return vx, (c.CrossSum - c.Sum*a.Sum/a.N) / (a.N - 1), nil
}

// Theta is CUPED's coefficient as GrowthBook computes it (compute_theta
// in gbstats/models/statistics.py): the two arms' data taken as one
// sample, their n, sums, sums of squares and sums of products added
// together, and θ = cov(y, x) / var(x) of that joint sample. It fails with
// ErrNotEnoughData when the joint pre-period values or metric values do
// not vary (GrowthBook then analyses the metric unadjusted, as Compare
// does).
func Theta(metric string, control, treatment Arm) (float64, error) {
	c, t := control.Covariate, treatment.Covariate
	if c == nil || t == nil {
		return 0, invalid("the covariate is given for one arm and not the other")
	}
	n := control.N + treatment.N
	var vy, vx, cov float64
	if metric == MetricProportion {
		p, q := (control.Successes+treatment.Successes)/n, (c.Sum+t.Sum)/n
		vy, vx = p*(1-p), q*(1-q)
		cov = (c.CrossSum+t.CrossSum)/n - (control.Successes+treatment.Successes)*(c.Sum+t.Sum)/(n*n)
	} else {
		sy, sx := control.Sum+treatment.Sum, c.Sum+t.Sum
		vy = (control.SumSquares + treatment.SumSquares - sy*sy/n) / (n - 1)
		vx = (c.SumSquares + t.SumSquares - sx*sx/n) / (n - 1)
		cov = (c.CrossSum + t.CrossSum - sx*sy/n) / (n - 1)
	}
	if !(vx > 0) || !(vy > 0) {
		return 0, notEnough("the pre-period values or the metric do not vary")
	}
	th := cov / vx
	if math.IsNaN(th) || math.IsInf(th, 0) {
		return 0, inField("covariate", "the sums are too large or too small for a finite CUPED coefficient")
	}
	return th, nil
}

// adjust applies CUPED with θ to an arm's moments: mean ȳ − θx̄ and unit
// variance var(y) + θ²var(x) − 2θcov(x, y).
func (m *moments) adjust(theta float64, covariateSum float64) {
	m.mean = m.raw - theta*covariateSum/m.n
	m.variance = m.rawVariance + theta*theta*m.preVariance - 2*theta*m.cov
	if m.variance < 0 && m.variance > -1e-9*m.rawVariance {
		m.variance = 0 // rounding of a covariate that explains the metric
	}
}

// estimate is an effect before its interval: the point estimate, its
// standard error, the degrees of freedom and the control's unadjusted mean.
type estimate struct {
	expected, se, df, theta float64
	controlMean             float64
	n                       float64 // units in both arms
}

// estimateEffect is the difference of treatment and control as GrowthBook's
// EffectMoments computes it: absolute, or relative to the control's
// unadjusted mean by the delta method, CUPED-adjusted when both arms carry a
// covariate (θ from Theta; with θ = 0 the metric is analysed unadjusted).
func estimateEffect(control, treatment Arm, t Test) (estimate, error) {
	c, err := control.moments(t.Metric)
	if err != nil {
		return estimate{}, inArm("control", err)
	}
	tr, err := treatment.moments(t.Metric)
	if err != nil {
		return estimate{}, inArm("treatment", err)
	}
	var theta float64
	switch {
	case (control.Covariate == nil) != (treatment.Covariate == nil):
		return estimate{}, inField("covariate", "is given for one arm and not the other: give it for both or neither")
	case control.Covariate != nil:
		th, err := Theta(t.Metric, control, treatment)
		switch {
		case err == nil:
			theta = th
			c.adjust(theta, control.Covariate.Sum)
			tr.adjust(theta, treatment.Covariate.Sum)
		case !isNotEnough(err):
			return estimate{}, err
		}
	}
	if !(c.variance > 0 || tr.variance > 0) {
		return estimate{}, notEnough("the metric does not vary in either arm")
	}
	if c.variance < 0 || tr.variance < 0 {
		return estimate{}, inField("covariate.cross_sum", "the CUPED-adjusted variance is negative: the sums of products do not fit the sums")
	}
	vc, vt := c.variance/c.n, tr.variance/tr.n
	e := estimate{expected: tr.mean - c.mean, theta: theta, controlMean: c.raw, n: c.n + tr.n}
	variance := vc + vt
	if t.Relative {
		m := c.raw
		if m == 0 {
			return estimate{}, notEnough("the control's mean is 0: a relative effect is undefined")
		}
		// GrowthBook's delta method for (a_t − a_c) / |m_c|, a the adjusted
		// means and m_c the control's unadjusted mean
		// (frequentist_variance_relative_cuped; with θ = 0 it is
		// variance_of_ratios): the treatment's adjusted variance over m²,
		// and the control's var(y)·m_t²/m² − 2θ·cov·m_t/m + θ²·var(x), over
		// n_c·m², m_t the treatment's unadjusted mean.
		// Each term is divided by m before it is squared or multiplied, so
		// that the figures stay finite at any scale of the values (a mean of
		// 1e138 with a spread of 1e137 squares to nothing float64 holds); what
		// still overflows is a control mean next to 0 beside the values'
		// own spread.
		r := tr.raw / m
		sdT := math.Sqrt(vt) / m
		sdC := math.Sqrt(c.rawVariance) / m * r
		cov := theta * c.cov / m * (r / m)
		pre := theta * math.Sqrt(c.preVariance) / m
		e.expected /= math.Abs(m)
		variance = sdT*sdT + (sdC*sdC-2*cov+pre*pre)/c.n
		if !allFinite(e.expected, variance) {
			field := "sum"
			if t.Metric == MetricProportion {
				field = "successes"
			}
			return estimate{}, inArm("control", inField(field, "gives a mean of %g, too close to 0 beside the values' spread for a finite relative effect", m))
		}
	}
	e.se = math.Sqrt(variance)
	if !(e.se > 0) {
		return estimate{}, notEnough("the effect's standard error is 0")
	}
	if !allFinite(e.expected, e.se) {
		return estimate{}, inArm("treatment", inField("", "the numbers are too large for a finite effect"))
	}
	// Welch–Satterthwaite, each share of the variance taken before
	// squaring so that large variances do not overflow.
	sc, st := vc/(vc+vt), vt/(vc+vt)
	e.df = 1 / (st*st/(tr.n-1) + sc*sc/(c.n-1))
	return e, nil
}

// Compare estimates the effect of treatment against control: Welch's
// t-test on the absolute difference of means, or on the relative one by
// the delta method, CUPED-adjusted when both arms carry a covariate (θ from
// Theta; the relative effect divides by the control's unadjusted mean),
// fixed-horizon or, with t.Sequential, as a confidence sequence. The
// numbers agree with GrowthBook's TwoSidedTTest, its one-sided t-tests and
// its two-sided SequentialTwoSidedTTest.
func Compare(control, treatment Arm, t Test) (Effect, error) {
	if !(t.Alpha > 0 && t.Alpha < 1) {
		return Effect{}, inField("alpha", "%v must lie in (0, 1)", t.Alpha)
	}
	est, err := estimateEffect(control, treatment, t)
	if err != nil {
		return Effect{}, err
	}
	e := Effect{Expected: est.expected, SE: est.se, DF: est.df, Theta: est.theta}
	if t.Sequential > 0 {
		e, err = sequential(e, est.n, t)
	} else {
		e, err = fixedHorizon(e, t)
	}
	if err != nil {
		return Effect{}, err
	}
	for _, x := range []*float64{e.CI[0], e.CI[1], e.PValue} {
		if x != nil && (math.IsNaN(*x) || math.IsInf(*x, 0)) {
			return Effect{}, inField("alpha", "%v gives no finite interval", t.Alpha)
		}
	}
	return e, nil
}

// fixedHorizon is Welch's t-test of the estimate: its p-value and interval.
func fixedHorizon(e Effect, t Test) (Effect, error) {
	dist := studentsT(e.DF)
	stat := e.Expected / e.SE
	var p float64
	switch t.Alternative {
	case Greater:
		p = 1 - dist.CDF(stat)
		lo := e.Expected - dist.Quantile(1-t.Alpha)*e.SE
		e.CI = [2]*float64{&lo, nil}
	case Less:
		p = dist.CDF(stat)
		hi := e.Expected + dist.Quantile(1-t.Alpha)*e.SE
		e.CI = [2]*float64{nil, &hi}
	case TwoSided, "":
		p = 2 * (1 - dist.CDF(math.Abs(stat)))
		w := dist.Quantile(1-t.Alpha/2) * e.SE
		lo, hi := e.Expected-w, e.Expected+w
		e.CI = [2]*float64{&lo, &hi}
	default:
		return Effect{}, inField("alternative", "%q must be two-sided, greater or less", t.Alternative)
	}
	e.PValue = &p
	return e, nil
}

// distribution is what a test needs of its reference distribution.
type distribution interface {
	CDF(x float64) float64
	Quantile(p float64) float64
}

// studentsT is Student's t with df degrees of freedom. Beyond 10⁸ it is
// the standard normal, which it equals there to 10⁻⁸, while gonum's
// incomplete beta function loses digits at such degrees of freedom.
func studentsT(df float64) distribution {
	if df > 1e8 {
		return distuv.UnitNormal
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
}

// allFinite reports whether every x is a real number.
func allFinite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// fieldError is invalid input traced to one field of a comparison:
// "alpha", "prior.variance", or an arm's field under "control." or
// "treatment." (Analyze names the arm by its place). It wraps ErrInvalid.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return ErrInvalid.Error() + ": " + e.field + ": " + e.msg }
func (e *fieldError) Unwrap() error { return ErrInvalid }

func inField(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// inArm puts an arm's field errors under the arm's name.
func inArm(arm string, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	field := arm
	if fe.field != "" {
		field += "." + fe.field
	}
	return &fieldError{field: field, msg: fe.msg}
}

func isNotEnough(err error) bool { return errors.Is(err, ErrNotEnoughData) }

// SequentialRho is the mixing parameter of a confidence sequence tightest
// around tuning units (Waudby-Smith et al. 2023, eq. 161):
// ρ = sqrt((−2 ln α + ln(−2 ln α + 1)) / N).
func SequentialRho(alpha, tuning float64) float64 {
	la := math.Log(alpha)
	return math.Sqrt((-2*la + math.Log(-2*la+1)) / tuning)
}

// SequentialHalfWidth is the half-width of the two-sided asymptotic
// confidence sequence (Waudby-Smith et al. 2023, eq. 9) for n units with
// per-unit variance s2: sqrt(s2) · sqrt(2(nρ²+1) ln(sqrt(nρ²+1)/α) / (nρ)²).
func SequentialHalfWidth(s2, n, alpha, tuning float64) float64 {
	return sequentialWidth(math.Sqrt(s2), n, alpha, tuning)
}

// sequentialWidth is SequentialHalfWidth from the per-unit standard
// deviation, which stays finite where its square would not.
func sequentialWidth(sd, n, alpha, tuning float64) float64 {
	rho := SequentialRho(alpha, tuning)
	nr2 := n * rho * rho
	return sd * math.Sqrt(2*(nr2+1)*math.Log(math.Sqrt(nr2+1)/alpha)/(n*n*rho*rho))
}

// sequential turns an estimate into a confidence sequence: the per-unit
// standard deviation is SE times the square root of the units in both
// arms. A one-sided sequence is the matching side of the two-sided one at
// 2α, so it needs α below 0.5.
func sequential(e Effect, n float64, t Test) (Effect, error) {
	if (t.Alternative == Greater || t.Alternative == Less) && t.Alpha >= 0.5 {
		return Effect{}, inField("alpha", "must be below 0.5 for a one-sided confidence sequence")
	}
	sd := e.SE * math.Sqrt(n)
	switch t.Alternative {
	case Greater:
		lo := e.Expected - sequentialWidth(sd, n, 2*t.Alpha, t.Sequential)
		e.CI = [2]*float64{&lo, nil}
	case Less:
		hi := e.Expected + sequentialWidth(sd, n, 2*t.Alpha, t.Sequential)
		e.CI = [2]*float64{nil, &hi}
	case TwoSided, "":
		w := sequentialWidth(sd, n, t.Alpha, t.Sequential)
		lo, hi := e.Expected-w, e.Expected+w
		e.CI = [2]*float64{&lo, &hi}
	default:
		return Effect{}, inField("alternative", "%q must be two-sided, greater or less", t.Alternative)
	}
	return e, nil
}

// SRM is the sample-ratio-mismatch test: the chi-square goodness-of-fit
// p-value of the arms' unit counts against the configured weights. Below
// SRMThreshold the split is broken and the results are not to be trusted.
func SRM(counts, weights []float64) (float64, error) {
	if len(counts) != len(weights) || len(counts) < 2 {
		return 0, invalid("%d counts for %d weights: give one weight per arm, at least 2", len(counts), len(weights))
	}
	var total, wsum float64
	for i := range counts {
		if !(counts[i] >= 0) || !(weights[i] > 0) || !allFinite(counts[i], weights[i]) {
			return 0, invalid("counts must be at least 0 and weights above 0")
		}
		total += counts[i]
		wsum += weights[i]
	}
	if total == 0 {
		return 0, notEnough("no units yet")
	}
	var x2 float64
	for i := range counts {
		exp := total * weights[i] / wsum
		x2 += (counts[i] - exp) * (counts[i] - exp) / exp
	}
	p := 1 - distuv.ChiSquared{K: float64(len(counts) - 1)}.CDF(x2)
	if !allFinite(total, x2, p) {
		return 0, inField("srm_weights", "the counts and weights are too far apart in size for a finite chi-square statistic")
	}
	return p, nil
}

// SRMThreshold is the p-value below which a sample ratio is a mismatch.
const SRMThreshold = 0.001

// Holm adjusts p-values for testing several metrics at once
// (Holm–Bonferroni: step-down, family-wise error rate).
func Holm(ps []float64) []float64 {
	order := sortedOrder(ps)
	m := float64(len(ps))
	out := make([]float64, len(ps))
	running := 0.0
	for rank, i := range order {
		adj := min(1, (m-float64(rank))*ps[i])
		running = max(running, adj)
		out[i] = running
	}
	return out
}

// BenjaminiHochberg adjusts p-values to control the false discovery rate
// (step-up).
func BenjaminiHochberg(ps []float64) []float64 {
	order := sortedOrder(ps)
	m := float64(len(ps))
	out := make([]float64, len(ps))
	running := 1.0
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		adj := min(1, ps[i]*m/float64(k+1))
		running = min(running, adj)
		out[i] = running
	}
	return out
}

func sortedOrder(ps []float64) []int {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case ps[a] < ps[b]:
			return -1
		case ps[a] > ps[b]:
			return 1
		}
		return 0
	})
	return order
}

// Power holds the two answers of a two-sample power calculation.
type Power struct {
	// MDE is the smallest absolute difference of means the current sample
	// detects with the given power.
	MDE float64
	// NeededPerArm is the units per arm to detect Effect.
	NeededPerArm float64
}

// PowerFor answers, for a metric with unit variance v in each arm, n units
// per arm, a two-sided test at alpha and the wanted power (0.8 usually):
// the minimum detectable absolute effect now, and the units per arm needed
// for effect (normal approximation: n = 2v(z₁₋α/₂ + z_power)²/effect²).
func PowerFor(v, nPerArm, alpha, power, effect float64) (Power, error) {
	if !(v > 0) || !(nPerArm >= 2) || !(alpha > 0 && alpha < 1) || !(power > 0 && power < 1) {
		return Power{}, invalid("variance above 0, at least 2 units per arm, alpha and power in (0, 1)")
	}
	z := distuv.UnitNormal
	k := z.Quantile(1-alpha/2) + z.Quantile(power)
	out := Power{MDE: k * math.Sqrt(2*v/nPerArm)}
	if effect != 0 {
		out.NeededPerArm = math.Ceil(2 * v * k * k / (effect * effect))
	}
	return out, nil
}
