package web_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/curate/curate/web/webtest"
)

type analyzeDoc struct {
	Results []struct {
		Arm      int        `json:"arm"`
		Expected *float64   `json:"expected"`
		CI       []*float64 `json:"ci"`
		SE       *float64   `json:"se"`
		PValue   *float64   `json:"p_value"`
		Error    string     `json:"error"`
	} `json:"results"`
	SRMPValue *float64 `json:"srm_p_value"`
}

// POST /api/stats/analyze with the contract's example: the relative effect
// and its interval as SciPy computes them (see internal/stats), the SRM
// p-value, one-sided intervals with a null side, a confidence sequence, and
// field-level refusals.
func TestStatsAnalyzeAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "analyst", "viewer")
	arms := []map[string]any{{"n": 1200, "sum": 4210.5, "sum_squares": 16230.25}, {"n": 1185, "sum": 4333.0, "sum_squares": 17120.75}}
	var out analyzeDoc
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": arms, "relative": true, "alpha": 0.05,
		"alternative": "two-sided", "srm_weights": []float64{0.5, 0.5}}).Must(t, http.StatusOK).JSON(t, &out)
	r := out.Results[0]
	if len(out.Results) != 1 || r.Arm != 1 || math.Abs(*r.Expected-0.04212043730336599) > 1e-12 || math.Abs(*r.CI[0]-0.017066542853942303) > 1e-9 ||
		math.Abs(*r.PValue-0.0009924716057760907) > 1e-9 || math.Abs(*out.SRMPValue-0.7587310596673087) > 1e-9 {
		t.Errorf("analysis %+v, srm %v", r, out.SRMPValue)
	}
	out = analyzeDoc{}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": arms, "alternative": "greater"}).
		Must(t, http.StatusOK).JSON(t, &out)
	if r := out.Results[0]; r.CI[0] == nil || r.CI[1] != nil || out.SRMPValue != nil {
		t.Errorf("one-sided: %+v", r)
	}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": arms, "relative": false,
		"sequential": map[string]any{"tuning": 5000}}).Must(t, http.StatusOK).JSON(t, &out)
	if r := out.Results[0]; math.Abs(*r.CI[0]-0.012265838208716351) > 1e-9 || math.Abs(*r.CI[1]-0.2833143305676545) > 1e-9 {
		t.Errorf("sequential: %v %v", *r.CI[0], *r.CI[1])
	}
	// Not enough data is an answer, not a division by zero; the split is
	// still checked from the arms' n.
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "proportion",
		"arms": []map[string]any{{"n": 1, "successes": 1}, {"n": 5000, "successes": 40}}, "srm_weights": []float64{0.5, 0.5}}).
		Must(t, http.StatusOK).JSON(t, &out)
	if r := out.Results[0]; r.Error == "" || r.Expected != nil || out.SRMPValue == nil || *out.SRMPValue > 0.001 {
		t.Errorf("not enough data: %+v srm %v", r, out.SRMPValue)
	}

	var p problemDoc
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "median", "alpha": 2, "alternative": "sideways",
		"arms": []map[string]any{{"n": 10, "sum": 5}}, "srm_weights": []float64{0.7, 0.7}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "alpha,alternative,metric,arms,srm_weights" {
		t.Errorf("bad request named %q", p.fields())
	}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": []map[string]any{
		{"n": 10, "sum": 5, "sum_squares": 9, "covariate": map[string]any{"sum": 1, "sum_squares": 1, "cross_sum": 1}},
		{"n": 10, "sum": 5, "successes": 3}}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "arms[1].sum_squares,arms[1].successes,arms" {
		t.Errorf("bad arms named %q", p.fields())
	}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": arms, "bogus": 1}).Must(t, http.StatusUnprocessableEntity)
}

type bayesDoc struct {
	Results []struct {
		Arm         int        `json:"arm"`
		Expected    *float64   `json:"expected"`
		CI          []*float64 `json:"ci"`
		ChanceToWin *float64   `json:"chance_to_win"`
		Risk        []*float64 `json:"risk"`
		Error       string     `json:"error"`
	} `json:"results"`
	SRMPValue *float64 `json:"srm_p_value"`
}

// The Bayesian engine on the API, with GrowthBook's published values
// (packages/stats/tests/bayesian/test_tests.py: TestNorm's
// test_bayesian_gaussian_ab_test and test_bayesian_gaussian_ab_test_informative,
// TestBinom's test_bayesian_binomial_ab_test), and CUPED on the API with
// tests/test_gbstats.py's test_analyze_metric_df_ra.
func TestStatsAnalyzeBayesianAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "analyst", "viewer")
	means := []map[string]any{{"n": 10, "sum": 100, "sum_squares": 1002.25}, {"n": 10, "sum": 105, "sum_squares": 1111.5}}
	near := func(what string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 5e-6 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	var out bayesDoc
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": means, "engine": "bayesian",
		"srm_weights": []float64{0.5, 0.5}}).Must(t, http.StatusOK).JSON(t, &out)
	r := out.Results[0]
	near("expected", r.Expected, 0.05)
	near("ci low", r.CI[0], -0.02)
	near("ci high", r.CI[1], 0.12)
	near("chance to win", r.ChanceToWin, 0.91923)
	near("control risk", r.Risk[0], 0.05131)
	near("treatment risk", r.Risk[1], 0.00131)
	if out.SRMPValue == nil || *out.SRMPValue != 1 {
		t.Errorf("srm %v", out.SRMPValue)
	}

	out = bayesDoc{}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": means, "engine": "bayesian",
		"prior": map[string]any{"mean": 0.1, "variance": 0.1}}).Must(t, http.StatusOK).JSON(t, &out)
	r = out.Results[0]
	near("informative expected", r.Expected, 0.05063)
	near("informative chance to win", r.ChanceToWin, 0.92315)
	near("informative treatment risk", r.Risk[1], 0.00123)

	out = bayesDoc{}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "proportion", "engine": "bayesian",
		"arms": []map[string]any{{"n": 100, "successes": 49}, {"n": 100, "successes": 51}, {"n": 1, "successes": 1}}}).
		Must(t, http.StatusOK).JSON(t, &out)
	near("binomial expected", out.Results[0].Expected, 0.04082)
	near("binomial control risk", out.Results[0].Risk[0], 0.0814)
	if r := out.Results[1]; r.Arm != 2 || r.Error == "" || r.Expected != nil || r.ChanceToWin != nil || len(r.Risk) != 2 || r.Risk[0] != nil {
		t.Errorf("an arm of one unit: %+v", r)
	}

	// CUPED, frequentist and relative, as GrowthBook computes it.
	var freq analyzeDoc
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": []map[string]any{
		{"n": 3001, "sum": 300, "sum_squares": 600, "covariate": map[string]any{"sum": 210, "sum_squares": 415, "cross_sum": -20}},
		{"n": 3000, "sum": 222, "sum_squares": 555, "covariate": map[string]any{"sum": 120, "sum_squares": 405, "cross_sum": -10}}}}).
		Must(t, http.StatusOK).JSON(t, &freq)
	if r := freq.Results[0]; math.Abs(*r.Expected-(-0.281707154)) > 5e-10 || math.Abs(*r.PValue-0.003732549) > 5e-10 {
		t.Errorf("CUPED: %v p %v", *r.Expected, *r.PValue)
	}

	// What the engine does not take.
	var p problemDoc
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": means, "engine": "bayesian",
		"alternative": "greater", "sequential": map[string]any{"tuning": 100}, "prior": map[string]any{"mean": 0}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "prior.variance,alternative,sequential" {
		t.Errorf("bayesian refusals named %q", p.fields())
	}
	s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": means, "engine": "oracle",
		"prior": map[string]any{"mean": 0, "variance": 1}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "engine,prior" {
		t.Errorf("engine refusals named %q", p.fields())
	}
}

// Numbers the engine cannot turn into finite answers are a 422 on the
// field at fault, never a 500: an alpha so small the interval is infinite,
// an n beyond any experiment beside srm_weights, a control mean next to 0
// (a subnormal count of successes) under a relative effect, under either
// engine; and impossible sums.
func TestStatsAnalyzeRefusesNonFinite(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "analyst", "viewer")
	arms := []map[string]any{{"n": 1200, "sum": 4210.5, "sum_squares": 16230.25}, {"n": 1185, "sum": 4333.0, "sum_squares": 17120.75}}
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"tiny alpha", map[string]any{"metric": "mean", "arms": arms, "alpha": 1e-20}, "alpha"},
		{"tiny alpha, bayesian", map[string]any{"metric": "mean", "arms": arms, "alpha": 1e-20, "engine": "bayesian"}, "alpha"},
		{"huge n", map[string]any{"metric": "proportion", "srm_weights": []float64{0.5, 0.5},
			"arms": []map[string]any{{"n": 1e308, "successes": 5}, {"n": 1e308, "successes": 7}}}, "arms[0].n,arms[1].n"},
		{"subnormal successes", map[string]any{"metric": "proportion",
			"arms": []map[string]any{{"n": 10, "successes": 1e-310}, {"n": 10, "successes": 5}}}, "arms[0].successes"},
		{"subnormal successes, bayesian", map[string]any{"metric": "proportion", "engine": "bayesian",
			"arms": []map[string]any{{"n": 10, "successes": 1e-310}, {"n": 10, "successes": 5}}}, "arms[0].successes"},
		{"successes above n", map[string]any{"metric": "proportion",
			"arms": []map[string]any{{"n": 10, "successes": 11}, {"n": 10, "successes": 5}}}, "arms[0].successes"},
		{"impossible sum of squares", map[string]any{"metric": "mean",
			"arms": []map[string]any{{"n": 10, "sum": 10, "sum_squares": 1}, arms[1]}}, "arms[0].sum_squares"},
		{"impossible cross sum", map[string]any{"metric": "mean", "arms": []map[string]any{
			{"n": 10, "sum": 10, "sum_squares": 20, "covariate": map[string]any{"sum": 10, "sum_squares": 20, "cross_sum": 1e6}},
			{"n": 10, "sum": 10, "sum_squares": 20, "covariate": map[string]any{"sum": 10, "sum_squares": 20, "cross_sum": 20}}}}, "arms[0].covariate.cross_sum"},
		{"huge sums", map[string]any{"metric": "mean", "arms": []map[string]any{{"n": 10, "sum": 1e200, "sum_squares": 1e300}, arms[1]}}, "arms[0].sum"},
	} {
		var p problemDoc
		s.API(key, http.MethodPost, "/api/stats/analyze", c.body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != c.field {
			t.Errorf("%s: fields %q, want %q (%+v)", c.name, p.fields(), c.field, p.Errors)
		}
	}
}

// A relative effect is the same in any unit: the contract's example with
// every value ×1e138 (a control mean of 3.5e138) answers the example's
// effect, where it was once called "too close to 0".
func TestStatsAnalyzeLargeScale(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "analyst", "viewer")
	arms := []map[string]any{{"n": 1200, "sum": 4210.5e138, "sum_squares": 16230.25e276}, {"n": 1185, "sum": 4333.0e138, "sum_squares": 17120.75e276}}
	var out analyzeDoc
	res := s.API(key, http.MethodPost, "/api/stats/analyze", map[string]any{"metric": "mean", "arms": arms})
	if res.Status != http.StatusOK {
		t.Fatalf("a control mean of 3.5e138: %d %s", res.Status, res.Body)
	}
	res.JSON(t, &out)
	if r := out.Results[0]; r.Expected == nil || math.Abs(*r.Expected-0.04212043730336599) > 1e-9 || math.Abs(*r.PValue-0.0009924716057760907) > 1e-9 {
		t.Errorf("a control mean of 3.5e138: %+v; want the example's relative effect 0.0421", r)
	}
}
