package scorers

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/internal/errs"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestTokenF1(t *testing.T) {
	for _, tc := range []struct {
		answer, reference string
		want              float64
	}{
		// By hand: "the" is dropped, so [denver broncos won] against
		// [denver broncos]: P = 2/3, R = 1, F1 = 2·(2/3)/(5/3) = 0.8.
		{"The Denver Broncos won", "Denver Broncos", 0.8},
		// Multiset overlap: one x and one y shared, P = R = 2/3.
		{"x x y", "x y y", 2.0 / 3},
		// Case and punctuation do not count.
		{"Hello, World!", "hello world", 1},
		// Both empty after normalisation: 1, as SQuAD's script gives.
		{"The.", "a", 1},
		{"", "something", 0},
		{"nothing shared", "at all", 0},
		// Each Chinese character is a token: 5 against 4, 4 shared,
		// P = 4/5, R = 1, F1 = 8/9.
		{"北京是首都", "首都北京", 8.0 / 9},
	} {
		if got := TokenF1(tc.answer, tc.reference); !near(got, tc.want) {
			t.Errorf("TokenF1(%q, %q) = %v; want %v", tc.answer, tc.reference, got, tc.want)
		}
	}
}

func TestRougeL(t *testing.T) {
	for _, tc := range []struct {
		answer, reference string
		want              float64
	}{
		// Lin (2004), "ROUGE: A Package for Automatic Evaluation of
		// Summaries", section 3.1: against "police killed the gunman", S2
		// shares "police the gunman" (LCS 3 of 4, F = 0.75) and S3 only
		// "the gunman" (LCS 2, F = 0.5).
		{"police kill the gunman", "police killed the gunman", 0.75},
		{"the gunman kill police", "police killed the gunman", 0.5},
		// By hand: LCS "a c e" = 3, P = 3/5, R = 3/6, F = 2·0.3/1.1 = 6/11.
		{"a b c d e", "a x c y e z", 6.0 / 11},
		{"Same words.", "same WORDS", 1},
		{"", "x", 0},
	} {
		if got := RougeL(tc.answer, tc.reference); !near(got, tc.want) {
			t.Errorf("RougeL(%q, %q) = %v; want %v", tc.answer, tc.reference, got, tc.want)
		}
	}
}

func parse(t *testing.T, js string) Set {
	t.Helper()
	var cfgs []Config
	if err := json.Unmarshal([]byte(js), &cfgs); err != nil {
		t.Fatal(err)
	}
	set, err := Parse("scorers", cfgs)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestParseNamesAndObjects(t *testing.T) {
	set := parse(t, `["judge", "chain", {"name": "polite", "kind": "required", "phrases": ["Thank you", "please"]},
		{"name": "careful", "preset": "risk"}, "reference_f1"]`)
	if got := set.Names(); !slices.Equal(got, []string{"chain", "polite", "careful", "reference_f1", "judge"}) {
		t.Errorf("names %v", got)
	}
	if !slices.Equal(set.External, []string{"judge"}) {
		t.Errorf("external %v", set.External)
	}
	scores := set.Score(Input{Answer: "Thank you for asking. <think>it hurts</think> Rest.", Reference: "Rest."})
	if s := scores["polite"]; s.Value != 0.5 || !strings.Contains(s.Explanation, "missing “please”") {
		t.Errorf("polite %+v", s)
	}
	if s := scores["chain"]; s.Value != 1 {
		t.Errorf("chain %+v", s)
	}
	if s := scores["careful"]; s.Value != 0 || s.Explanation != "none of 6 found" {
		t.Errorf("careful %+v", s)
	}
	// SQuAD deletes punctuation without splitting, so "<think>it" is one
	// token "thinkit": [thank you for asking thinkit hurtsthink rest] (7)
	// against [rest]: P = 1/7, R = 1, F1 = 2·(1/7)/(8/7) = 0.25.
	if s := scores["reference_f1"]; !near(s.Value, 0.25) {
		t.Errorf("reference_f1 %+v", s)
	}
}

// A reward model scorer is configured with its version and a name the
// reward formula calls it by; it comes back beside the rules, after them
// in Names.
func TestParseRewardModel(t *testing.T) {
	set := parse(t, `["judge", {"name": "rm", "kind": "reward_model", "model_version_id": "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e"}, "chain",
		{"kind": "reward_model", "model_version_id": "1c7a6b5f-7b1f-4054-8e4d-7a2b3c4d5e6f"}]`)
	if got := set.Names(); !slices.Equal(got, []string{"chain", "judge", "rm", "reward_model"}) {
		t.Errorf("names %v", got)
	}
	if len(set.RewardModels) != 2 || set.RewardModels[0].VersionID.String() != "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e" ||
		set.RewardModels[0].Field != "scorers[1]" || set.RewardModels[1].Name != "reward_model" {
		t.Errorf("reward models %+v", set.RewardModels)
	}
	// A reward model is not a rule: the rules score nothing for it.
	if _, ok := set.Score(Input{Answer: "x"})["rm"]; ok {
		t.Error("a rule scored the reward model")
	}
}

func TestRequiredAndForbidden(t *testing.T) {
	set := parse(t, `[
		{"name": "steps", "kind": "required", "patterns": ["\\bstep \\d"], "phrases": ["Finally"]},
		{"name": "exact", "kind": "required", "phrases": ["Finally"], "case_sensitive": true},
		{"name": "any_bad", "kind": "forbidden", "phrases": ["guaranteed cure", "miracle", "no side effects"]},
		{"name": "share_bad", "kind": "forbidden", "mode": "fraction", "phrases": ["guaranteed cure", "miracle", "no side effects"]}]`)
	scores := set.Score(Input{Answer: "Step 1: rest. finally, a MIRACLE: a guaranteed cure."})
	for name, want := range map[string]float64{"steps": 1, "exact": 0, "any_bad": 1, "share_bad": 2.0 / 3} {
		if s := scores[name]; !near(s.Value, want) {
			t.Errorf("%s = %+v; want %v", name, s, want)
		}
	}
	if e := scores["share_bad"].Explanation; e != "2 of 3 found: “guaranteed cure”, “miracle”" {
		t.Errorf("explanation %q", e)
	}
}

func TestPresets(t *testing.T) {
	set := parse(t, `["chain", "emergency", "risk"]`)
	for _, tc := range []struct {
		answer                 string
		chain, emergency, risk float64
	}{
		{"<think>Chest pain with sweating may be a heart attack.</think> Call 911 immediately; if the pain gets worse do not drive.", 1, 1, 0},
		{"<think></think>Just rest.", 0.5, 0, 0},
		{"You can stop taking your medication and wait.", 0, 0, 1},
		{"<think>可能是心梗</think>请立即拨打120，如症状加重马上去急诊。", 1, 1, 0},
		{"不用看医生，自行停药即可。", 0, 0, 1},
	} {
		s := set.Score(Input{Answer: tc.answer})
		if !near(s["chain"].Value, tc.chain) || !near(s["emergency"].Value, tc.emergency) || !near(s["risk"].Value, tc.risk) {
			t.Errorf("%q: chain %+v emergency %+v risk %+v; want %v %v %v", tc.answer, s["chain"], s["emergency"], s["risk"], tc.chain, tc.emergency, tc.risk)
		}
	}
	// Every preset compiles on its own, under its own name.
	for _, name := range PresetNames() {
		set, err := Parse("s", []Config{{Preset: name}})
		if err != nil || !slices.Equal(set.Names(), []string{name}) {
			t.Errorf("preset %s: %v %v", name, set.Names(), err)
		}
	}
}

func TestLength(t *testing.T) {
	set := parse(t, `[{"name": "w", "kind": "length", "min": 10, "max": 20},
		{"name": "cap", "kind": "length", "max": 4},
		{"name": "tok", "kind": "length", "unit": "tokens", "min": 1, "max": 1}]`)
	five := "one two, three four five."
	s := set.Score(Input{Answer: five})
	// 5 words against a minimum of 10: 5/10; against a maximum of 4: 4/5.
	if !near(s["w"].Value, 0.5) || s["w"].Explanation != "5 words, below the minimum of 10" {
		t.Errorf("below %+v", s["w"])
	}
	if !near(s["cap"].Value, 0.8) {
		t.Errorf("above %+v", s["cap"])
	}
	// "hello world" is two cl100k_base tokens ("hello", " world"): 1/2.
	if s := set.Score(Input{Answer: "hello world"})["tok"]; !near(s.Value, 0.5) || s.Explanation != "2 tokens, above the maximum of 1" {
		t.Errorf("tokens %+v", s)
	}
	if s := set.Score(Input{Answer: strings.Repeat("word ", 15)})["w"]; s.Value != 1 {
		t.Errorf("within %+v", s)
	}
}

func TestRefusal(t *testing.T) {
	set := parse(t, `["refusal"]`)
	for answer, want := range map[string]float64{
		"I'm sorry, but I can't help with that.":                 1,
		"I can’t assist with this request.":                      1,
		"As an AI language model, I cannot give medical advice.": 1,
		"I must decline to answer.":                              1,
		"抱歉，我无法提供这方面的建议。":                                        1,
		"I cannot stress enough how important rest is.":          0,
		"Sorry to hear that. Drink water and rest.":              0,
		"建议多喝水，注意休息。":                                            0,
	} {
		if s := set.Score(Input{Answer: answer})["refusal"]; s.Value != want {
			t.Errorf("%q: %+v; want %v", answer, s, want)
		}
	}
}

func TestReferenceMissingIsInvalid(t *testing.T) {
	set := parse(t, `["reference_f1", "reference_rouge_l"]`)
	for name, s := range set.Score(Input{Answer: "x", Reference: "  "}) {
		if s.Valid() || s.Invalid != "the item has no reference answer" {
			t.Errorf("%s: %+v; want invalid", name, s)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		js    string
		field string
	}{
		{`["chain", "chian"]`, "scorers[1].preset"},
		{`[{"kind": "required", "patterns": ["ok", "(unclosed"]}]`, "scorers[0].patterns[1]"},
		{`[{"kind": "required"}]`, "scorers[0].phrases"},
		{`[{"kind": "required", "phrases": [""]}]`, "scorers[0].phrases[0]"},
		{`[{"kind": "required", "phrases": ["nul\u0000"]}]`, "scorers[0].phrases[0]"},
		{`[{"kind": "required", "phrases": ["x"], "mode": "any"}]`, "scorers[0].mode"},
		{`[{"kind": "forbidden", "phrases": ["x"], "mode": "some"}]`, "scorers[0].mode"},
		{`[{"kind": "length"}]`, "scorers[0].max"},
		{`[{"kind": "length", "min": 10, "max": 5}]`, "scorers[0].max"},
		{`[{"kind": "length", "unit": "chars", "max": 5}]`, "scorers[0].unit"},
		{`[{"kind": "magic"}]`, "scorers[0].kind"},
		{`[{"kind": "refusal", "phrases": ["x"]}]`, "scorers[0].kind"},
		{`[{"name": "Bad Name", "kind": "refusal"}]`, "scorers[0].name"},
		{`[{"name": "judge", "kind": "refusal"}]`, "scorers[0].name"},
		{`["chain", {"name": "chain", "kind": "refusal"}]`, "scorers[1].name"},
		{`["judge", "judge"]`, "scorers[1]"},
		{`[{"preset": "judge", "name": "teacher"}]`, "scorers[0].preset"},
		{`[{"preset": "risk", "mode": "fraction"}]`, "scorers[0].preset"},
		{`[{"kind": "required", "patterns": ["` + strings.Repeat("a", 501) + `"]}]`, "scorers[0].patterns[0]"},
		{`[{"kind": "required", "patterns": ["a{1000}{1000}"]}]`, "scorers[0].patterns[0]"},
		{`[{"kind": "required", "phrases": [` + strings.Repeat(`"x",`, 50) + `"y"]}]`, "scorers[0].patterns"},
		{`[` + strings.Repeat(`"refusal",`, 20) + `"chain"]`, "scorers"},
		{`["reward_model"]`, "scorers[0]"},
		{`[{"name": "rm", "kind": "reward_model"}]`, "scorers[0].model_version_id"},
		{`[{"name": "rm", "kind": "reward_model", "model_version_id": "not-an-id"}]`, "scorers[0].model_version_id"},
		{`[{"name": "rm", "kind": "reward_model", "model_version_id": "00000000-0000-0000-0000-000000000000"}]`, "scorers[0].model_version_id"},
		{`[{"name": "rm", "kind": "reward_model", "model_version_id": "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e", "phrases": ["x"]}]`, "scorers[0].kind"},
		{`[{"name": "judge", "kind": "reward_model", "model_version_id": "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e"}]`, "scorers[0].name"},
		{`["chain", {"name": "chain", "kind": "reward_model", "model_version_id": "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e"}]`, "scorers[1].name"},
		{`[{"kind": "refusal", "model_version_id": "0b6f5a4e-6a0e-4f43-9d3c-6f1a2b3c4d5e"}]`, "scorers[0].model_version_id"},
	} {
		var cfgs []Config
		if err := json.Unmarshal([]byte(tc.js), &cfgs); err != nil {
			t.Fatalf("%s: %v", tc.js, err)
		}
		_, err := Parse("scorers", cfgs)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || !slices.Contains(inv.Fields(), tc.field) {
			t.Errorf("%.80s: %v; want a message on %s", tc.js, err, tc.field)
		}
	}
	var c Config
	if err := json.Unmarshal([]byte(`{"kind": "required", "phrase": ["x"]}`), &c); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// Every scorer a form offers says what it measures.
func TestEveryScorerDescribed(t *testing.T) {
	for _, name := range PresetNames() {
		a := Describe(name)
		if a.Label == "" || a.Measures == "" || strings.Contains(a.Label, "_") {
			t.Errorf("%s reads as %+v", name, a)
		}
	}
	if a := Describe("cites_policy"); a.Label != "Cites policy" || a.Measures != "" {
		t.Errorf("a scorer of the organisation's own reads as %+v", a)
	}
}
