package handlers

import (
	"errors"
	"fmt"
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
	Engine     string    `json:"engine"`
	Prior      *struct {
		Mean     *float64 `json:"mean"`
		Variance *float64 `json:"variance"`
	} `json:"prior"`
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

// frequentistResult is one treatment arm against arm 0. A metric that
// cannot be analysed has Error and nulls.
type frequentistResult struct {
	Arm      int        `json:"arm"`
	Expected *float64   `json:"expected"`
	CI       []*float64 `json:"ci"`
	SE       *float64   `json:"se"`
	PValue   *float64   `json:"p_value"`
	Error    string     `json:"error,omitempty"`
}

// bayesianResult is the Bayesian engine's answer for one treatment arm.
type bayesianResult struct {
	Arm         int        `json:"arm"`
	Expected    *float64   `json:"expected"`
	CI          []*float64 `json:"ci"`
	ChanceToWin *float64   `json:"chance_to_win"`
	Risk        []*float64 `json:"risk"`
	Error       string     `json:"error,omitempty"`
}

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
	a, err := in.analysis()
	if err != nil {
		return err
	}
	rep, err := stats.Analyze(a)
	if err != nil {
		return err
	}
	out := struct {
		Results   []any    `json:"results"`
		SRMPValue *float64 `json:"srm_p_value,omitempty"`
	}{Results: []any{}, SRMPValue: rep.SRMPValue}
	for _, r := range rep.Results {
		switch p, e := r.Posterior, r.Effect; {
		case a.Engine == stats.EngineBayesian:
			b := bayesianResult{Arm: r.Arm, CI: []*float64{nil, nil}, Risk: []*float64{nil, nil}, Error: r.Error}
			if p != nil {
				b.Expected, b.ChanceToWin = &p.Expected, &p.ChanceToWin
				b.CI = []*float64{&p.CI[0], &p.CI[1]}
				b.Risk = []*float64{&p.Risk[0], &p.Risk[1]}
			}
			out.Results = append(out.Results, b)
		default:
			f := frequentistResult{Arm: r.Arm, CI: []*float64{nil, nil}, Error: r.Error}
			if e != nil {
				f.Expected, f.SE, f.PValue = &e.Expected, &e.SE, e.PValue
				f.CI = []*float64{e.CI[0], e.CI[1]}
			}
			out.Results = append(out.Results, f)
		}
	}
	return c.JSON(http.StatusOK, out)
}

// analysis turns the request into the engine's analysis: fields left out
// and fields the metric or engine does not take are refused here, the
// numbers themselves by the analysis's own checks, all in one answer.
func (r analyzeRequest) analysis() (stats.Analysis, error) {
	v := &errs.Invalid{}
	a := stats.Analysis{Test: stats.Test{Metric: r.Metric, Relative: true, Alpha: 0.05, Alternative: r.Alternative},
		Engine: r.Engine, SRMWeights: r.SRMWeights}
	if a.Engine == "" {
		a.Engine = stats.EngineFrequentist
	}
	if r.Relative != nil {
		a.Test.Relative = *r.Relative
	}
	if r.Alpha != nil {
		a.Test.Alpha = *r.Alpha
	}
	if r.Sequential != nil {
		a.Test.Sequential = 5000
		if t := r.Sequential.Tuning; t != nil {
			a.Test.Sequential = *t
			if *t == 0 {
				v.Add("sequential.tuning", "must be a number above 0")
			}
		}
	}
	if p := r.Prior; p != nil {
		a.Prior = &stats.Prior{}
		if p.Mean != nil {
			a.Prior.Mean = *p.Mean
		}
		if p.Variance == nil {
			v.Add("prior.variance", "is required: the prior's variance on the relative effect")
		} else {
			a.Prior.Variance = *p.Variance
		}
	}
	a.Arms = make([]stats.Arm, len(r.Arms))
	for i, arm := range r.Arms {
		f := fmt.Sprintf("arms[%d].", i)
		need := func(name string, x *float64) float64 {
			if x == nil {
				v.Add(f+name, "is required")
				return 0
			}
			return *x
		}
		refuse := func(name string, x *float64) {
			if x != nil {
				v.Add(f+name, "is not taken by a %s metric", r.Metric)
			}
		}
		a.Arms[i].N = need("n", arm.N)
		switch r.Metric {
		case stats.MetricMean:
			a.Arms[i].Sum = need("sum", arm.Sum)
			a.Arms[i].SumSquares = need("sum_squares", arm.SumSquares)
			refuse("successes", arm.Successes)
		case stats.MetricProportion:
			a.Arms[i].Successes = need("successes", arm.Successes)
			refuse("sum", arm.Sum)
			refuse("sum_squares", arm.SumSquares)
		}
		if cv := arm.Covariate; cv != nil {
			cov := &stats.Covariate{Sum: need("covariate.sum", cv.Sum), CrossSum: need("covariate.cross_sum", cv.CrossSum)}
			switch r.Metric {
			case stats.MetricMean:
				cov.SumSquares = need("covariate.sum_squares", cv.SumSquares)
			case stats.MetricProportion:
				refuse("covariate.sum_squares", cv.SumSquares)
			}
			a.Arms[i].Covariate = cov
		}
	}
	// The analysis's own checks, less those on fields already refused.
	var checks *errs.Invalid
	if errors.As(a.Validate(), &checks) {
		seen := v.ByField()
		for _, fe := range checks.Errors {
			if _, dup := seen[fe.Field]; !dup {
				v.Add(fe.Field, "%s", fe.Message)
			}
		}
	}
	return a, v.Err()
}
