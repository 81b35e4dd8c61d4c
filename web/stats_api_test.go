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
