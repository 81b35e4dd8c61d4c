package stats_test

import (
	"math"
	"strings"
	"testing"

	"github.com/curate/curate/internal/stats"
)

// interval is an effect with only its interval set: the recommendation
// reads nothing else of it.
func interval(lo, hi float64) *stats.Effect {
	return &stats.Effect{Expected: (lo + hi) / 2, CI: [2]*float64{&lo, &hi}}
}

func TestRecommend(t *testing.T) {
	bad, ok := 0.0001, 0.4
	n := []float64{1000, 1000}
	cases := []struct {
		name      string
		primary   *stats.Effect
		minimum   float64
		guard     *stats.Effect
		maxHarm   float64
		srm       *float64
		n         []float64
		incidents []int64
		want      string
		says      string
	}{
		{"improvement", interval(0.01, 0.05), 0, interval(-0.01, 0.02), 0, &ok, n, nil, stats.DeployTreatment, "the split is sound"},
		{"no sample-ratio check", interval(0.01, 0.05), 0, nil, 0, nil, n, nil, stats.DeployTreatment, "the sample-ratio check did not run"},
		{"harm", interval(-0.05, -0.01), 0, nil, 0, &ok, n, nil, stats.KeepControl, "significantly worse"},
		{"broken split", interval(0.01, 0.05), 0, nil, 0, &bad, n, nil, stats.StopNow, "sample ratio mismatch"},
		{"guardrail harmed", interval(0.01, 0.05), 0, interval(0.01, 0.03), 0, &ok, n, nil, stats.StopNow, "latency is significantly worse"},
		{"too few units", interval(0.01, 0.05), 0, nil, 0, &ok, []float64{1000, 50}, nil, stats.KeepRunning, "50 units"},
		{"one unit in an arm", interval(0.01, 0.05), 0, nil, 0, &ok, []float64{1000, 1}, nil, stats.KeepRunning, "has 1 unit of the 100"},
		{"no difference", interval(-0.01, 0.05), 0, nil, 0, &ok, n, nil, stats.KeepRunning, "no significant difference"},
		{"not analysed", nil, 0, nil, 0, nil, n, nil, stats.KeepRunning, "not enough data"},
		// The case: +3% and significant, against a minimum of +5%.
		{"short of the minimum", interval(0.021, 0.039), 0.05, nil, 0, &ok, n, nil, stats.KeepControl, "less than the minimum improvement of +5.0%"},
		{"may reach the minimum", interval(0.01, 0.07), 0.05, nil, 0, &ok, n, nil, stats.KeepRunning, "does not clear the minimum improvement of +5.0%"},
		{"clears the minimum", interval(0.06, 0.09), 0.05, nil, 0, &ok, n, nil, stats.DeployTreatment, "more than the minimum improvement of +5.0%"},
		// Latency +3% (1% to 5%) is significantly worse but within +10%.
		{"guardrail within its limit", interval(0.06, 0.09), 0.05, interval(0.01, 0.05), 0.10, &ok, n, nil, stats.DeployTreatment, "no guardrail crosses its limit"},
		{"guardrail interval past its limit", interval(0.06, 0.09), 0.05, interval(0.02, 0.12), 0.10, &ok, n, nil, stats.KeepRunning, "reaches past its limit of +10.0%"},
		{"guardrail beyond its limit", interval(0.06, 0.09), 0.05, interval(0.11, 0.15), 0.10, &ok, n, nil, stats.StopNow, "beyond its limit of +10.0%"},
		{"guardrail with a limit unanalysed", interval(0.06, 0.09), 0.05, nil, 0.10, &ok, n, nil, stats.KeepRunning, "cannot be analysed yet"},
		{"safety incident", interval(0.06, 0.09), 0.05, nil, 0, &ok, n, []int64{0, 2}, stats.KeepControl, "no safety incident"},
	}
	for _, c := range cases {
		ev := stats.Evidence{Primary: stats.Outcome{Name: "The thumbs-up rate", Effect: c.primary, HigherIsBetter: true, Criterion: c.minimum},
			SRMPValue: c.srm, NPerArm: c.n, MinPerArm: 100, NeededPerArm: 3000, Incidents: c.incidents}
		if c.guard != nil || c.maxHarm > 0 {
			ev.Guardrails = append(ev.Guardrails, stats.Outcome{Name: "Latency", Effect: c.guard, Guardrail: true, Criterion: c.maxHarm})
		}
		got := stats.Recommend(ev)
		if got.Action != c.want || !strings.Contains(strings.ToLower(got.Reason), strings.ToLower(c.says)) {
			t.Errorf("%s: %+v, want %s saying %q", c.name, got, c.want, c.says)
		}
	}
	// The split is said to be sound only when it was checked.
	got := stats.Recommend(stats.Evidence{Primary: stats.Outcome{Name: "The thumbs-up rate", Effect: interval(0.01, 0.05), HigherIsBetter: true}, NPerArm: n, MinPerArm: 100})
	if strings.Contains(got.Reason, "sound") {
		t.Errorf("without a sample-ratio check: %q", got.Reason)
	}
}

// Under the Bayesian engine the primary metric decides by the chance of
// clearing its minimum and the risk of choosing the treatment. The
// posteriors are N(μ, σ²) written out; the chances are Φ((μ − m)/σ), e.g.
// Φ((0.08 − 0.05)/0.01) = Φ(3) = 0.99865 (SciPy's norm.cdf), and the risk
// of choosing the treatment E[max(−X, 0)] = −μΦ(−μ/σ) + σφ(μ/σ) ≈ 0 there.
func TestRecommendBayesian(t *testing.T) {
	post := func(mu, sd float64) *stats.Posterior {
		return &stats.Posterior{Expected: mu, SD: sd, CI: [2]float64{mu - 1.96*sd, mu + 1.96*sd},
			ChanceToWin: stdNormalCDF(mu / sd), Risk: stats.Risk(mu, sd)}
	}
	ok := 0.5
	n := []float64{1000, 1000}
	cases := []struct {
		name    string
		p       *stats.Posterior
		minimum float64
		want    string
		says    string
	}{
		{"clears the minimum", post(0.08, 0.01), 0.05, stats.DeployTreatment, "chance of improving by more than +5.0% 99.9%"},
		// Φ((0.03 − 0.05)/0.005) = Φ(−4): surely below the minimum.
		{"short of the minimum", post(0.03, 0.005), 0.05, stats.KeepControl, "less than the minimum improvement"},
		{"worse", post(-0.03, 0.01), 0, stats.KeepControl, "chance to win 0.1%"},
		// Φ(0.012/0.01) = Φ(1.2) = 0.8849.
		{"unclear", post(0.012, 0.01), 0, stats.KeepRunning, "chance to win 88%"},
		// Φ(0.25/0.15) = Φ(1.667) = 0.952, but the risk of choosing the
		// treatment, −0.25·Φ(−1.667) + 0.15·φ(1.667) = 0.00297, is above
		// 0.25%.
		{"too risky", post(0.25, 0.15), 0, stats.KeepRunning, "risk of choosing it is above the 0.25% allowed"},
	}
	for _, c := range cases {
		got := stats.Recommend(stats.Evidence{Primary: stats.Outcome{Name: "The thumbs-up rate", Posterior: c.p, HigherIsBetter: true, Criterion: c.minimum},
			SRMPValue: &ok, NPerArm: n, MinPerArm: 100})
		if got.Action != c.want || !strings.Contains(strings.ToLower(got.Reason), strings.ToLower(c.says)) {
			t.Errorf("%s: %+v, want %s saying %q", c.name, got, c.want, c.says)
		}
	}
	o := stats.Outcome{Posterior: post(0.08, 0.01), HigherIsBetter: true, Criterion: 0.05}
	near(t, "chance to clear", o.ChanceToClear(), 0.9986501019683699, 1e-9) // scipy.stats.norm.cdf(3)
	o = stats.Outcome{Posterior: post(-0.08, 0.01), Criterion: 0.05}        // lower is better: P(X < −0.05)
	near(t, "chance to clear, lower is better", o.ChanceToClear(), 0.9986501019683699, 1e-9)
}

func stdNormalCDF(z float64) float64 {
	return 0.5 * (1 + erf(z/1.4142135623730951))
}

func erf(x float64) float64 { return math.Erf(x) }
