package handlers

import (
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// analyzeRequest is POST /api/stats/analyze's body; pointers tell a field
// left out from a zero.
type analyzeRequest struct {
	Metric      string       `json:"metric"`
	Arms        []analyzeArm `json:"arms"`
	Relative    *bool        `json:"relative"`
	Alpha       *float64     `json:"alpha"`
	Alternative string       `json:"alternative"`
	Sequential  *struct {
		Tuning *float64 `json:"tuning"`
	} `json:"sequential"`
	SRMWeights []float64 `json:"srm_weights"`
}

type analyzeArm struct {
	N          *float64 `json:"n"`
	Sum        *float64 `json:"sum"`
	SumSquares *float64 `json:"sum_squares"`
	Successes  *float64 `json:"successes"`
	Covariate  *struct {
		Sum        *float64 `json:"sum"`
		SumSquares *float64 `json:"sum_squares"`
		CrossSum   *float64 `json:"cross_sum"`
	} `json:"covariate"`
}

// analyzeResult is one treatment arm against arm 0. A metric that cannot
// be analysed has Error and nulls.
type analyzeResult struct {
	Arm      int        `json:"arm"`
	Expected *float64   `json:"expected"`
	CI       []*float64 `json:"ci"`
	SE       *float64   `json:"se"`
	PValue   *float64   `json:"p_value"`
	Error    string     `json:"error,omitempty"`
}

// MaxArms bounds an analysis.
const maxArms = 20

// APIStatsAnalyze runs the statistics engine on numbers from anywhere:
// each arm against arm 0 (the control), and the sample-ratio check.
func (h *Handlers) APIStatsAnalyze(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in analyzeRequest
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	arms, test, err := in.parse()
	if err != nil {
		return err
	}
	out := struct {
		Results   []analyzeResult `json:"results"`
		SRMPValue *float64        `json:"srm_p_value,omitempty"`
	}{Results: []analyzeResult{}}
	if len(in.SRMWeights) > 0 {
		counts := make([]float64, len(arms))
		for i, a := range arms {
			counts[i] = a.N
		}
		p, err := stats.SRM(counts, in.SRMWeights)
		if err != nil {
			return errs.InvalidField("srm_weights", "%s", errors.Unwrap(err))
		}
		out.SRMPValue = &p
	}
	var theta *float64
	if arms[0].Covariate != nil {
		th, err := stats.Theta(arms)
		if err == nil {
			theta = &th
		}
	}
	for i := 1; i < len(arms); i++ {
		r := analyzeResult{Arm: i, CI: []*float64{nil, nil}}
		e, err := stats.Compare(arms[0], arms[i], theta, test)
		switch {
		case errors.Is(err, stats.ErrNotEnoughData), errors.Is(err, stats.ErrInvalid):
			r.Error = err.Error()
		case err != nil:
			return err
		default:
			r.Expected, r.SE, r.PValue = &e.Expected, &e.SE, e.PValue
			r.CI = []*float64{e.CI[0], e.CI[1]}
		}
		out.Results = append(out.Results, r)
	}
	return c.JSON(http.StatusOK, out)
}

// parse checks the request field by field and turns it into arms and a
// test.
func (r analyzeRequest) parse() ([]stats.Arm, stats.Test, error) {
	v := &errs.Invalid{}
	test := stats.Test{Metric: r.Metric, Relative: true, Alpha: 0.05, Alternative: stats.TwoSided}
	if r.Relative != nil {
		test.Relative = *r.Relative
	}
	if r.Alpha != nil {
		test.Alpha = *r.Alpha
		if !(*r.Alpha > 0 && *r.Alpha < 1) {
			v.Add("alpha", "must lie between 0 and 1")
		}
	}
	switch r.Alternative {
	case "":
	case stats.TwoSided, stats.Greater, stats.Less:
		test.Alternative = r.Alternative
	default:
		v.Add("alternative", "must be two-sided, greater or less")
	}
	if r.Sequential != nil {
		test.Sequential = 5000
		if t := r.Sequential.Tuning; t != nil {
			if !(*t > 0) || math.IsInf(*t, 0) {
				v.Add("sequential.tuning", "must be a number above 0")
			}
			test.Sequential = *t
		}
	}
	if r.Metric != stats.MetricMean && r.Metric != stats.MetricProportion {
		v.Add("metric", "must be mean or proportion")
	}
	switch {
	case len(r.Arms) < 2:
		v.Add("arms", "give at least 2 arms: the control first")
	case len(r.Arms) > maxArms:
		v.Add("arms", "at most %d arms", maxArms)
	}
	if len(r.SRMWeights) > 0 {
		sum := 0.0
		for _, w := range r.SRMWeights {
			sum += w
		}
		if len(r.SRMWeights) != len(r.Arms) {
			v.Add("srm_weights", "give one weight per arm (%d), not %d", len(r.Arms), len(r.SRMWeights))
		} else if math.Abs(sum-1) > 1e-6 {
			v.Add("srm_weights", "must sum to 1, not %g", sum)
		}
	}
	arms := make([]stats.Arm, len(r.Arms))
	withCov := 0
	for i, a := range r.Arms {
		f := fmt.Sprintf("arms[%d]", i)
		need := func(name string, x *float64, min float64) float64 {
			switch {
			case x == nil:
				v.Add(f+"."+name, "is required")
			case math.IsNaN(*x) || math.IsInf(*x, 0) || *x < min:
				v.Add(f+"."+name, "must be a number of at least %g", min)
			default:
				return *x
			}
			return 0
		}
		refuse := func(name string, x *float64) {
			if x != nil {
				v.Add(f+"."+name, "is not taken by a %s metric", r.Metric)
			}
		}
		arms[i].N = need("n", a.N, 0)
		switch r.Metric {
		case stats.MetricMean:
			arms[i].Sum = need("sum", a.Sum, math.Inf(-1))
			arms[i].SumSquares = need("sum_squares", a.SumSquares, 0)
			refuse("successes", a.Successes)
		case stats.MetricProportion:
			arms[i].Successes = need("successes", a.Successes, 0)
			refuse("sum", a.Sum)
			refuse("sum_squares", a.SumSquares)
		}
		if cv := a.Covariate; cv != nil {
			withCov++
			if r.Metric != stats.MetricMean {
				v.Add(f+".covariate", "is taken by a mean metric only")
				continue
			}
			arms[i].Covariate = &stats.Covariate{Sum: need("covariate.sum", cv.Sum, math.Inf(-1)),
				SumSquares: need("covariate.sum_squares", cv.SumSquares, 0), CrossSum: need("covariate.cross_sum", cv.CrossSum, math.Inf(-1))}
		}
	}
	if withCov > 0 && withCov < len(r.Arms) {
		v.Add("arms", "give the covariate for every arm or for none")
	}
	return arms, test, v.Err()
}
