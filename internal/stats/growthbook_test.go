package stats_test

import (
	"errors"
	"math"
	"testing"

	"github.com/curate/curate/internal/stats"
)

// The expected values in this file are GrowthBook's own published test
// values, from github.com/growthbook/growthbook, packages/stats/tests (the
// file and test are named at each case; read at commit 8f1db445). Those
// tests round to 5 or 9 decimals; the tolerances here are the rounding.

// gbMean is GrowthBook's SampleMeanStatistic(n, sum, sum_squares).
func gbMean(n, sum, sumSquares float64) stats.Arm {
	return stats.Arm{N: n, Sum: sum, SumSquares: sumSquares}
}

// tests/frequentist/test_tests.py, TestTwoSidedTTest: GrowthBook's Welch
// test, relative and absolute, means and proportions.
func TestGrowthBookTwoSidedTTest(t *testing.T) {
	a, b := gbMean(3407, 1396.87, 52377.9767), gbMean(3461, 2422.7, 134698.29)
	rel, err := stats.Compare(a, b, stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	// test_two_sided_ttest
	near(t, "expected", rel.Expected, 0.70732, 5e-6)
	near(t, "ci low", *rel.CI[0], -0.03526, 5e-6)
	near(t, "ci high", *rel.CI[1], 1.44989, 5e-6)
	near(t, "stddev", rel.SE, 0.37879, 5e-6)
	near(t, "p", *rel.PValue, 0.06191, 5e-6)
	// test_two_sided_ttest_absolute
	abs, err := stats.Compare(a, b, stats.Test{Metric: stats.MetricMean, Alpha: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "abs expected", abs.Expected, 0.29, 5e-6)
	near(t, "abs ci low", *abs.CI[0], 0.04538, 5e-6)
	near(t, "abs ci high", *abs.CI[1], 0.53462, 5e-6)
	near(t, "abs stddev", abs.SE, 0.12478, 5e-6)
	near(t, "abs p", *abs.PValue, 0.02016, 5e-6)
	// test_two_sided_ttest_binom
	bin, err := stats.Compare(stats.Arm{N: 28, Successes: 14}, stats.Arm{N: 30, Successes: 16},
		stats.Test{Metric: stats.MetricProportion, Relative: true, Alpha: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "binom expected", bin.Expected, 0.06667, 5e-6)
	near(t, "binom ci low", *bin.CI[0], -0.47767, 5e-6)
	near(t, "binom ci high", *bin.CI[1], 0.61101, 5e-6)
	near(t, "binom stddev", bin.SE, 0.2717, 5e-6)
	near(t, "binom p", *bin.PValue, 0.80707, 5e-6)
}

// The regression-adjusted (CUPED) mean of tests/test_gbstats.py:
// RA_STATISTICS_DF, control "zero" and treatment "one".
var (
	gbRAControl = stats.Arm{N: 3001, Sum: 300, SumSquares: 600,
		Covariate: &stats.Covariate{Sum: 210, SumSquares: 415, CrossSum: -20}}
	gbRATreatment = stats.Arm{N: 3000, Sum: 222, SumSquares: 555,
		Covariate: &stats.Covariate{Sum: 120, SumSquares: 405, CrossSum: -10}}
)

// tests/test_gbstats.py, TestAnalyzeMetricDfRegressionAdjustment: CUPED
// on a mean (test_analyze_metric_df_ra) and on a proportion with a
// proportion covariate (test_analyze_metric_df_ra_proportion, the same
// sums read as counts), frequentist, relative, two-sided at 0.05.
func TestGrowthBookCUPED(t *testing.T) {
	test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}
	e, err := stats.Compare(gbRAControl, gbRATreatment, test)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mean expected", e.Expected, -0.281707154, 5e-10)
	near(t, "mean p", *e.PValue, 0.003732549, 5e-10)
	// The same test notes the effect is not the unadjusted one.
	if math.Abs(e.Expected-(0.074-0.099966678)/0.099966678) < 1e-3 {
		t.Errorf("CUPED left the effect unadjusted: %v", e.Expected)
	}

	prop := func(a stats.Arm) stats.Arm {
		return stats.Arm{N: a.N, Successes: a.Sum, Covariate: &stats.Covariate{Sum: a.Covariate.Sum, CrossSum: a.Covariate.CrossSum}}
	}
	test.Metric = stats.MetricProportion
	p, err := stats.Compare(prop(gbRAControl), prop(gbRATreatment), test)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "proportion expected", p.Expected, -0.31620216, 5e-9)
	near(t, "proportion p", *p.PValue, 0.000000353, 5e-10)
}

// tests/frequentist/test_tests.py, TestSequentialTTest.
// test_sequential_test_runs_ra: CUPED with a confidence sequence (tuning
// 5000, relative, two-sided at 0.05).
func TestGrowthBookCUPEDSequential(t *testing.T) {
	a := stats.Arm{N: 3000, Sum: 1396.87, SumSquares: 52377.9767, Covariate: &stats.Covariate{Sum: 16.87, SumSquares: 527.9767, CrossSum: 1}}
	b := stats.Arm{N: 3461, Sum: 2422.7, SumSquares: 134698.29, Covariate: &stats.Covariate{Sum: 22.7, SumSquares: 1348.29, CrossSum: 1}}
	e, err := stats.Compare(a, b, stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Sequential: 5000})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "expected", e.Expected, 0.50338, 5e-6)
	near(t, "stddev", e.SE, 0.33341, 5e-6)
	near(t, "ci low", *e.CI[0], -0.50969, 5e-6)
	near(t, "ci high", *e.CI[1], 1.51646, 5e-6)
}

// tests/test_shared_models.py, TestComputeTheta.test_returns_0_no_variance:
// θ of two arms holding the same values, METRIC_1 = [0.3, 0.5, 0.9, 22]
// before and METRIC_3 = [2, 1, 5, 3] after, is 0.01864; with no pre-period
// variance there is none (GrowthBook's 0: the metric is analysed
// unadjusted).
func TestGrowthBookTheta(t *testing.T) {
	pre, post := []float64{0.3, 0.5, 0.9, 22}, []float64{2, 1, 5, 3}
	arm := stats.Arm{N: 4, Covariate: &stats.Covariate{}}
	for i := range pre {
		arm.Sum += post[i]
		arm.SumSquares += post[i] * post[i]
		arm.Covariate.Sum += pre[i]
		arm.Covariate.SumSquares += pre[i] * pre[i]
		arm.Covariate.CrossSum += pre[i] * post[i]
	}
	th, err := stats.Theta(stats.MetricMean, arm, arm)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "theta", th, 0.01864, 5e-6)

	flat := arm
	flat.Covariate = &stats.Covariate{}
	if _, err := stats.Theta(stats.MetricMean, flat, flat); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("no pre-period variance: %v", err)
	}
	// Compare then analyses the metric unadjusted.
	withFlat, err := stats.Compare(flat, flat, stats.Test{Metric: stats.MetricMean, Alpha: 0.05})
	if err != nil || withFlat.Theta != 0 || withFlat.Expected != 0 {
		t.Errorf("flat covariate: %+v %v", withFlat, err)
	}
}

// bayes runs the Bayesian engine, failing the test on an error.
func bayes(t *testing.T, c, tr stats.Arm, test stats.Test, b stats.Bayesian) stats.Posterior {
	t.Helper()
	p, err := stats.CompareBayesian(c, tr, test, b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nearPosterior(t *testing.T, what string, got stats.Posterior, expected, lo, hi, sd, ctw, riskC, riskT, tol float64) {
	t.Helper()
	near(t, what+" expected", got.Expected, expected, tol)
	near(t, what+" ci low", got.CI[0], lo, tol)
	near(t, what+" ci high", got.CI[1], hi, tol)
	near(t, what+" stddev", got.SD, sd, tol)
	near(t, what+" chance to win", got.ChanceToWin, ctw, tol)
	near(t, what+" risk control", got.Risk[0], riskC, tol)
	near(t, what+" risk treatment", got.Risk[1], riskT, tol)
}

// tests/bayesian/test_tests.py: EffectBayesianABTest on a proportion
// (TestBinom.test_bayesian_binomial_ab_test) and a mean under the flat
// prior (TestNorm.test_bayesian_gaussian_ab_test) and an informative one
// (test_bayesian_gaussian_ab_test_informative: mean 0.1, variance 0.1),
// all relative at alpha 0.05.
func TestGrowthBookBayesian(t *testing.T) {
	rel := stats.Test{Metric: stats.MetricProportion, Relative: true, Alpha: 0.05}
	p := bayes(t, stats.Arm{N: 100, Successes: 49}, stats.Arm{N: 100, Successes: 51}, rel, stats.Bayesian{})
	nearPosterior(t, "binomial", p, 0.04082, -0.24779, 0.32943, 0.14725, 0.60918, 0.0814, 0.04058, 5e-6)

	rel.Metric = stats.MetricMean
	a, b := gbMean(10, 100, 1002.25), gbMean(10, 105, 1111.5)
	p = bayes(t, a, b, rel, stats.Bayesian{})
	nearPosterior(t, "gaussian", p, 0.05, -0.02, 0.12, 0.03572, 0.91923, 0.05131, 0.00131, 5e-6)
	p = bayes(t, a, b, rel, stats.Bayesian{Prior: &stats.Prior{Mean: 0.1, Variance: 0.1}})
	nearPosterior(t, "informative", p, 0.05063, -0.01893, 0.12019, 0.03549, 0.92315, 0.05186, 0.00123, 5e-6)

	// test_missing_data: no units is no answer (GrowthBook's default
	// output), never a number.
	if _, err := stats.CompareBayesian(stats.Arm{}, stats.Arm{}, rel, stats.Bayesian{}); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("no data: %v", err)
	}
}

// tests/bayesian/test_tests.py, TestEffectBayesianABTest.
// test_bayesian_effect_ab_test: absolute and relative effects under an
// improper flat prior, a proper flat one (variance 1e6) and an informative
// one (variance 1), the prior given on the relative effect and scaled by
// the control's mean for the absolute analysis. GrowthBook's arms there
// are quantile statistics; each is given here as the mean arm with the same
// mean and variance: QuantileStatistic's mean quantile_hat and variance
// (n*/n)(n − 1)((upper − lower) / (2·z₀.₉₇₅))².
func TestGrowthBookBayesianPriors(t *testing.T) {
	z := 1.959963984540054 // scipy.stats.norm.ppf(0.975)
	quantile := func(n, hat, lower, upper float64) stats.Arm {
		w := (upper - lower) / (2 * z)
		v := (n - 1) * w * w
		return stats.Arm{N: n, Sum: n * hat, SumSquares: v*(n-1) + n*hat*hat}
	}
	c := quantile(11054, 7.157987489967789, 7.098780136176828, 7.217194843758751)
	tr := quantile(10861, 7.694499927525767, 7.64180598628119, 7.747193868770344)
	abs := stats.Test{Metric: stats.MetricMean, Alpha: 0.05}
	rel := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}
	flat := &stats.Prior{Variance: 1e6}
	informative := &stats.Prior{Variance: 1}
	cases := []struct {
		name          string
		test          stats.Test
		prior         *stats.Prior
		expected      float64
		ciLow, ciHigh float64
	}{
		{"improper flat", abs, nil, 0.5365124375579775, 0.4572559589115422, 0.6157689162044128},
		{"flat", abs, flat, 0.536512437540855, 0.4572559588956844, 0.6157689161860256},
		{"relative flat", rel, flat, 0.07495297222736319, 0.06341005842481906, 0.08649588602990732},
		{"informative", abs, informative, 0.536495315442269, 0.4572401014910488, 0.6157505293934892},
		{"relative informative", rel, informative, 0.07495037261804469, 0.06340765898986044, 0.08649308624622894},
	}
	for _, tc := range cases {
		p := bayes(t, c, tr, tc.test, stats.Bayesian{Prior: tc.prior})
		near(t, tc.name+" expected", p.Expected, tc.expected, 1e-9)
		near(t, tc.name+" ci low", p.CI[0], tc.ciLow, 1e-9)
		near(t, tc.name+" ci high", p.CI[1], tc.ciHigh, 1e-9)
	}
}

// tests/bayesian/test_tests.py, TestGetRiskNumericalStability: the risks
// of N(0.1, 0.05²) to 10 decimals, and the limit far in the tails.
func TestGrowthBookRisk(t *testing.T) {
	r := stats.Risk(0.1, 0.05)
	near(t, "risk control", r[0], 0.1004245351308, 5e-11)
	near(t, "risk treatment", r[1], 0.0004245351308414, 5e-11)
	if r := stats.Risk(0.01, 4.5e-9); r != [2]float64{0.01, 0} {
		t.Errorf("far tail: %v", r)
	}
	if r := stats.Risk(-0.01, 4.5e-9); r != [2]float64{0, 0.01} {
		t.Errorf("far tail, negative: %v", r)
	}
}

// tests/test_gbstats.py, TestAnalyzeMetricDfBayesian: dimension "one" of
// MULTI_DIMENSION_STATISTICS_DF, relative, flat prior
// (test_get_metric_dfs_new), and the same metric with lower values better
// (test_get_metric_dfs_inverse): the chance to win is the complement and
// the risks swap.
func TestGrowthBookBayesianDataFrame(t *testing.T) {
	c, tr := gbMean(100, 270, 848.79), gbMean(120, 300, 869)
	rel := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}
	p := bayes(t, c, tr, rel, stats.Bayesian{})
	near(t, "expected", p.Expected, -0.074074074, 5e-10)
	near(t, "chance to win", p.ChanceToWin, 0.071834168, 5e-10)
	near(t, "risk treatment", p.Risk[1], 0.075691131, 5e-10)
	inv := bayes(t, c, tr, rel, stats.Bayesian{LowerIsBetter: true})
	near(t, "inverse chance to win", inv.ChanceToWin, 1-0.071834168, 5e-10)
	near(t, "inverse risk treatment", inv.Risk[1], 0.001617057, 5e-10)
}
