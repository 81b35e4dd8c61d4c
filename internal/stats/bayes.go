package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Prior is a proper Gaussian prior on the relative effect (0.05 = +5%), as
// GrowthBook's default prior type: an absolute analysis scales its mean by
// the control's mean and its variance by the mean's square. A nil *Prior is
// GrowthBook's improper flat prior, under which the posterior is the
// normal likelihood itself.
type Prior struct {
	Mean     float64
	Variance float64
}

// Bayesian says how to run the Bayesian engine beyond the Test.
type Bayesian struct {
	Prior *Prior
	// LowerIsBetter turns the chance to win into the chance that the
	// effect is below 0 and swaps the two risks (GrowthBook's inverse
	// metrics, such as latency).
	LowerIsBetter bool
}

// Posterior is the Bayesian engine's answer for one treatment arm: the
// posterior of the effect (relative as a fraction, or absolute), its
// credible interval at 1 − alpha, the chance that the treatment beats the
// control, and the risk of choosing each arm: the expected loss, in the
// effect's units, of choosing it if the other is better.
type Posterior struct {
	Expected    float64
	SD          float64
	CI          [2]float64
	ChanceToWin float64
	// Risk is [control, treatment].
	Risk [2]float64
}

// CompareBayesian is GrowthBook's EffectBayesianABTest (gbstats/bayesian/
// tests.py): the effect and its standard error as Compare estimates them
// (CUPED included) are a normal likelihood, combined with the prior, and
// the posterior N(μ, σ²) gives the interval, P(effect > 0) as the chance to
// win, and the risks E[max(effect, 0)] for the control and
// E[max(−effect, 0)] for the treatment. t.Alternative and t.Sequential do
// not apply.
func CompareBayesian(control, treatment Arm, t Test, b Bayesian) (Posterior, error) {
	if !(t.Alpha > 0 && t.Alpha < 1) {
		return Posterior{}, inField("alpha", "%v must lie in (0, 1)", t.Alpha)
	}
	if p := b.Prior; p != nil && !(allFinite(p.Mean, p.Variance) && p.Variance > 0) {
		return Posterior{}, inField("prior", "give a finite mean and a variance above 0")
	}
	est, err := estimateEffect(control, treatment, t)
	if err != nil {
		return Posterior{}, err
	}
	mean, precision := est.expected, 1/(est.se*est.se)
	if !allFinite(precision) {
		return Posterior{}, notEnough("the effect's standard error is 0")
	}
	if p := b.Prior; p != nil {
		pm, pv := p.Mean, p.Variance
		if !t.Relative {
			pm, pv = pm*math.Abs(est.controlMean), pv*est.controlMean*est.controlMean
			if pv == 0 {
				return Posterior{}, notEnough("the control's mean is 0: a prior on the relative effect says nothing of the absolute one")
			}
		}
		post := precision + 1/pv
		mean = (mean*precision + pm/pv) / post
		precision = post
		if !allFinite(mean, precision) {
			return Posterior{}, inField("prior", "is too narrow or too far from the data for a finite posterior")
		}
	}
	sd := math.Sqrt(1 / precision)
	z := distuv.UnitNormal.Quantile(1 - t.Alpha/2)
	out := Posterior{Expected: mean, SD: sd, CI: [2]float64{mean - z*sd, mean + z*sd},
		ChanceToWin: distuv.UnitNormal.CDF(mean / sd), Risk: Risk(mean, sd)}
	if b.LowerIsBetter {
		out.ChanceToWin = 1 - out.ChanceToWin
		out.Risk[0], out.Risk[1] = out.Risk[1], out.Risk[0]
	}
	if !allFinite(out.CI[0], out.CI[1]) {
		return Posterior{}, inField("alpha", "%v gives no finite interval", t.Alpha)
	}
	if !allFinite(out.ChanceToWin, out.Risk[0], out.Risk[1]) {
		return Posterior{}, inArm("treatment", inField("", "the numbers are too large for a finite posterior"))
	}
	return out, nil
}

// Risk is the expected loss of choosing each arm when the effect of the
// treatment is N(mu, sigma²): [E[max(X, 0)], E[max(−X, 0)]], the first
// the loss of keeping the control, the second of choosing the treatment.
// In closed form E[max(X, 0)] = μΦ(μ/σ) + σφ(μ/σ), which equals
// GrowthBook's P(X > 0)·E[X | X > 0] from the truncated normal's mean.
// Beyond |μ/σ| = 37 one side's probability is 0 in float64, and the risks
// are GrowthBook's limit [max(μ, 0), max(−μ, 0)].
func Risk(mu, sigma float64) [2]float64 {
	if sigma > 0 && math.Abs(mu/sigma) > 37 {
		return [2]float64{max(mu, 0), max(-mu, 0)}
	}
	z := mu / sigma
	phi := distuv.UnitNormal.Prob(z)
	return [2]float64{mu*distuv.UnitNormal.CDF(z) + sigma*phi, -mu*distuv.UnitNormal.CDF(-z) + sigma*phi}
}
