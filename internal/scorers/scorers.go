// Package scorers holds the rule scorers of an evaluation: each reads one
// item (the query, its context documents, the answer under test and the
// reference answer) and returns a value in 0–1 with an explanation a
// reviewer can check. The judge and reward models are scored elsewhere
// (they call other systems); this package only names them, so that one list
// of scorers in an evaluation's configuration can hold all of them.
//
// Every scorer is a pure function of its input: no I/O, no clock, no
// randomness, so a re-run scores the same answer the same way.
package scorers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
)

// Input is one item as the scorers see it.
type Input struct {
	Query string
	// Context are the documents the answer was to draw on, in order.
	Context []string
	Answer  string
	// Reference is the expected answer (the curator's correction where
	// there is one); empty when the item has none.
	Reference string
}

// Documents reads context documents (a JSON list) as text: each a string,
// or an object with its text under "text", "content" or "page_content"
// (the shapes RAG pipelines log); anything else is written as its JSON.
func Documents(raw []byte) []string {
	var docs []json.RawMessage
	if json.Unmarshal(raw, &docs) != nil {
		return nil
	}
	var out []string
	for _, d := range docs {
		var s string
		if json.Unmarshal(d, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Text        *string `json:"text"`
			Content     *string `json:"content"`
			PageContent *string `json:"page_content"`
		}
		_ = json.Unmarshal(d, &o)
		switch {
		case o.Text != nil:
			out = append(out, *o.Text)
		case o.Content != nil:
			out = append(out, *o.Content)
		case o.PageContent != nil:
			out = append(out, *o.PageContent)
		default:
			out = append(out, string(d))
		}
	}
	return out
}

// Score is one scorer's result for one item. When the item cannot be
// scored (a similarity scorer on an item with no reference, a judge whose
// answer was malformed), Invalid says why and Value means nothing: callers
// must check Valid before using Value, and never count it as a score.
type Score struct {
	Value       float64 `json:"value"`
	Explanation string  `json:"explanation"`
	Invalid     string  `json:"invalid,omitempty"`
}

// Valid reports whether the score is a number to use.
func (s Score) Valid() bool { return s.Invalid == "" }

// Invalidf is a score that could not be computed, with the reason.
func Invalidf(format string, args ...any) Score {
	return Score{Invalid: fmt.Sprintf(format, args...)}
}

// Kinds of rule scorer.
const (
	// KindRequired scores the fraction of its phrases and patterns the
	// answer contains (1 when all are there).
	KindRequired = "required"
	// KindForbidden is a risk score: with Mode "any" (the default) 1 when
	// any of its phrases or patterns is in the answer, else 0; with Mode
	// "fraction" the fraction of them present. Give it a negative weight in
	// the reward formula.
	KindForbidden = "forbidden"
	// KindLength is 1 when the answer's length lies within [Min, Max] and
	// falls off smoothly outside: length/Min below, Max/length above (half
	// the score at twice the maximum).
	KindLength = "length"
	// KindRefusal is 1 when the answer refuses (common refusal phrasings in
	// English and Chinese), else 0.
	KindRefusal = "refusal"
	// KindReferenceF1 is the token F1 of the answer against the reference,
	// after SQuAD's normalisation.
	KindReferenceF1 = "reference_f1"
	// KindReferenceRougeL is ROUGE-L's F-measure (β = 1) of the answer
	// against the reference.
	KindReferenceRougeL = "reference_rouge_l"
	// KindRewardModel is a reward model's score of the answer: not a rule,
	// but a served reward model version the evaluation calls, named by
	// ModelVersionID.
	KindRewardModel = "reward_model"
)

var kinds = []string{KindRequired, KindForbidden, KindLength, KindRefusal, KindReferenceF1, KindReferenceRougeL}

// External are the scorer names that are not rules: the judge's score and
// the reward model's, which the evaluation computes by calling them. Parse
// accepts "judge" in a configuration and hands it back in Set.External; a
// reward model is configured with its version (KindRewardModel) and
// handed back in Set.RewardModels.
var External = append([]string{"judge", "reward_model"}, RAG...)

// The retrieval-augmented generation metrics (RAGAS's definitions): the
// judge gives verdicts on an item's claims and context documents, and the
// metric is computed from them. They are external scorers, listed by name
// like "judge", and need the item's context documents (and, for context
// precision and recall, its reference answer).
const (
	RAGFaithfulness     = "faithfulness"
	RAGAnswerRelevancy  = "answer_relevancy"
	RAGContextPrecision = "context_precision"
	RAGContextRecall    = "context_recall"
)

// RAG lists the RAG metrics in the order they read.
var RAG = []string{RAGFaithfulness, RAGAnswerRelevancy, RAGContextPrecision, RAGContextRecall}

// Limits on a configuration. Go's regexp (RE2) matches in time linear in
// the text, so no pattern can backtrack catastrophically; these caps bound
// the compiled programs' size and the work per answer.
const (
	MaxScorers       = 20
	MaxItems         = 50  // phrases plus patterns in one scorer
	MaxItemBytes     = 500 // one phrase or pattern
	MaxLengthSetting = 100000
)

// Config is one scorer as an evaluation configures it. In JSON it is
// either a name, "chain" (a preset, a kind that needs no settings, or an
// external scorer such as "judge"), or an object:
//
//	{"name": "cites_policy", "kind": "required", "phrases": ["refund policy"], "patterns": ["\\bsection \\d+"]}
//	{"name": "risk", "kind": "forbidden", "mode": "fraction", "phrases": ["double the dose"]}
//	{"name": "concise", "kind": "length", "unit": "words", "min": 20, "max": 200}
//	{"name": "careful", "preset": "risk"}
//	{"name": "rm", "kind": "reward_model", "model_version_id": "0b6f…"}
type Config struct {
	// Name is what the reward formula calls the score; it defaults to the
	// preset's name, else the kind.
	Name string `json:"name,omitempty"`
	// Preset names one of Presets; it takes no settings beside Name.
	Preset string `json:"preset,omitempty"`
	Kind   string `json:"kind,omitempty"`
	// Phrases are literal text; Patterns RE2 regular expressions. Both
	// match case-insensitively unless CaseSensitive is set.
	Phrases       []string `json:"phrases,omitempty"`
	Patterns      []string `json:"patterns,omitempty"`
	CaseSensitive bool     `json:"case_sensitive,omitempty"`
	// Mode is "any" or "fraction", for KindForbidden.
	Mode string `json:"mode,omitempty"`
	// Unit is "words" (the default) or "tokens" (cl100k_base), for
	// KindLength; Min and Max bound the target range, 0 meaning unbounded.
	Unit string `json:"unit,omitempty"`
	Min  int    `json:"min,omitempty"`
	Max  int    `json:"max,omitempty"`
	// ModelVersionID names the reward model version, for
	// KindRewardModel.
	ModelVersionID string `json:"model_version_id,omitempty"`
}

// UnmarshalJSON accepts a bare name as well as an object.
func (c *Config) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '"' {
		var name string
		if err := json.Unmarshal(t, &name); err != nil {
			return err
		}
		*c = Config{Preset: name}
		return nil
	}
	type plain Config
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// Scorer is a compiled rule scorer.
type Scorer struct {
	Name string
	Kind string
	fn   func(Input) Score
}

// Score scores one item.
func (s *Scorer) Score(in Input) Score { return s.fn(in) }

// Set is a parsed list of scorers: the rules, compiled, the external
// scorers the list asked for, and the reward models, in their order.
type Set struct {
	Rules        []*Scorer
	External     []string
	RewardModels []RewardModel
}

// RewardModel is a reward model scorer: the name the reward formula calls
// its score, the version that scores, and the field that configured it
// ("scorers[2]").
type RewardModel struct {
	Name      string
	VersionID uuid.UUID
	Field     string
}

// Names lists every scorer's name, rules first, then external ones, then
// reward models.
func (s Set) Names() []string {
	var out []string
	for _, r := range s.Rules {
		out = append(out, r.Name)
	}
	out = append(out, s.External...)
	for _, m := range s.RewardModels {
		out = append(out, m.Name)
	}
	return out
}

// Score runs every rule over one item, by name.
func (s Set) Score(in Input) map[string]Score {
	out := make(map[string]Score, len(s.Rules))
	for _, r := range s.Rules {
		out[r.Name] = r.Score(in)
	}
	return out
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Parse validates and compiles a list of scorers. field names the list in
// error messages ("scorers" gives "scorers[2].patterns[0]"); every problem
// is reported, as an *errs.Invalid.
func Parse(field string, cfgs []Config) (Set, error) {
	v := &errs.Invalid{}
	var set Set
	if len(cfgs) > MaxScorers {
		v.Add(field, "has %d scorers; at most %d", len(cfgs), MaxScorers)
		return set, v
	}
	seen := map[string]bool{}
	for i, c := range cfgs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if c.Kind == KindRewardModel {
			m, ok := rewardModel(f, c, v)
			switch {
			case !ok:
			case seen[m.Name]:
				v.Add(f+".name", "%s is used by another scorer", m.Name)
			default:
				seen[m.Name] = true
				set.RewardModels = append(set.RewardModels, m)
			}
			continue
		}
		if c.Preset == KindRewardModel && c.Kind == "" && c.Name == "" {
			v.Add(f, `a reward model scorer names its version: {"name": "rm", "kind": "reward_model", "model_version_id": "<model version id>"}`)
			continue
		}
		if c.Preset != "" && slices.Contains(External, c.Preset) && c.Kind == "" && c.Name == "" {
			if seen[c.Preset] {
				v.Add(f, "%s is listed twice", c.Preset)
				continue
			}
			seen[c.Preset] = true
			set.External = append(set.External, c.Preset)
			continue
		}
		s := compile(f, c, v)
		if s == nil {
			continue
		}
		if seen[s.Name] {
			v.Add(f+".name", "%s is used by another scorer", s.Name)
			continue
		}
		seen[s.Name] = true
		set.Rules = append(set.Rules, s)
	}
	return set, v.Err()
}

// rewardModel checks a reward model scorer's configuration, recording
// problems in v.
func rewardModel(f string, c Config, v *errs.Invalid) (RewardModel, bool) {
	before := len(v.Errors)
	m := RewardModel{Name: c.Name, Field: f}
	if m.Name == "" {
		m.Name = KindRewardModel
	}
	if !namePattern.MatchString(m.Name) {
		v.Add(f+".name", "must be lower-case letters, digits and underscores, starting with a letter, at most 40")
	} else if m.Name == "judge" {
		v.Add(f+".name", "judge is the name of an external scorer")
	}
	if c.Preset != "" || len(c.Phrases) > 0 || len(c.Patterns) > 0 || c.CaseSensitive || c.Mode != "" || c.Unit != "" || c.Min != 0 || c.Max != 0 {
		v.Add(f+".kind", "reward_model takes a name and a model_version_id only")
	}
	switch id, err := uuid.Parse(c.ModelVersionID); {
	case c.ModelVersionID == "":
		v.Add(f+".model_version_id", "is required: the reward model version that scores")
	case err != nil || id == uuid.Nil:
		v.Add(f+".model_version_id", "must be a model version's id")
	default:
		m.VersionID = id
	}
	return m, len(v.Errors) == before
}

// compile checks one configuration, recording problems in v; nil when any.
func compile(f string, c Config, v *errs.Invalid) *Scorer {
	before := len(v.Errors)
	if slices.Contains(External, c.Preset) {
		v.Add(f+".preset", "%s is scored outside the rules and takes no name or settings; list it as \"%s\"", c.Preset, c.Preset)
		return nil
	}
	if c.Preset != "" {
		p, ok := Presets[c.Preset]
		if !ok {
			v.Add(f+".preset", "%q is not a scorer; known: %s", c.Preset, strings.Join(PresetNames(), ", "))
			return nil
		}
		if c.Kind != "" || len(c.Phrases) > 0 || len(c.Patterns) > 0 || c.Mode != "" || c.Unit != "" || c.Min != 0 || c.Max != 0 || c.CaseSensitive {
			v.Add(f+".preset", "a preset takes no settings beside a name; give a kind and its settings instead")
			return nil
		}
		name := c.Name
		c = p
		if name != "" {
			c.Name = name
		}
	}
	if !slices.Contains(kinds, c.Kind) {
		v.Add(f+".kind", "must be one of %s", strings.Join(slices.Concat(kinds, []string{KindRewardModel}), ", "))
		return nil
	}
	if c.ModelVersionID != "" {
		v.Add(f+".model_version_id", "goes with kind reward_model only")
		return nil
	}
	name := c.Name
	if name == "" {
		name = c.Kind
	}
	switch {
	case !namePattern.MatchString(name):
		v.Add(f+".name", "must be lower-case letters, digits and underscores, starting with a letter, at most 40")
	case slices.Contains(External, name):
		v.Add(f+".name", "%s is the name of an external scorer", name)
	}
	var fn func(Input) Score
	switch c.Kind {
	case KindRequired, KindForbidden:
		fn = matchScorer(f, c, v)
	case KindLength:
		fn = lengthScorer(f, c, v)
	default:
		if len(c.Phrases) > 0 || len(c.Patterns) > 0 || c.Mode != "" || c.Unit != "" || c.Min != 0 || c.Max != 0 {
			v.Add(f+".kind", "%s takes no settings", c.Kind)
		}
		fn = map[string]func(Input) Score{
			KindRefusal:         refusal,
			KindReferenceF1:     referenceF1,
			KindReferenceRougeL: referenceRougeL,
		}[c.Kind]
	}
	if len(v.Errors) > before {
		return nil
	}
	return &Scorer{Name: name, Kind: c.Kind, fn: fn}
}
