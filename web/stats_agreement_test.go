package web_test

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// krippendorff2011 is the reliability data of Krippendorff, "Computing
// Krippendorff's Alpha-Reliability" (2011), section C, one row per unit
// and one column per observer (A to D), null where an observer gave no
// value.
var krippendorff2011 = [][]any{
	{1, 1, nil, 1}, {2, 2, 3, 2}, {3, 3, 3, 3}, {3, 3, 3, 3}, {2, 2, 2, 2}, {1, 2, 3, 4},
	{4, 4, 4, 4}, {1, 1, 2, 1}, {2, 2, 2, 2}, {nil, 5, 5, 5}, {nil, nil, 1, 1}, {nil, 3, nil, nil},
}

// POST /api/stats/agreement answers the contract's four fields with the
// figures the published examples give: Krippendorff (2011) α at all four
// levels (0.743 nominal, 0.815 ordinal, 0.849 interval, 0.797 ratio, 40
// pairable values in 11 units from 4 observers), Wikipedia's "Cohen's
// kappa" example (κ = 0.4) and Wikipedia's "Fleiss' kappa" example
// (κ = 0.210).
func TestStatsAgreementAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "notebook", "viewer")
	post := func(body map[string]any) map[string]any {
		t.Helper()
		var out map[string]any
		s.API(key, http.MethodPost, "/api/stats/agreement", body).Must(t, http.StatusOK).JSON(t, &out)
		return out
	}
	for level, want := range map[string]float64{"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797} {
		out := post(map[string]any{"metric": "krippendorff_alpha", "level": level, "ratings": krippendorff2011})
		keys := make([]string, 0, len(out))
		for k := range out {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"pairable_values", "raters", "units", "value"}) {
			t.Errorf("%s: fields %v; want value, units, raters, pairable_values", level, keys)
		}
		if v, _ := out["value"].(float64); math.Abs(v-want) > 0.0005 || out["units"] != 11.0 || out["raters"] != 4.0 || out["pairable_values"] != 40.0 {
			t.Errorf("%s: %v; want value %.3f, 11 units, 4 raters, 40 pairable values", level, out, want)
		}
	}
	// level defaults to nominal.
	if out := post(map[string]any{"metric": "krippendorff_alpha", "ratings": krippendorff2011}); math.Abs(out["value"].(float64)-0.743) > 0.0005 {
		t.Errorf("default level: %v", out)
	}

	// Cohen: 50 proposals, both yes 20, yes/no 5, no/yes 10, both no 15;
	// a unit only one rater labelled is left out.
	var cohen [][]any
	for _, c := range []struct {
		a, b string
		n    int
	}{{"yes", "yes", 20}, {"yes", "no", 5}, {"no", "yes", 10}, {"no", "no", 15}} {
		for range c.n {
			cohen = append(cohen, []any{c.a, c.b})
		}
	}
	cohen = append(cohen, []any{"yes", nil})
	out := post(map[string]any{"metric": "cohen_kappa", "ratings": cohen})
	if math.Abs(out["value"].(float64)-0.4) > 1e-9 || out["units"] != 50.0 || out["raters"] != 2.0 || out["pairable_values"] != 100.0 {
		t.Errorf("cohen: %v; want 0.4 over 50 units", out)
	}

	// Fleiss: 10 subjects, 14 raters, 5 categories.
	var fleiss [][]any
	for _, counts := range [][]int{{0, 0, 0, 0, 14}, {0, 2, 6, 4, 2}, {0, 0, 3, 5, 6}, {0, 3, 9, 2, 0}, {2, 2, 8, 1, 1},
		{7, 7, 0, 0, 0}, {3, 2, 6, 3, 0}, {2, 5, 3, 2, 2}, {6, 5, 2, 1, 0}, {0, 2, 2, 3, 7}} {
		var row []any
		for j, k := range counts {
			for range k {
				row = append(row, j+1)
			}
		}
		fleiss = append(fleiss, row)
	}
	out = post(map[string]any{"metric": "fleiss_kappa", "level": "nominal", "ratings": fleiss})
	if math.Abs(out["value"].(float64)-0.210) > 0.0005 || out["units"] != 10.0 || out["raters"] != 14.0 || out["pairable_values"] != 140.0 {
		t.Errorf("fleiss: %v; want 0.210 over 10 units of 14", out)
	}
}

// Input the statistics cannot answer, or that is malformed, is a 422
// problem naming the field: the matrix as a whole, or the unit at fault.
func TestStatsAgreementRefusals(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "notebook", "viewer")
	refuse := func(what string, body any, fields string) {
		t.Helper()
		res := s.API(key, http.MethodPost, "/api/stats/agreement", body)
		if res.Status != http.StatusUnprocessableEntity || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %s; want a 422 problem", what, res.Status, res.Body)
			return
		}
		var p problemDoc
		res.JSON(t, &p)
		if p.fields() != fields {
			t.Errorf("%s: named %q (%s); want %q", what, p.fields(), res.Body, fields)
		}
	}
	alpha := func(level string, ratings any) map[string]any {
		return map[string]any{"metric": "krippendorff_alpha", "level": level, "ratings": ratings}
	}

	refuse("one pairable unit", alpha("nominal", [][]any{{1, 2}, {3, nil}, {nil, nil}}), "ratings")
	refuse("no units", alpha("interval", [][]any{}), "ratings")
	refuse("no variation", alpha("interval", [][]any{{4, 4}, {4, 4}, {4, nil}}), "ratings")
	refuse("a string at ordinal", alpha("ordinal", [][]any{{1, 2}, {2, 2}, {3, 3}, {"high", 4}}), "ratings[3]")
	refuse("a string at ratio", alpha("ratio", [][]any{{1, 2}, {2, "2"}}), "ratings[1]")
	refuse("a negative at ratio", alpha("ratio", [][]any{{1, 2}, {-2, 2}}), "ratings[1]")
	refuse("a ragged row", alpha("nominal", [][]any{{1, 2}, {2, 2, 3}}), "ratings[1]")
	refuse("metric and level", map[string]any{"metric": "scotts_pi", "level": "circular", "ratings": [][]any{{1, 2}}}, "metric,level")
	refuse("no metric", map[string]any{"ratings": [][]any{{1, 2}, {2, 2}}}, "metric")
	refuse("a level for a kappa", map[string]any{"metric": "cohen_kappa", "level": "ordinal", "ratings": [][]any{{1, 2}, {2, 2}}}, "level")
	refuse("three raters for Cohen", map[string]any{"metric": "cohen_kappa", "ratings": [][]any{{1, 2, 1}, {2, 2, 2}}}, "ratings")
	refuse("one unit both labelled", map[string]any{"metric": "cohen_kappa", "ratings": [][]any{{1, 2}, {2, nil}}}, "ratings")
	refuse("Fleiss with unequal labels", map[string]any{"metric": "fleiss_kappa", "ratings": [][]any{{1, 2, 1}, {nil, nil, nil}, {2, nil, 2}}}, "ratings[2]")
	refuse("true", alpha("nominal", [][]any{{1, 2}, {2, true}}), "ratings[1]")
	refuse("an object", alpha("nominal", [][]any{{map[string]int{"x": 1}, 2}, {2, 2}}), "ratings[0]")
	refuse("an empty label", alpha("nominal", [][]any{{"a", " "}, {"b", "b"}}), "ratings[0]")
	refuse("a long label", alpha("nominal", [][]any{{"a", strings.Repeat("x", 201)}, {"b", "b"}}), "ratings[0]")
	refuse("a row not an array", alpha("nominal", []any{[]any{1, 2}, 3}), "ratings")
	refuse("an unknown field", map[string]any{"metric": "krippendorff_alpha", "ratings": [][]any{{1, 2}}, "weights": 1}, "weights")

	// JSON has no NaN or infinity: a number too large for a float64 is
	// refused as not finite, NaN as malformed JSON.
	raw := func(what, body, fields string) {
		t.Helper()
		res := s.Client().Do(http.MethodPost, "/api/stats/agreement", strings.NewReader(body),
			http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}})
		var p problemDoc
		if res.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", what, res.Status, res.Body)
			return
		}
		res.JSON(t, &p)
		if p.fields() != fields {
			t.Errorf("%s: named %q; want %q", what, p.fields(), fields)
		}
	}
	raw("1e999", `{"metric": "krippendorff_alpha", "level": "interval", "ratings": [[1, 2], [1e999, 2]]}`, "ratings[1]")
	raw("NaN", `{"metric": "krippendorff_alpha", "ratings": [[1, 2], [NaN, 2]]}`, "")

	// Limits: 10,000 units and 100 raters.
	many := make([][]any, 10001)
	for i := range many {
		many[i] = []any{i % 2, 1}
	}
	refuse("too many units", alpha("nominal", many), "ratings")
	wide := make([]any, 101)
	for i := range wide {
		wide[i] = i % 3
	}
	refuse("too many raters", alpha("nominal", [][]any{wide, wide}), "ratings")
	refuse("one row too wide", alpha("nominal", [][]any{{1, 2}, wide}), "ratings[1]")
	// The largest matrix allowed is answered.
	s.API(key, http.MethodPost, "/api/stats/agreement", alpha("nominal", many[:10000])).Must(t, http.StatusOK)
}

// Any signed-in role may compute agreement (viewer is the least); a call
// without credentials, or with a key that is not one, is refused, and a
// browser session must send its CSRF token.
func TestStatsAgreementRole(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	body := map[string]any{"metric": "krippendorff_alpha", "level": "interval", "ratings": krippendorff2011}
	if res := s.API("", http.MethodPost, "/api/stats/agreement", body); res.Status == http.StatusOK {
		t.Errorf("no credentials: %d %s", res.Status, res.Body)
	}
	s.API("cur_not_a_key", http.MethodPost, "/api/stats/agreement", body).Must(t, http.StatusUnauthorized)
	for _, role := range []string{"viewer", "curator", "admin"} {
		s.API(s.APIKey(org, role+" key", role), http.MethodPost, "/api/stats/agreement", body).Must(t, http.StatusOK)
	}

	s.User(org, "vera@acme.test", "viewer")
	c := s.SignedIn("vera@acme.test")
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c.Do(http.MethodPost, "/api/stats/agreement", strings.NewReader(string(b)), http.Header{"Content-Type": {"application/json"}}).
		Must(t, http.StatusForbidden)
	c.Get("/")
	if c.CSRF() == "" {
		t.Fatal("no CSRF token on the signed-in home page")
	}
	var out struct {
		Value float64 `json:"value"`
	}
	c.Do(http.MethodPost, "/api/stats/agreement", strings.NewReader(string(b)),
		http.Header{"Content-Type": {"application/json"}, "X-CSRF-Token": {c.CSRF()}}).Must(t, http.StatusOK).JSON(t, &out)
	if math.Abs(out.Value-0.849) > 0.0005 {
		t.Errorf("signed-in viewer: %v; want 0.849", out.Value)
	}
}

// Numbers near the float64 limits are labels like any other: the issue's
// matrix (finite labels of ±1e200, whose differences square past float64)
// answers the alpha of the same labels at a unit scale, never a 500.
func TestStatsAgreementExtremeMagnitudes(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	key := s.APIKey(s.Org("acme"), "notebook", "viewer")
	alpha := func(ratings any) (int, map[string]any, string) {
		res := s.API(key, http.MethodPost, "/api/stats/agreement", map[string]any{"metric": "krippendorff_alpha", "level": "interval", "ratings": ratings})
		var out map[string]any
		if res.Status == http.StatusOK {
			res.JSON(t, &out)
		}
		return res.Status, out, res.Body
	}
	_, want, _ := alpha([][]any{{1, -1}, {1, 1}, {-1, 0}})
	for _, big := range []json.RawMessage{json.RawMessage("1e200"), json.RawMessage("1.7e308")} {
		status, got, body := alpha([][]any{{big, json.RawMessage("-" + string(big))}, {big, big}, {json.RawMessage("-" + string(big)), 0}})
		if status != http.StatusOK {
			t.Errorf("labels of ±%s: %d %s; want 200", big, status, body)
			continue
		}
		if math.Abs(got["value"].(float64)-want["value"].(float64)) > 1e-9 {
			t.Errorf("labels of ±%s: %v; want alpha %v as at ±1", big, got, want["value"])
		}
	}
}
