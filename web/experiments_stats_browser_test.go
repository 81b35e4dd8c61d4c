package web_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/web/webtest"
)

// A simulated experiment through the API whose units sent feedback before
// their first exposure that predicts their feedback after it: four goal
// metrics and a latency guardrail. The panel shows what CUPED did (the
// variance reduction and the interval without it, beside each metric) and
// the p-values adjusted for the four metrics; once an admin makes the
// Bayesian engine the organisation's default on the experiments list, the
// same panel shows the chance to win and the risk. The new-experiment form
// is prefilled with the seed's criteria.
func TestBrowserExperimentStatistics(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	var ids []string
	for _, v := range []string{"1.0.0", "1.1.0"} {
		var mv struct {
			ID string `json:"id"`
		}
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "version": v, "model_id": "ft:gpt-4o-mini:acme::" + v,
			"kind": "full"}).Must(t, http.StatusCreated).JSON(t, &mv)
		ids = append(ids, mv.ID)
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-1.1.0", "control_model_id": ids[0],
		"treatment_model_id": ids[1], "metrics": []string{"thumbs_up_rate", "avg_rating", "avg_helpfulness", "correction_rate"},
		"guardrails": []string{"latency"}, "min_sample_per_arm": 50, "min_improvement": map[string]float64{"thumbs_up_rate": 0.05},
		"max_harm": map[string]float64{"latency": 0.1}}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/support-1.1.0/start", nil).Must(t, http.StatusOK)

	// Each unit's propensity to like an answer lasts: 8 thumbs before its
	// exposure, 8 after; the treatment adds 6 points.
	r := rand.New(rand.NewPCG(9, 9))
	const n = 400
	units, propensity := make([]string, n), make([]float64, n)
	var pre []map[string]any
	for i := range units {
		units[i], propensity[i] = fmt.Sprintf("user-%d", i), 0.1+0.8*r.Float64()
		for range 8 {
			pre = append(pre, thumb(units[i], r.Float64() < propensity[i], ""))
		}
	}
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": pre}).Must(t, http.StatusOK)
	var assigned struct {
		Data []assignmentDoc `json:"data"`
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-1.1.0/assign-batch", map[string]any{"unit_ids": units}).
		Must(t, http.StatusOK).JSON(t, &assigned)
	var post []map[string]any
	for i, a := range assigned.Data {
		p := propensity[i] + 0.06*float64(a.ArmIndex)
		for range 8 {
			post = append(post, thumb(a.UnitID, r.Float64() < p, "support-1.1.0"))
		}
		post = append(post, map[string]any{"query": "q", "response": "r " + a.UnitID, "feedback_type": "detailed", "user_id": a.UnitID,
			"experiment": "support-1.1.0", "rating": 1 + int(4*p+0.5*r.Float64()), "latency_ms": 700 + r.IntN(400),
			"dimensions": map[string]int{"helpfulness": 1 + r.IntN(5)}, "correction": map[bool]string{true: "Better answer."}[r.Float64() < 0.2]})
	}
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": post}).Must(t, http.StatusOK)

	b := webtest.Browser(t)
	signIn(t, b, s, "ada@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/experiments/support-1.1.0"), chromedp.WaitVisible(`#analysis-cuped`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-panel-cuped")
	if got := text(t, b, `#analysis-corrections`); !strings.Contains(got, "adjusted for 4 metrics (Benjamini–Hochberg)") {
		t.Errorf("corrections: %q", got)
	}
	if got := text(t, b, `#analysis-cuped`); !strings.Contains(got, "14 days") {
		t.Errorf("CUPED: %q", got)
	}
	if got := text(t, b, `tr[data-metric=thumbs_up_rate] .cuped`); !strings.HasPrefix(got, "CUPED: variance −") {
		t.Errorf("the thumbs-up rate's variance reduction: %q", got)
	}
	if got := text(t, b, `tr[data-metric=thumbs_up_rate] .criterion`); got != "Criterion: improves by more than +5.0%" {
		t.Errorf("criterion: %q", got)
	}
	if got := text(t, b, `tr[data-metric=latency] .criterion`); got != "Limit: rises by less than +10.0%" {
		t.Errorf("limit: %q", got)
	}
	adjusted := eval[[]string](t, b, `[...document.querySelectorAll('#metrics td.adjusted-p')].map(td => td.innerText)`)
	if len(adjusted) != 5 || adjusted[0] == "—" {
		t.Errorf("adjusted p-values: %v", adjusted)
	}

	// The organisation's default engine, from the experiments list.
	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/experiments"),
		chromedp.SetValue(`select[name=default_engine]`, "bayesian"),
		chromedp.Submit(`#default-engine-form`),
		chromedp.WaitVisible(`select[name=default_engine]`),
		chromedp.Navigate(s.URL+"/experiments/support-1.1.0"),
		chromedp.WaitVisible(`#metrics td.chance-to-win`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-panel-bayesian")
	if got := text(t, b, `#analysis-engine`); !strings.HasPrefix(got, "Bayesian engine (the organisation's default)") {
		t.Errorf("engine: %q", got)
	}
	chance := text(t, b, `tr[data-metric=thumbs_up_rate] td.chance-to-win`)
	risk := text(t, b, `tr[data-metric=thumbs_up_rate] td.risk`)
	if !strings.HasSuffix(chance, "%") || !strings.HasSuffix(risk, "%") {
		t.Errorf("chance to win %q, risk %q", chance, risk)
	}
	if got := text(t, b, `#verdict-reason`); !strings.Contains(strings.ToLower(got), "chance to win") {
		t.Errorf("the Bayesian verdict: %q", got)
	}

	// The panel's analysis form: a refusal beside it, then this
	// experiment's own engine and no variance reduction.
	err = chromedp.Do(b,
		chromedp.SetValue(`#analysis-form input[name=cuped_days]`, "91"),
		// As a script-less client sends it, past the field's own limits.
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#analysis-form').submit()`),
		chromedp.WaitVisible(`#err-analysis`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#err-analysis`); !strings.Contains(got, "90") {
		t.Errorf("refused days: %q", got)
	}
	err = chromedp.Do(b,
		chromedp.SetValue(`#analysis-form input[name=cuped_days]`, "0"),
		chromedp.SetValue(`#analysis-form select[name=engine]`, "frequentist"),
		chromedp.Click(`#change-analysis`),
		chromedp.WaitVisible(`#metrics td.adjusted-p`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, b, `#analysis-engine`) + " " + text(t, b, `#analysis-cuped`); !strings.Contains(got, "Frequentist engine (chosen for this experiment)") ||
		!strings.Contains(got, "No variance reduction") {
		t.Errorf("after changing the analysis: %q", got)
	}
	var res struct {
		Engine    string `json:"engine"`
		CUPEDDays int    `json:"cuped_days"`
		Metrics   []struct {
			Criterion *float64 `json:"criterion"`
		} `json:"metrics"`
	}
	s.API(admin, http.MethodGet, "/api/experiments/support-1.1.0/results", nil).Must(t, http.StatusOK).JSON(t, &res)
	if res.Engine != "frequentist" || res.CUPEDDays != 0 || res.Metrics[0].Criterion == nil || *res.Metrics[0].Criterion != 0.05 {
		t.Errorf("results after the change (the criteria stay): %+v", res)
	}

	// The form is prefilled with the seed's criteria.
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/experiments/new?model=support"), chromedp.WaitVisible(`#ab-analysis`)); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "after-experiment-new-criteria")
	got := eval[[]string](t, b, `['thumbs_up_rate', 'latency'].map(m => document.querySelector('select[name="metric.' + m + '"]').value + ' ' +
		document.querySelector('input[name="criterion.' + m + '"]').value)`)
	if fmt.Sprint(got) != "[primary 5 guardrail 10]" {
		t.Errorf("prefilled criteria: %v", got)
	}
}

// thumb is one thumb of a unit, attributed to the experiment when key is
// given.
func thumb(unit string, up bool, key string) map[string]any {
	kind := "thumbs_down"
	if up {
		kind = "thumbs_up"
	}
	item := map[string]any{"query": "q", "response": "r", "feedback_type": kind, "user_id": unit}
	if key != "" {
		item["experiment"] = key
	}
	return item
}
