package reward

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/scorers"
)

func TestDefaultFormula(t *testing.T) {
	if got, want := Default.String(), "R = 0.35·chain + 0.25·emergency − 0.15·risk + 0.25·judge"; got != want {
		t.Errorf("String = %q; want %q", got, want)
	}
	// By hand: 0.35·1 + 0.25·0.5 − 0.15·1 + 0.25·0.8 = 0.35 + 0.125 − 0.15 + 0.2 = 0.525.
	r := Default.Compute(map[string]scorers.Score{
		"chain": {Value: 1}, "emergency": {Value: 0.5}, "risk": {Value: 1}, "judge": {Value: 0.8},
	})
	if !r.Valid() || math.Abs(r.Value-0.525) > 1e-12 {
		t.Errorf("reward %+v; want 0.525", r)
	}
	if r.Explanation != "0.35·1 + 0.25·0.5 − 0.15·1 + 0.25·0.8 = 0.525" {
		t.Errorf("explanation %q", r.Explanation)
	}
	b, _ := json.Marshal(Default)
	if string(b) != `{"chain":0.35,"emergency":0.25,"risk":-0.15,"judge":0.25}` {
		t.Errorf("JSON %s", b)
	}
}

func TestComputeInvalid(t *testing.T) {
	r := Default.Compute(map[string]scorers.Score{
		"chain": {Value: 1}, "risk": {Value: 0},
		"judge": scorers.Invalidf("the judge's answer was not JSON"),
	})
	if r.Valid() || r.Value != 0 || r.Invalid != "no emergency score; judge: the judge's answer was not JSON" {
		t.Errorf("reward %+v; want invalid with both reasons", r)
	}
	r = Formula{Terms: []Term{{"judge", 1}}}.Compute(map[string]scorers.Score{"judge": {Value: math.NaN()}})
	if r.Valid() {
		t.Errorf("NaN score gave %+v", r)
	}
}

func TestParse(t *testing.T) {
	f, err := Parse("reward_formula", []byte(`{"risk": -0.5, "judge": 1, "reference_f1": 2e-1}`), Known())
	if err != nil {
		t.Fatal(err)
	}
	if got := f.String(); got != "R = −0.5·risk + 1·judge + 0.2·reference_f1" {
		t.Errorf("order or rendering lost: %q", got)
	}
	if err := f.Require("reward_formula", []string{"judge", "risk"}); !hasField(err, "reward_formula.reference_f1") {
		t.Errorf("Require: %v", err)
	}
	if err := f.Require("reward_formula", []string{"judge", "risk", "reference_f1", "chain"}); err != nil {
		t.Errorf("Require all present: %v", err)
	}
	for _, tc := range []struct {
		raw, field, msg string
	}{
		{`{"judge": "0.5"}`, "w.judge", "must be a number"},
		{`{"judge": null}`, "w.judge", "must be a number"},
		{`{"judge": true}`, "w.judge", "must be a number"},
		{`{"judge": 1e400}`, "w.judge", "must be a finite number"},
		{`{"judge": 101}`, "w.judge", "must be between -100 and 100"},
		{`{"judge": 1, "judge": 2}`, "w.judge", "is given twice"},
		{`{"judgee": 1}`, "w.judgee", "no scorer is named judgee"},
		{`{"Bad Name": 1}`, "w", `"Bad Name" is not a scorer name`},
		{`{}`, "w", "needs at least one weight"},
		{`[1]`, "w", "must be an object"},
		{`{"judge": 1`, "w", "is not valid JSON"},
		{`{"judge": 1} {}`, "w", "has data after the object"},
	} {
		_, err := Parse("w", []byte(tc.raw), Known())
		var inv *errs.Invalid
		if !errors.As(err, &inv) || !strings.Contains(inv.ByField()[tc.field], tc.msg) {
			t.Errorf("%s: %v; want %s: %s", tc.raw, err, tc.field, tc.msg)
		}
	}
	// With no list of known names any well-formed name passes, for an
	// evaluation's own scorers, checked later with Require.
	if _, err := Parse("w", []byte(`{"polite": 0.5}`), nil); err != nil {
		t.Errorf("custom name: %v", err)
	}
}

func hasField(err error, field string) bool {
	var inv *errs.Invalid
	return errors.As(err, &inv) && inv.ByField()[field] != ""
}
