// Package reward combines an evaluation's scores into one reward with a
// formula of signed weights, such as the design's
//
//	R = 0.35·chain + 0.25·emergency − 0.15·risk + 0.25·judge
//
// and keeps named formulas as immutable versions per organisation, so a
// report can always say which weights produced its numbers.
package reward

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/scorers"
)

// Limits on a formula.
const (
	MaxTerms  = 20
	MaxWeight = 100 // in absolute value
)

// Term is one scorer's weight.
type Term struct {
	Scorer string  `json:"scorer"`
	Weight float64 `json:"weight"`
}

// Formula is a weighted sum of scores, its terms in the order the user gave.
// In JSON it is an object {"chain": 0.35, "risk": -0.15}, written in that
// order.
type Formula struct {
	Terms []Term
}

// Default is the design's example formula, each organisation's "default"
// version 1.
var Default = Formula{Terms: []Term{
	{"chain", 0.35}, {"emergency", 0.25}, {"risk", -0.15}, {"judge", 0.25},
}}

// MarshalJSON writes the formula as an object in its terms' order.
func (f Formula) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, t := range f.Terms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(t.Scorer)
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(t.Weight, 'g', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var scorerName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Parse reads a formula from a JSON object of weights, checking that every
// weight is a finite number within ±MaxWeight and every name is in known
// (nil: any well-formed scorer name). field names the object in messages:
// Parse("reward_formula", …) reports "reward_formula.judge: must be a
// number". Every problem is reported, as an *errs.Invalid.
func Parse(field string, raw []byte, known []string) (Formula, error) {
	v := &errs.Invalid{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		v.Add(field, `must be an object of weights, such as {"judge": 1}`)
		return Formula{}, v
	}
	var f Formula
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			v.Add(field, "is not valid JSON")
			return Formula{}, v
		}
		name := tok.(string) // object keys are always strings
		var val any
		if err := dec.Decode(&val); err != nil {
			v.Add(field, "is not valid JSON")
			return Formula{}, v
		}
		kf := field + "." + name
		if !scorerName.MatchString(name) {
			kf = field
			v.Add(kf, "%q is not a scorer name", name)
			continue
		}
		if known != nil && !slices.Contains(known, name) {
			v.Add(kf, "no scorer is named %s; known: %s", name, strings.Join(known, ", "))
			continue
		}
		if slices.ContainsFunc(f.Terms, func(t Term) bool { return t.Scorer == name }) {
			v.Add(kf, "is given twice")
			continue
		}
		num, ok := val.(json.Number)
		if !ok {
			v.Add(kf, "must be a number")
			continue
		}
		w, err := num.Float64()
		switch {
		case err != nil || math.IsInf(w, 0) || math.IsNaN(w):
			v.Add(kf, "must be a finite number")
		case math.Abs(w) > MaxWeight:
			v.Add(kf, "must be between -%d and %d", MaxWeight, MaxWeight)
		default:
			f.Terms = append(f.Terms, Term{Scorer: name, Weight: w})
		}
	}
	if _, err := dec.Token(); err != nil {
		v.Add(field, "is not valid JSON")
	} else if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		v.Add(field, "has data after the object")
	}
	if v.Has() {
		return Formula{}, v
	}
	switch {
	case len(f.Terms) == 0:
		v.Add(field, "needs at least one weight")
	case len(f.Terms) > MaxTerms:
		v.Add(field, "has %d weights; at most %d", len(f.Terms), MaxTerms)
	}
	return f, v.Err()
}

// Known is the scorer names a stored formula may use: the presets and the
// external scorers (judge, reward model).
func Known() []string { return scorers.PresetNames() }

// Scorers lists the names the formula needs scores for.
func (f Formula) Scorers() []string {
	out := make([]string, len(f.Terms))
	for i, t := range f.Terms {
		out[i] = t.Scorer
	}
	return out
}

// Require checks that every scorer the formula weighs is among names (an
// evaluation's configured scorers), naming field.<scorer> otherwise.
func (f Formula) Require(field string, names []string) error {
	v := &errs.Invalid{}
	for _, t := range f.Terms {
		if !slices.Contains(names, t.Scorer) {
			v.Add(field+"."+t.Scorer, "is weighted but not among the scorers")
		}
	}
	return v.Err()
}

// String writes the formula for reports: "R = 0.35·chain − 0.15·risk".
func (f Formula) String() string {
	var b strings.Builder
	b.WriteString("R =")
	for i, t := range f.Terms {
		switch {
		case t.Weight < 0 && i == 0:
			b.WriteString(" −")
		case t.Weight < 0:
			b.WriteString(" − ")
		case i > 0:
			b.WriteString(" + ")
		default:
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(math.Abs(t.Weight), 'f', -1, 64))
		b.WriteString("·")
		b.WriteString(t.Scorer)
	}
	return b.String()
}

// Result is a reward for one item: a number, or the reason there is none.
type Result struct {
	Value float64 `json:"value"`
	// Explanation shows the sum with each score in place:
	// "0.35·1 + 0.25·0.5 − 0.15·0 + 0.25·0.8 = 0.675".
	Explanation string `json:"explanation"`
	// Invalid, when set, is why there is no reward; Value is then 0 and
	// must not be counted.
	Invalid string `json:"invalid,omitempty"`
}

// Valid reports whether the reward is a number to use.
func (r Result) Valid() bool { return r.Invalid == "" }

// Compute applies the formula to one item's scores by scorer name. A
// score that is missing, invalid or not finite makes the reward invalid,
// with every such reason: a reward is never computed from part of its
// terms.
func (f Formula) Compute(scores map[string]scorers.Score) Result {
	var problems []string
	var b strings.Builder
	sum := 0.0
	for i, t := range f.Terms {
		s, ok := scores[t.Scorer]
		switch {
		case !ok:
			problems = append(problems, "no "+t.Scorer+" score")
			continue
		case !s.Valid():
			problems = append(problems, t.Scorer+": "+s.Invalid)
			continue
		case math.IsNaN(s.Value) || math.IsInf(s.Value, 0):
			problems = append(problems, fmt.Sprintf("%s: %v is not a score", t.Scorer, s.Value))
			continue
		}
		sum += t.Weight * s.Value
		switch {
		case t.Weight < 0 && i == 0:
			b.WriteString("−")
		case t.Weight < 0:
			b.WriteString(" − ")
		case i > 0:
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "%s·%s", strconv.FormatFloat(math.Abs(t.Weight), 'f', -1, 64), short(s.Value))
	}
	if len(problems) > 0 {
		return Result{Invalid: strings.Join(problems, "; ")}
	}
	fmt.Fprintf(&b, " = %s", short(sum))
	return Result{Value: sum, Explanation: b.String()}
}

// short writes a number with at most four decimals and no trailing zeros,
// for explanations (the value itself keeps full precision).
func short(x float64) string {
	s := strconv.FormatFloat(x, 'f', 4, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}
