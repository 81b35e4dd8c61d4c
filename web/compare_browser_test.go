package web_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/web/webtest"
)

// compareRuns gives the fixture's two support versions newer finished runs
// on its golden set over the same three items: the difference B − A is
// −0.5 on the refund question (a regression), +0.3 on the password one
// and 0 on the dose one, so B − A averages −0.0667.
func compareRuns(t *testing.T, f evalFixture) (refund string) {
	t.Helper()
	ctx := context.Background()
	refund, password, dose := uuid.NewString(), uuid.NewString(), uuid.NewString()
	items := []struct {
		src, query string
		a, b       float64
	}{
		{refund, "How do I get a refund for my annual plan?", 0.9, 0.4},
		{password, "How do I reset my password?", 0.4, 0.7},
		{dose, "Can I double my dose?", 0.6, 0.6},
	}
	for side, version := range []uuid.UUID{f.version.ID, f.fresh.ID} {
		var run string
		if err := f.s.Pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, total, done, mean_reward, finished_at)
			VALUES ($1, $2, $3, 'succeeded', 3, 3, 0.5, now() + interval '1 minute') RETURNING id::text`, f.seeded.OrgID, f.goldenSet, version).Scan(&run); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			reward, answer := it.a, "Answer A to: "+it.query
			if side == 1 {
				reward, answer = it.b, "Answer B to: "+it.query
			}
			if _, err := f.s.Pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, query, answer, reward, critique, scores)
				VALUES ($1, $2, 'all', $3, $4, $5, $6, '{"judge": {"value": 0.5, "explanation": "Graded."}}')`,
				run, it.src, it.query, answer, reward, "Critique of "+answer); err != nil {
				t.Fatal(err)
			}
		}
	}
	return refund
}

// Two versions evaluated on one golden set, compared in the browser: the
// regressed item comes first with both answers and critiques, the page
// fits its cards, and the API answers the same numbers.
func TestBrowserCompareVersions(t *testing.T) {
	f := newEvalFixture(t, webtest.Options{})
	refund := compareRuns(t, f)
	key := f.s.APIKey(f.seeded.OrgID, "compare", string(auth.Viewer))
	path := "/api/models/compare?a=" + f.version.ID.String() + "&b=" + f.fresh.ID.String()
	var api struct {
		Evaluation struct {
			GoldenSetVersionID uuid.UUID `json:"golden_set_version_id"`
			Difference         struct {
				Mean *float64  `json:"mean"`
				CI   []float64 `json:"ci"`
				N    int       `json:"n"`
			} `json:"difference"`
			Regressions int `json:"regressions"`
			Items       []struct {
				SourceID   string   `json:"source_id"`
				Difference *float64 `json:"difference"`
				Regression bool     `json:"regression"`
			} `json:"items"`
		} `json:"evaluation"`
		Lineage []struct {
			Field   string `json:"field"`
			Differs bool   `json:"differs"`
		} `json:"lineage"`
	}
	f.s.API(key, http.MethodGet, path, nil).Must(t, http.StatusOK).JSON(t, &api)
	e := api.Evaluation
	if e.GoldenSetVersionID != f.goldenSet || e.Difference.N != 3 || e.Difference.Mean == nil ||
		math.Abs(*e.Difference.Mean-(-0.2/3)) > 1e-9 || e.Regressions != 1 || len(e.Items) != 3 || e.Items[0].SourceID != refund || !e.Items[0].Regression {
		t.Fatalf("API comparison %+v", e)
	}
	differs := map[string]bool{}
	for _, r := range api.Lineage {
		differs[r.Field] = r.Differs
	}
	if !differs["version"] || differs["base_model"] {
		t.Errorf("lineage differences %v: the versions differ in number, not in base model", differs)
	}
	f.s.API(key, http.MethodGet, path+"&filter=worst", nil).Must(t, http.StatusUnprocessableEntity)
	f.s.API(key, http.MethodGet, "/api/models/compare?a="+f.version.ID.String()+"&b="+uuid.NewString(), nil).Must(t, http.StatusUnprocessableEntity)

	b := f.signIn(t)
	err := chromedp.Do(b,
		chromedp.Navigate(f.s.URL+"/models/versions/"+f.fresh.ID.String()),
		chromedp.WaitVisible(`#compare-link`),
		chromedp.Navigate(f.s.URL+"/models/compare?a="+f.version.ID.String()+"&b="+f.fresh.ID.String()),
		chromedp.WaitVisible(`#compare-items li`),
	)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	webtest.Screenshot(t, b, "after-compare")
	type item struct{ Source, Kind, Text string }
	first, err := chromedp.Run(b, chromedp.Evaluate[item](`(() => { const li = document.querySelector('#compare-items li');
		return {Source: li.dataset.source, Kind: li.dataset.kind, Text: li.innerText}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if first.Source != refund || first.Kind != "regression" || !strings.Contains(first.Text, "Regressed -0.500") ||
		!strings.Contains(first.Text, "Answer A to: How do I get a refund") || !strings.Contains(first.Text, "Critique of Answer B to: How do I get a refund") {
		t.Fatalf("first item on the page: %+v", first)
	}
	if got := text(t, b, `#compare-difference`); got != "-0.067" {
		t.Errorf("the page's B − A reads %q; the API's mean is %v", got, *e.Difference.Mean)
	}
	fit, err := chromedp.Run(b, chromedp.Evaluate[cardFit](fitsCards))
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Wider) > 0 || len(fit.Overflow) > 0 {
		t.Errorf("the compare page does not fit its cards at 1280 px: %q %q", fit.Wider, fit.Overflow)
	}
	// The regressions filter keeps the one regressed item.
	err = chromedp.Do(b,
		chromedp.Click(`#compare-filters a[href*="filter=regressions"]`),
		chromedp.WaitVisible(`#compare-filters strong`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('#compare-items li').length`)); err != nil || n != 1 {
		t.Fatalf("%d items under the regressions filter (%v)", n, err)
	}
}
