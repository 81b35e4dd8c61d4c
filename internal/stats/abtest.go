package stats

import (
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
// with the metric's values y.
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
}

// moments are an arm's mean and unit variance for a metric, CUPED applied
// when theta is set.
type moments struct {
	n, mean, variance float64
	// raw is the unadjusted mean (the relative effect's denominator).
	raw float64
}

func (a Arm) moments(metric string) (moments, error) {
	if a.N < 2 {
		return moments{}, notEnough("an arm needs at least 2 units, not %v", a.N)
	}
	if metric == MetricProportion {
		if a.Successes < 0 || a.Successes > a.N {
			return moments{}, invalid("successes %v must lie between 0 and n %v", a.Successes, a.N)
		}
		p := a.Successes / a.N
		return moments{n: a.N, mean: p, raw: p, variance: p * (1 - p)}, nil
	}
	m := a.Sum / a.N
	v := (a.SumSquares - a.Sum*a.Sum/a.N) / (a.N - 1)
	if v < 0 && v > -1e-9*math.Abs(a.SumSquares) {
		v = 0 // rounding of a constant metric
	}
	if v < 0 {
		return moments{}, invalid("sum_squares %v is smaller than sum²/n: not the sums of one set of values", a.SumSquares)
	}
	return moments{n: a.N, mean: m, raw: m, variance: v}, nil
}

// covariance terms of an arm with its covariate: var(x) and cov(x, y).
func (a Arm) covTerms() (vx, cxy float64) {
	c := a.Covariate
	vx = (c.SumSquares - c.Sum*c.Sum/a.N) / (a.N - 1)
	cxy = (c.CrossSum - c.Sum*a.Sum/a.N) / (a.N - 1)
	return vx, cxy
}

// Theta is CUPED's coefficient, pooled over the arms: the within-arm
// covariance of the pre-period value with the metric over its within-arm
// variance.
func Theta(arms []Arm) (float64, error) {
	var num, den float64
	for _, a := range arms {
		if a.Covariate == nil {
			return 0, invalid("the covariate is given for some arms and not others")
		}
		vx, cxy := a.covTerms()
		num += cxy * (a.N - 1)
		den += vx * (a.N - 1)
	}
	if den <= 0 {
		return 0, notEnough("the pre-period values do not vary")
	}
	return num / den, nil
}

// Compare estimates the effect of treatment against control: Welch's
// t-test on the absolute difference of means, or on the relative one by
// the delta method, CUPED-adjusted when theta is given (θ from Theta; the
// relative effect divides by the control's unadjusted mean), fixed-horizon
// or, with t.Sequential, as a confidence sequence.
func Compare(control, treatment Arm, theta *float64, t Test) (Effect, error) {
	if !(t.Alpha > 0 && t.Alpha < 1) {
		return Effect{}, invalid("alpha %v must lie in (0, 1)", t.Alpha)
	}
	c, err := control.moments(t.Metric)
	if err != nil {
		return Effect{}, err
	}
	tr, err := treatment.moments(t.Metric)
	if err != nil {
		return Effect{}, err
	}
	// Variances of the control's adjusted mean a_c and raw mean m_c, and
	// their covariance (all one number without CUPED).
	vRaw := c.variance / c.n
	covAdjRaw := vRaw
	if theta != nil {
		if control.Covariate == nil || treatment.Covariate == nil {
			return Effect{}, invalid("the covariate is given for some arms and not others")
		}
		th := *theta
		adjust := func(a Arm, m *moments) (cxy float64) {
			vx, cxy := a.covTerms()
			m.mean -= th * a.Covariate.Sum / a.N
			m.variance += th*th*vx - 2*th*cxy
			return cxy
		}
		cxyC := adjust(control, &c)
		adjust(treatment, &tr)
		covAdjRaw = (control.variance(t.Metric) - th*cxyC) / c.n
	}
	if !(c.variance > 0 || tr.variance > 0) {
		return Effect{}, notEnough("the metric does not vary in either arm")
	}
	vc, vt := c.variance/c.n, tr.variance/tr.n
	d := tr.mean - c.mean
	e := Effect{Expected: d, SE: math.Sqrt(vc + vt)}
	if t.Relative {
		m := c.raw
		if m == 0 {
			return Effect{}, notEnough("the control's mean is 0: a relative effect is undefined")
		}
		// Delta method for g = (a_t − a_c) / m_c: ∂g/∂a_t = 1/m,
		// ∂g/∂a_c = −1/m, ∂g/∂m_c = −d/m².
		m2 := m * m
		e.Expected = d / m
		e.SE = math.Sqrt(vt/m2 + vc/m2 + d*d/(m2*m2)*vRaw + 2*d/(m2*m)*covAdjRaw)
	}
	if !(e.SE > 0) || math.IsNaN(e.SE) {
		return Effect{}, notEnough("the effect's standard error is 0")
	}
	e.DF = (vc + vt) * (vc + vt) / (vt*vt/(tr.n-1) + vc*vc/(c.n-1))
	if t.Sequential > 0 {
		return sequential(e, c.n+tr.n, t)
	}
	dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: e.DF}
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
		return Effect{}, invalid("alternative %q must be two-sided, greater or less", t.Alternative)
	}
	e.PValue = &p
	return e, nil
}

// variance is the metric's unadjusted unit variance.
func (a Arm) variance(metric string) float64 {
	m, _ := a.moments(metric)
	return m.variance
}

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
	rho := SequentialRho(alpha, tuning)
	nr2 := n * rho * rho
	return math.Sqrt(s2) * math.Sqrt(2*(nr2+1)*math.Log(math.Sqrt(nr2+1)/alpha)/(n*n*rho*rho))
}

// sequential turns an estimate into a confidence sequence: the per-unit
// variance is SE² times the units in both arms. A one-sided sequence is the
// matching side of the two-sided one at 2α.
func sequential(e Effect, n float64, t Test) (Effect, error) {
	s2 := e.SE * e.SE * n
	switch t.Alternative {
	case Greater:
		lo := e.Expected - SequentialHalfWidth(s2, n, 2*t.Alpha, t.Sequential)
		e.CI = [2]*float64{&lo, nil}
	case Less:
		hi := e.Expected + SequentialHalfWidth(s2, n, 2*t.Alpha, t.Sequential)
		e.CI = [2]*float64{nil, &hi}
	case TwoSided, "":
		w := SequentialHalfWidth(s2, n, t.Alpha, t.Sequential)
		lo, hi := e.Expected-w, e.Expected+w
		e.CI = [2]*float64{&lo, &hi}
	default:
		return Effect{}, invalid("alternative %q must be two-sided, greater or less", t.Alternative)
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
		if counts[i] < 0 || weights[i] <= 0 || math.IsNaN(counts[i]) || math.IsNaN(weights[i]) {
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
	return 1 - distuv.ChiSquared{K: float64(len(counts) - 1)}.CDF(x2), nil
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

// Actions a recommendation may take.
const (
	DeployTreatment = "deploy_treatment"
	KeepControl     = "keep_control"
	StopNow         = "stop"
	KeepRunning     = "keep_running"
)

// Outcome is one metric's analysis for a recommendation: its effect (nil
// when it could not be analysed), whether a higher value is better, and
// whether it is a guardrail rather than the primary metric.
type Outcome struct {
	Name           string
	Effect         *Effect
	HigherIsBetter bool
	Guardrail      bool
}

// significant reports whether the interval excludes 0, and on which side:
// +1 above, −1 below, 0 neither.
func (o Outcome) side() int {
	if o.Effect == nil {
		return 0
	}
	lo, hi := o.Effect.CI[0], o.Effect.CI[1]
	switch {
	case lo != nil && *lo > 0:
		return 1
	case hi != nil && *hi < 0:
		return -1
	}
	return 0
}

// better is +1 when the metric moved the good way significantly, −1 the
// bad way, 0 neither.
func (o Outcome) better() int {
	if o.HigherIsBetter {
		return o.side()
	}
	return -o.side()
}

// Recommendation is what to do, and why.
type Recommendation struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
}

// Recommend decides from the primary metric, the guardrails, the sample
// ratio check and the sample so far: stop at once on a broken split or a
// harmed guardrail; otherwise keep running until every arm has minPerArm
// units; then deploy the treatment on a significant improvement, keep the
// control on a significant harm, or keep running (saying how many more
// units per arm would detect the effect seen, when that is known).
func Recommend(primary Outcome, guardrails []Outcome, srmP *float64, nPerArm []float64, minPerArm, neededPerArm float64) Recommendation {
	if srmP != nil && *srmP < SRMThreshold {
		return Recommendation{StopNow, fmtReason("The arms' sizes do not match the configured split (sample ratio mismatch, p = %.2g): assignment or logging is broken, and no result can be trusted.", *srmP)}
	}
	for _, g := range guardrails {
		if g.better() < 0 {
			return Recommendation{StopNow, fmtReason("The guardrail %s is significantly worse in the treatment.", g.Name)}
		}
	}
	smallest := math.Inf(1)
	for _, n := range nPerArm {
		smallest = min(smallest, n)
	}
	if smallest < minPerArm {
		return Recommendation{KeepRunning, fmtReason("The smallest arm has %.0f units of the %.0f wanted before deciding.", smallest, minPerArm)}
	}
	switch primary.better() {
	case 1:
		return Recommendation{DeployTreatment, fmtReason("%s is significantly better in the treatment, no guardrail is harmed and the split is sound.", primary.Name)}
	case -1:
		return Recommendation{KeepControl, fmtReason("%s is significantly worse in the treatment.", primary.Name)}
	}
	if primary.Effect == nil {
		return Recommendation{KeepRunning, fmtReason("%s cannot be analysed yet: not enough data.", primary.Name)}
	}
	if neededPerArm > smallest {
		return Recommendation{KeepRunning, fmtReason("%s shows no significant difference yet; about %.0f more units per arm would detect the effect seen.", primary.Name, neededPerArm-smallest)}
	}
	return Recommendation{KeepRunning, fmtReason("%s shows no significant difference.", primary.Name)}
}

func fmtReason(format string, args ...any) string { return fmt.Sprintf(format, args...) }
