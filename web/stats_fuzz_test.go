package web_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

// fuzzNumber writes x as a JSON number; a NaN or an infinity, which JSON
// cannot carry, as 1e400, a number no float64 holds.
func fuzzNumber(x float64) json.RawMessage {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return json.RawMessage("1e400")
	}
	return json.RawMessage(strconv.FormatFloat(x, 'g', -1, 64))
}

// FuzzStatsAnalyzeAPI sends POST /api/stats/analyze random and extreme
// numbers under every engine, metric and option: the answer is a 200 or a
// 4xx with problem+json, never a 5xx. `go test` runs it over the seeds
// below; `go test -fuzz FuzzStatsAnalyzeAPI ./web/` explores further.
func FuzzStatsAnalyzeAPI(f *testing.F) {
	s := webtest.New(f, webtest.Options{Configure: func(c *config.Config) { c.APIRate, c.APIBurst = 1e6, 1e6 }})
	key := s.APIKey(s.Org("acme"), "analyst", "viewer")

	// flags: bit 0 proportion, 1 bayesian, 2 absolute, 3 covariate,
	// 4 srm_weights, 5 prior, 6 sequential, 7 one-sided.
	f.Add(uint8(0), 1200.0, 4210.5, 16230.25, 1185.0, 4333.0, 17120.75, 0.05, 0.5, 1.0)
	f.Add(uint8(2), 1200.0, 4210.5, 16230.25, 1185.0, 4333.0, 17120.75, 0.05, 0.1, 0.1)
	f.Add(uint8(0), 1200.0, 4210.5, 16230.25, 1185.0, 4333.0, 17120.75, 1e-20, 0.5, 1.0)   // issue: alpha 1e-20
	f.Add(uint8(2), 1200.0, 4210.5, 16230.25, 1185.0, 4333.0, 17120.75, 1e-20, 0.5, 1.0)   // the same, bayesian
	f.Add(uint8(1|16), 1e308, 5.0, 0.0, 1e308, 7.0, 0.0, 0.05, 0.5, 1.0)                   // issue: n 1e308 with srm_weights
	f.Add(uint8(1), 10.0, 5e-324, 0.0, 10.0, 5.0, 0.0, 0.05, 0.5, 1.0)                     // issue: subnormal successes
	f.Add(uint8(1|2|32), 10.0, 1e-310, 0.0, 10.0, 5.0, 0.0, 0.05, 1e300, 5e-324)           // subnormal control, extreme prior
	f.Add(uint8(8|64), 3001.0, 300.0, 600.0, 3000.0, 222.0, 555.0, 0.05, -20.0, -10.0)     // CUPED, sequential
	f.Add(uint8(8|2|32), 10.0, 1e150, 1e300, 10.0, -1e150, 1e300, 0.999999, 1e-300, 1e300) // sums at the limits
	f.Add(uint8(255), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 2.0, 2.0, 2.0, 0.5, math.Inf(1), math.NaN())
	f.Add(uint8(4|128), 2.0, 0.0, 0.0, 2.0, 1e-320, 1e-320, 0.49, 0.0, 1e-300)
	// Magnitudes up to 1e308: a control mean of 3.5e138 (issue 33: called
	// "too close to 0"), sums and products near the float64 maximum.
	f.Add(uint8(0), 1200.0, 4.2105e141, 1.623025e280, 1185.0, 4.333e141, 1.712075e280, 0.05, 0.5, 1.0)
	f.Add(uint8(2|8), 1200.0, 4.2105e141, 1.623025e280, 1185.0, 4.333e141, 1.712075e280, 0.05, 1e280, -1e280)
	f.Add(uint8(8|32), 2.0, 1e150, 1e300, 2.0, 1e150, 1e300, 0.05, 1e300, 1e308)
	f.Add(uint8(16|64), 1e12, 1e308, 1e308, 1e12, -1e308, 1.7e308, 0.05, 1e-308, 1e308)

	f.Fuzz(func(t *testing.T, flags uint8, n0, a0, b0, n1, a1, b1, alpha, x0, x1 float64) {
		arm := func(n, a, b, cross float64) map[string]any {
			m := map[string]any{"n": fuzzNumber(n)}
			if flags&1 != 0 {
				m["successes"] = fuzzNumber(a)
			} else {
				m["sum"], m["sum_squares"] = fuzzNumber(a), fuzzNumber(b)
			}
			if flags&8 != 0 {
				cov := map[string]any{"sum": fuzzNumber(a / 2), "cross_sum": fuzzNumber(cross)}
				if flags&1 == 0 {
					cov["sum_squares"] = fuzzNumber(b / 2)
				}
				m["covariate"] = cov
			}
			return m
		}
		body := map[string]any{"metric": "mean", "arms": []any{arm(n0, a0, b0, x0), arm(n1, a1, b1, x1)}, "alpha": fuzzNumber(alpha)}
		if flags&1 != 0 {
			body["metric"] = "proportion"
		}
		if flags&2 != 0 {
			body["engine"] = "bayesian"
		}
		if flags&4 != 0 {
			body["relative"] = false
		}
		if flags&16 != 0 {
			body["srm_weights"] = []any{fuzzNumber(x0), fuzzNumber(1 - x0)}
		}
		if flags&32 != 0 {
			body["prior"] = map[string]any{"mean": fuzzNumber(x0), "variance": fuzzNumber(x1)}
		}
		if flags&64 != 0 {
			body["sequential"] = map[string]any{"tuning": fuzzNumber(x1)}
		}
		if flags&128 != 0 {
			body["alternative"] = "greater"
		}
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, s.URL+"/api/stats/analyze", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%s answered %d: %s", b, res.StatusCode, out)
		case res.StatusCode == http.StatusOK:
			var doc analyzeDoc
			if err := json.Unmarshal(out, &doc); err != nil || len(doc.Results) != 1 {
				t.Fatalf("%s answered %s (%v)", b, out, err)
			}
		case res.Header.Get("Content-Type") != "application/problem+json":
			t.Fatalf("%s answered %d as %s: %s", b, res.StatusCode, res.Header.Get("Content-Type"), out)
		}
	})
}

// FuzzStatsAgreementAPI sends POST /api/stats/agreement three units of two
// raters with numbers of any magnitude up to ±1.8e308, under every metric
// and level: the answer is a 200 with a finite value or a 4xx with
// problem+json, never a 5xx.
func FuzzStatsAgreementAPI(f *testing.F) {
	s := webtest.New(f, webtest.Options{Configure: func(c *config.Config) { c.APIRate, c.APIBurst = 1e6, 1e6 }})
	key := s.APIKey(s.Org("acme"), "notebook", "viewer")

	// how: metric and level, as below.
	f.Add(uint8(2), 1e200, -1e200, 1e200, 1e200, -1e200, 0.0) // the matrix
	f.Add(uint8(3), 1e308, 1.7e308, 0.0, 5e-324, 1e308, 1e-300)
	f.Add(uint8(2), math.MaxFloat64, -math.MaxFloat64, 0.0, 1.0, math.Inf(1), math.NaN())
	f.Add(uint8(1), 1.0, 2.0, 3.0, 3.0, 2.0, 1.0)
	f.Add(uint8(4), 1.0, 1.0, 2.0, 2.0, 1.0, 2.0)
	f.Add(uint8(5), 1e-320, 2e-320, 1e-320, 1e-320, 0.0, 2e-320)
	f.Fuzz(func(t *testing.T, how uint8, a, b, c, d, e, g float64) {
		choices := []struct{ metric, level string }{
			{"krippendorff_alpha", "nominal"}, {"krippendorff_alpha", "ordinal"}, {"krippendorff_alpha", "interval"},
			{"krippendorff_alpha", "ratio"}, {"cohen_kappa", ""}, {"fleiss_kappa", ""},
		}
		ch := choices[int(how)%len(choices)]
		body, err := json.Marshal(map[string]any{"metric": ch.metric, "level": ch.level, "ratings": [][]json.RawMessage{
			{fuzzNumber(a), fuzzNumber(b)}, {fuzzNumber(c), fuzzNumber(d)}, {fuzzNumber(e), fuzzNumber(g)}}})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, s.URL+"/api/stats/agreement", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%s answered %d: %s", body, res.StatusCode, out)
		case res.StatusCode == http.StatusOK:
			var doc struct {
				Value *float64 `json:"value"`
			}
			if err := json.Unmarshal(out, &doc); err != nil || doc.Value == nil {
				t.Fatalf("%s answered %s (%v)", body, out, err)
			}
		case res.Header.Get("Content-Type") != "application/problem+json":
			t.Fatalf("%s answered %d as %s: %s", body, res.StatusCode, res.Header.Get("Content-Type"), out)
		}
	})
}
