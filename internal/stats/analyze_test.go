package stats_test

import (
	"errors"
	"math"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// Analyze runs the chosen engine on each arm against arm 0, with the
// sample-ratio check; the numbers are those of the engines' own tests
// (SciPy's Welch test for the frequentist one, GrowthBook's
// test_bayesian_gaussian_ab_test for the Bayesian one).
func TestAnalyze(t *testing.T) {
	a := stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05},
		Arms: []stats.Arm{control, treatment, {N: 1, Sum: 3, SumSquares: 9}}, SRMWeights: []float64{0.4, 0.4, 0.2}}
	rep, err := stats.Analyze(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Arm != 1 || rep.Results[0].Effect == nil || rep.Results[0].Posterior != nil {
		t.Fatalf("results %+v", rep.Results)
	}
	near(t, "relative effect", rep.Results[0].Effect.Expected, 0.04212043730336599, 1e-12)
	if r := rep.Results[1]; r.Arm != 2 || r.Effect != nil || r.Error == "" {
		t.Errorf("an arm of one unit: %+v", r)
	}
	if rep.SRMPValue == nil || *rep.SRMPValue >= stats.SRMThreshold {
		t.Errorf("srm %v for 1,200/1,185/1 against 40/40/20", rep.SRMPValue)
	}

	a = stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}, Engine: stats.EngineBayesian,
		Arms: []stats.Arm{gbMean(10, 100, 1002.25), gbMean(10, 105, 1111.5)}}
	rep, err = stats.Analyze(a)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Results[0].Posterior; p == nil || math.Abs(p.ChanceToWin-0.91923) > 5e-6 || rep.Results[0].Effect != nil {
		t.Errorf("bayesian %+v", rep.Results[0])
	}
}

// Analyze names the field at fault as the API spells it, also for what
// only the computation finds: arms[i] for the treatment compared, arms[0]
// for the control.
func TestAnalyzeFields(t *testing.T) {
	mean := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}
	prop := stats.Test{Metric: stats.MetricProportion, Relative: true, Alpha: 0.05}
	ok := stats.Arm{N: 10, Successes: 5}
	cases := []struct {
		name string
		a    stats.Analysis
		want []string
	}{
		{"tiny alpha", stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Alpha: 1e-20}, Arms: []stats.Arm{control, treatment}}, []string{"alpha"}},
		{"successes above n", stats.Analysis{Test: prop, Arms: []stats.Arm{ok, ok, {N: 10, Successes: 11}}}, []string{"arms[2].successes"}},
		{"control next to 0", stats.Analysis{Test: prop, Arms: []stats.Arm{{N: 10, Successes: 1e-310}, ok}}, []string{"arms[0].successes"}},
		{"control next to 0, bayesian", stats.Analysis{Test: prop, Engine: stats.EngineBayesian, Arms: []stats.Arm{{N: 10, Successes: 1e-310}, ok}}, []string{"arms[0].successes"}},
		{"units", stats.Analysis{Test: prop, SRMWeights: []float64{0.5, 0.5}, Arms: []stats.Arm{{N: 1e308, Successes: 1}, {N: -1}}}, []string{"arms[0].n", "arms[1].n"}},
		{"nan", stats.Analysis{Test: mean, Arms: []stats.Arm{{N: 10, Sum: math.NaN(), SumSquares: math.Inf(1)}, control}}, []string{"arms[0].sum", "arms[0].sum_squares"}},
		{"prior on the frequentist engine", stats.Analysis{Test: mean, Prior: &stats.Prior{Variance: 1}, Arms: []stats.Arm{control, treatment}}, []string{"prior"}},
		{"prior", stats.Analysis{Test: mean, Engine: stats.EngineBayesian, Prior: &stats.Prior{Mean: math.Inf(1), Variance: -1}, Arms: []stats.Arm{control, treatment}}, []string{"prior.mean", "prior.variance"}},
		{"one-sided sequence at 0.6", stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Alpha: 0.6, Alternative: stats.Less, Sequential: 5000},
			Arms: []stats.Arm{control, treatment}}, []string{"alpha"}},
		{"tuning", stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Alpha: 0.05, Sequential: 1e-300}, Arms: []stats.Arm{control, treatment}}, []string{"sequential.tuning"}},
		{"weights", stats.Analysis{Test: mean, SRMWeights: []float64{0, 1}, Arms: []stats.Arm{control, treatment}}, []string{"srm_weights[0]"}},
		{"covariate on one arm", stats.Analysis{Test: mean, Arms: []stats.Arm{control, gbRATreatment}}, []string{"arms"}},
		{"impossible proportion covariate", stats.Analysis{Test: prop, Arms: []stats.Arm{
			{N: 10, Successes: 5, Covariate: &stats.Covariate{Sum: 8, CrossSum: 1}}, {N: 10, Successes: 5, Covariate: &stats.Covariate{Sum: 11, CrossSum: 0}}}},
			[]string{"arms[0].covariate.cross_sum", "arms[1].covariate.sum"}},
	}
	for _, c := range cases {
		_, err := stats.Analyze(c.a)
		var inv *errs.Invalid
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v, want a field error", c.name, err)
			continue
		}
		if got := inv.Fields(); !equal(got, c.want) {
			t.Errorf("%s: fields %v, want %v (%v)", c.name, got, c.want, err)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzAnalyze: whatever the numbers, Analyze answers an *errs.Invalid or
// a report whose every number is finite.
func FuzzAnalyze(f *testing.F) {
	f.Add(uint8(0), 1200.0, 4210.5, 16230.25, 1185.0, 4333.0, 17120.75, 0.05, 0.5, 1.0)
	f.Add(uint8(8), 3001.0, 300.0, 600.0, 3000.0, 222.0, 555.0, 0.05, -20.0, -10.0)
	f.Add(uint8(1|2|32), 10.0, 1e-310, 0.0, 10.0, 5.0, 0.0, 0.05, 1e300, 5e-324)
	f.Add(uint8(2|8|32), 10.0, 1e150, 1e300, 10.0, -1e150, 1e300, 0.999999, 1e-300, 1e300)
	f.Add(uint8(255), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 2.0, 2.0, 2.0, 0.5, math.Inf(1), math.NaN())
	// Magnitudes up to 1e308: a mean of 3.5e138, sums at and past the
	// limits, a covariate's products near the float64 maximum.
	f.Add(uint8(0), 1200.0, 4.2105e141, 1.623025e280, 1185.0, 4.333e141, 1.712075e280, 0.05, 0.5, 1.0)
	f.Add(uint8(2|8), 1200.0, 4.2105e141, 1.623025e280, 1185.0, 4.333e141, 1.712075e280, 0.05, 1e280, -1e280)
	f.Add(uint8(8|32), 2.0, 1e150, 1e300, 2.0, 1e150, 1e300, 0.05, 1e300, 1e308)
	f.Add(uint8(16|64), 1e12, 1e308, 1e308, 1e12, -1e308, 1.7e308, 0.05, 1e-308, 1e308)
	f.Fuzz(func(t *testing.T, flags uint8, n0, a0, b0, n1, a1, b1, alpha, x0, x1 float64) {
		arm := func(n, a, b, cross float64) stats.Arm {
			out := stats.Arm{N: n, Sum: a, SumSquares: b, Successes: a}
			if flags&8 != 0 {
				out.Covariate = &stats.Covariate{Sum: a / 2, SumSquares: b / 2, CrossSum: cross}
			}
			return out
		}
		an := stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Relative: flags&4 == 0, Alpha: alpha},
			Arms: []stats.Arm{arm(n0, a0, b0, x0), arm(n1, a1, b1, x1)}}
		if flags&1 != 0 {
			an.Test.Metric = stats.MetricProportion
		}
		if flags&2 != 0 {
			an.Engine = stats.EngineBayesian
		}
		if flags&16 != 0 {
			an.SRMWeights = []float64{x0, 1 - x0}
		}
		if flags&32 != 0 {
			an.Prior = &stats.Prior{Mean: x0, Variance: x1}
		}
		if flags&64 != 0 {
			an.Test.Sequential = x1
		}
		if flags&128 != 0 {
			an.Test.Alternative = stats.Greater
		}
		rep, err := stats.Analyze(an)
		if err != nil {
			var inv *errs.Invalid
			if !errors.As(err, &inv) || len(inv.Errors) == 0 {
				t.Fatalf("%+v: %v is not a field error", an, err)
			}
			return
		}
		nums := []float64{}
		if rep.SRMPValue != nil {
			nums = append(nums, *rep.SRMPValue)
		}
		for _, r := range rep.Results {
			if e := r.Effect; e != nil {
				nums = append(nums, e.Expected, e.SE, e.DF)
				for _, x := range []*float64{e.CI[0], e.CI[1], e.PValue} {
					if x != nil {
						nums = append(nums, *x)
					}
				}
			}
			if p := r.Posterior; p != nil {
				nums = append(nums, p.Expected, p.SD, p.CI[0], p.CI[1], p.ChanceToWin, p.Risk[0], p.Risk[1])
			}
		}
		for _, x := range nums {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%+v answered %v in %+v", an, x, rep)
			}
		}
	})
}

// A relative effect does not depend on the metric's unit: the same data
// with every value multiplied by 1e138 (a control mean of 3.5e138) gives
// the same effect, interval and p-value, under both engines. A mean is
// "too close to 0" only beside the values' own scale.
func TestAnalyzeRelativeAtLargeScale(t *testing.T) {
	const s = 1e138
	scaled := func(a stats.Arm) stats.Arm {
		return stats.Arm{N: a.N, Sum: a.Sum * s, SumSquares: a.SumSquares * s * s}
	}
	for _, engine := range []string{stats.EngineFrequentist, stats.EngineBayesian} {
		an := stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}, Engine: engine,
			Arms: []stats.Arm{control, treatment}}
		want, err := stats.Analyze(an)
		if err != nil {
			t.Fatal(err)
		}
		an.Arms = []stats.Arm{scaled(control), scaled(treatment)}
		got, err := stats.Analyze(an)
		if err != nil {
			t.Fatalf("%s at a mean of %g: %v", engine, control.Sum*s/control.N, err)
		}
		w, g := want.Results[0], got.Results[0]
		if engine == stats.EngineBayesian {
			near(t, engine+" expected", g.Posterior.Expected, w.Posterior.Expected, 1e-9)
			near(t, engine+" chance to win", g.Posterior.ChanceToWin, w.Posterior.ChanceToWin, 1e-9)
			continue
		}
		near(t, engine+" expected", g.Effect.Expected, w.Effect.Expected, 1e-9)
		near(t, engine+" se", g.Effect.SE, w.Effect.SE, 1e-9)
		near(t, engine+" p", *g.Effect.PValue, *w.Effect.PValue, 1e-9)
	}
	// A control mean next to 0 beside values of order 1 is still refused.
	_, err := stats.Analyze(stats.Analysis{Test: stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05},
		Arms: []stats.Arm{{N: 4, Sum: 1e-300, SumSquares: 4}, treatment}})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || !equal(inv.Fields(), []string{"arms[0].sum"}) {
		t.Errorf("a control mean of 2.5e-301 beside values of ±1: %v; want arms[0].sum refused", err)
	}
}
