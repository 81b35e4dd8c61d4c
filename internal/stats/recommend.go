package stats

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// Actions a recommendation may take.
const (
	DeployTreatment = "deploy_treatment"
	KeepControl     = "keep_control"
	StopNow         = "stop"
	KeepRunning     = "keep_running"
)

// Defaults of the Bayesian engine's decision: deploy when the chance that
// the treatment clears its minimum improvement is at least
// DefaultChanceToWin and the risk of choosing it (its expected relative
// loss) is at most DefaultMaxRisk, GrowthBook's default acceptable risk of
// 0.25%.
const (
	DefaultChanceToWin = 0.95
	DefaultMaxRisk     = 0.0025
)

// Outcome is one metric's analysis for a recommendation: its relative
// effect under the frequentist engine (Effect) or the Bayesian one
// (Posterior), nil both when it could not be analysed; whether a higher
// value is better; whether it is a guardrail rather than the primary
// metric; and its practical criterion, a relative fraction: the minimum
// improvement the primary metric must show (0.05: the interval must lie
// above +5% in the good direction), or the most harm a guardrail may do
// (0.10: its interval must stay below +10% in the bad direction). A
// criterion of 0 asks only for significance: a primary metric
// significantly better, a guardrail not significantly worse.
type Outcome struct {
	Name           string
	Effect         *Effect
	Posterior      *Posterior
	HigherIsBetter bool
	Guardrail      bool
	Criterion      float64
}

// gain is the outcome's interval turned so that positive is good, and
// whether it has one. A one-sided interval's open end is
// infinite.
func (o Outcome) gain() (lo, hi float64, ok bool) {
	switch {
	case o.Effect != nil:
		lo, hi = math.Inf(-1), math.Inf(1)
		if o.Effect.CI[0] != nil {
			lo = *o.Effect.CI[0]
		}
		if o.Effect.CI[1] != nil {
			hi = *o.Effect.CI[1]
		}
	case o.Posterior != nil:
		lo, hi = o.Posterior.CI[0], o.Posterior.CI[1]
	default:
		return 0, 0, false
	}
	if !o.HigherIsBetter {
		lo, hi = -hi, -lo
	}
	return lo, hi, true
}

// harm is the interval turned so that positive is harm.
func (o Outcome) harm() (lo, hi float64, ok bool) {
	lo, hi, ok = o.gain()
	return -hi, -lo, ok
}

// effectText is the effect and its interval as the metric moved, in
// percent: "+3.0%, interval +1.2% to +4.8%".
func (o Outcome) effectText() string {
	x, lo, hi := 0.0, math.Inf(-1), math.Inf(1)
	switch {
	case o.Effect != nil:
		x = o.Effect.Expected
		if o.Effect.CI[0] != nil {
			lo = *o.Effect.CI[0]
		}
		if o.Effect.CI[1] != nil {
			hi = *o.Effect.CI[1]
		}
	case o.Posterior != nil:
		x, lo, hi = o.Posterior.Expected, o.Posterior.CI[0], o.Posterior.CI[1]
	}
	return fmt.Sprintf("%s, interval %s to %s", Percent(x), Percent(lo), Percent(hi))
}

// Percent writes a relative fraction as a signed percentage with one
// decimal: 0.05 is "+5.0%".
func Percent(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "+∞"
	case math.IsInf(x, -1):
		return "−∞"
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}

// harmLimit words a guardrail's limit as the metric moves: "+10%" for a
// metric that must not rise more than 10%, "−10%" for one that must not
// fall more.
func (o Outcome) harmLimit() string {
	if o.HigherIsBetter {
		return Percent(-o.Criterion)
	}
	return Percent(o.Criterion)
}

// ChanceToClear is the Bayesian posterior's probability that the metric
// improves by more than the outcome's criterion (the chance to win when
// the criterion is 0).
func (o Outcome) ChanceToClear() float64 {
	p := o.Posterior
	if p == nil || !(p.SD > 0) {
		return 0
	}
	m := o.Criterion
	if o.HigherIsBetter {
		return 1 - distuv.UnitNormal.CDF((m-p.Expected)/p.SD)
	}
	return distuv.UnitNormal.CDF((-m - p.Expected) / p.SD)
}

// Evidence is what a recommendation weighs: the primary metric and the
// guardrails, the sample-ratio check's p-value (nil when it did not run),
// the units per arm and the minimum wanted before deciding, the units per
// arm that would detect the effect seen (0 when unknown), the Bayesian
// engine's thresholds (0 takes the defaults) and the safety incidents
// counted in each arm (the judge's safety flags on sampled answers).
type Evidence struct {
	Primary      Outcome
	Guardrails   []Outcome
	SRMPValue    *float64
	NPerArm      []float64
	MinPerArm    float64
	NeededPerArm float64
	ChanceToWin  float64
	MaxRisk      float64
	Incidents    []int64
}

// Recommendation is what to do, and why.
type Recommendation struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
}

// Recommend decides. It stops at once on a broken split or on a guardrail
// whose whole interval lies beyond its limit (significantly worse, for a
// guardrail without one); otherwise it keeps running until every arm has
// MinPerArm units. Then the treatment is deployed only when the primary
// metric's interval lies wholly above its minimum improvement (under the
// Bayesian engine: the chance of clearing it is at least ChanceToWin and
// the risk of choosing the treatment at most MaxRisk), no guardrail's
// interval reaches past its limit and the treatment had no safety
// incident. The control is kept when the treatment is significantly worse,
// or better by surely less than the minimum; otherwise it keeps running.
// Each reason names the criterion that decided.
func Recommend(ev Evidence) Recommendation {
	chance, maxRisk := ev.ChanceToWin, ev.MaxRisk
	if chance == 0 {
		chance = DefaultChanceToWin
	}
	if maxRisk == 0 {
		maxRisk = DefaultMaxRisk
	}
	if p := ev.SRMPValue; p != nil && *p < SRMThreshold {
		return Recommendation{StopNow, fmt.Sprintf("The arms' sizes do not match the configured split (sample ratio mismatch, p = %.2g): assignment or logging is broken, and no result can be trusted.", *p)}
	}
	for _, g := range ev.Guardrails {
		// The whole interval lies on the bad side of the limit.
		if harmLo, _, ok := g.harm(); ok && harmLo > g.Criterion {
			if g.Criterion == 0 {
				return Recommendation{StopNow, fmt.Sprintf("The guardrail %s is significantly worse in the treatment (%s).", lowerFirst(g.Name), g.effectText())}
			}
			return Recommendation{StopNow, fmt.Sprintf("The guardrail %s is worse in the treatment beyond its limit of %s (%s).", lowerFirst(g.Name), g.harmLimit(), g.effectText())}
		}
	}
	smallest := math.Inf(1)
	for _, n := range ev.NPerArm {
		smallest = min(smallest, n)
	}
	if smallest < ev.MinPerArm {
		units := "units"
		if smallest == 1 {
			units = "unit"
		}
		return Recommendation{KeepRunning, fmt.Sprintf("The smallest arm has %.0f %s of the %.0f wanted before deciding.", smallest, units, ev.MinPerArm)}
	}
	p := ev.Primary
	if p.Effect == nil && p.Posterior == nil {
		return Recommendation{KeepRunning, fmt.Sprintf("%s cannot be analysed yet: not enough data.", p.Name)}
	}
	var r Recommendation
	if p.Posterior != nil {
		r = bayesianVerdict(p, chance, maxRisk)
	} else {
		r = frequentistVerdict(p, smallest, ev.NeededPerArm)
	}
	if r.Action != DeployTreatment {
		return r
	}
	// What else must hold for a deploy: each guardrail's interval within
	// its limit, no safety incident in the treatment.
	for _, g := range ev.Guardrails {
		if g.Criterion == 0 {
			continue // only significant harm, checked above, stops it
		}
		_, harmHi, ok := g.harm()
		if !ok {
			return Recommendation{KeepRunning, fmt.Sprintf("%s But the guardrail %s cannot be analysed yet, so its limit of %s is not shown to hold.", r.Reason, lowerFirst(g.Name), g.harmLimit())}
		}
		if harmHi > g.Criterion {
			return Recommendation{KeepRunning, fmt.Sprintf("%s But the interval of the guardrail %s reaches past its limit of %s (%s).", r.Reason, lowerFirst(g.Name), g.harmLimit(), g.effectText())}
		}
	}
	if n := len(ev.Incidents); n > 1 && ev.Incidents[n-1] > 0 {
		return Recommendation{KeepControl, fmt.Sprintf("%s But the judge flagged %d of the treatment's answers as unsafe (the control's: %d), and the criterion is no safety incident.", r.Reason, ev.Incidents[n-1], ev.Incidents[0])}
	}
	var holds []string
	if len(ev.Guardrails) > 0 {
		holds = append(holds, "no guardrail crosses its limit")
	}
	if ev.SRMPValue != nil {
		holds = append(holds, "the split is sound")
	} else {
		holds = append(holds, "the sample-ratio check did not run")
	}
	r.Reason += " " + upperFirst(strings.Join(holds, "; ")) + "."
	return r
}

// frequentistVerdict reads the primary metric's interval against its
// minimum improvement.
func frequentistVerdict(p Outcome, smallest, needed float64) Recommendation {
	lo, hi, _ := p.gain()
	m := p.Criterion
	switch {
	case lo > m && m == 0:
		return Recommendation{DeployTreatment, fmt.Sprintf("%s is significantly better in the treatment (%s).", p.Name, p.effectText())}
	case lo > m:
		return Recommendation{DeployTreatment, fmt.Sprintf("%s is better in the treatment by more than the minimum improvement of %s (%s).", p.Name, Percent(m), p.effectText())}
	case hi < 0:
		return Recommendation{KeepControl, fmt.Sprintf("%s is significantly worse in the treatment (%s).", p.Name, p.effectText())}
	case lo > 0 && hi < m:
		return Recommendation{KeepControl, fmt.Sprintf("%s is significantly better in the treatment (%s), but by less than the minimum improvement of %s: the whole interval lies below it, so the treatment is not worth deploying.", p.Name, p.effectText(), Percent(m))}
	case lo > 0:
		return Recommendation{KeepRunning, fmt.Sprintf("%s is significantly better in the treatment (%s), but the interval does not clear the minimum improvement of %s yet: not recommended for deploy.", p.Name, p.effectText(), Percent(m))}
	case needed > smallest:
		return Recommendation{KeepRunning, fmt.Sprintf("%s shows no significant difference yet; about %.0f more units per arm would detect the effect seen.", p.Name, needed-smallest)}
	}
	return Recommendation{KeepRunning, fmt.Sprintf("%s shows no significant difference.", p.Name)}
}

// bayesianVerdict reads the primary metric's posterior: the chance of
// clearing the minimum improvement and the risk of choosing the treatment.
func bayesianVerdict(p Outcome, chance, maxRisk float64) Recommendation {
	win := p.Posterior.ChanceToWin
	clear := p.ChanceToClear()
	risk := p.Posterior.Risk[1]
	figures := fmt.Sprintf("chance to win %s, risk %s", Share(win), RiskText(risk))
	if p.Criterion > 0 {
		figures = fmt.Sprintf("chance to win %s, chance of improving by more than %s %s, risk %s", Share(win), Percent(p.Criterion), Share(clear), RiskText(risk))
	}
	switch {
	case clear >= chance && risk <= maxRisk:
		return Recommendation{DeployTreatment, fmt.Sprintf("%s is better in the treatment (%s): at least the %s required, within the %s risk allowed.", p.Name, figures, Share(chance), RiskText(maxRisk))}
	case win <= 1-chance:
		return Recommendation{KeepControl, fmt.Sprintf("%s is worse in the treatment (%s).", p.Name, figures)}
	case p.Criterion > 0 && clear <= 1-chance && win >= chance:
		return Recommendation{KeepControl, fmt.Sprintf("%s is better in the treatment (%s), but almost surely by less than the minimum improvement of %s: not worth deploying.", p.Name, figures, Percent(p.Criterion))}
	case clear >= chance:
		return Recommendation{KeepRunning, fmt.Sprintf("%s is likely better in the treatment (%s), but the risk of choosing it is above the %s allowed: not recommended for deploy yet.", p.Name, figures, RiskText(maxRisk))}
	}
	return Recommendation{KeepRunning, fmt.Sprintf("%s is not yet clear (%s; %s required to deploy).", p.Name, figures, Share(chance))}
}

// Share writes a probability as a whole percentage, never rounding to 0
// or 100 what is not: 0.92 is "92%", 0.9996 is "> 99.9%".
func Share(p float64) string {
	switch {
	case p > 0.999:
		return "> 99.9%"
	case p < 0.001:
		return "< 0.1%"
	case p > 0.99 || p < 0.01:
		return fmt.Sprintf("%.1f%%", 100*p)
	}
	return fmt.Sprintf("%.0f%%", 100*p)
}

// RiskText writes a risk (an expected relative loss) as a percentage to
// at most two decimals, or "< 0.01%": 0.001 is "0.1%", 0.0025 "0.25%".
func RiskText(r float64) string {
	if r < 0.00005 {
		return "< 0.01%"
	}
	return strconv.FormatFloat(math.Round(r*10000)/100, 'f', -1, 64) + "%"
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
