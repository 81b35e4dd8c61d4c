package rubrics

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode"

	"github.com/curate/curate/internal/stats"
)

// Token is one word of an answer: its characters [Start, End) in code
// points. Spans are drawn over tokens on the review page, and span
// agreement is measured token by token.
type Token struct {
	Start, End int
	Text       string
}

// Tokens splits an answer into its words, as runs of characters between
// white space.
func Tokens(response string) []Token {
	var out []Token
	runes := []rune(response)
	start := -1
	for i, r := range runes {
		if unicode.IsSpace(r) {
			if start >= 0 {
				out = append(out, Token{Start: start, End: i, Text: string(runes[start:i])})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, Token{Start: start, End: len(runes), Text: string(runes[start:])})
	}
	return out
}

// AgreementLevel is the level of measurement a question's agreement takes:
// nominal for labels and spans, ordinal for a rating (interval where
// declared) and a ranking; "" for a text, which agreement does not
// measure.
func (q Question) AgreementLevel() stats.Level {
	switch q.Kind {
	case KindLabel, KindLabels, KindSpan:
		return stats.LevelNominal
	case KindRating:
		if q.Level == "interval" {
			return stats.LevelInterval
		}
		return stats.LevelOrdinal
	case KindRanking:
		return stats.LevelOrdinal
	}
	return ""
}

// Units are the units of agreement one answer gives values to, by a key
// that orders them within the item: the answer itself for a label or a
// rating, each option (chosen or not) for labels, each option's place
// for a ranking, and each token of the answer (its span's label, or
// "none") for spans. ok is false for an answer agreement does not read.
func (q Question) Units(raw json.RawMessage, tokens []Token) (map[string]stats.Rating, bool) {
	if len(raw) == 0 || isNull(raw) {
		return nil, false
	}
	switch q.Kind {
	case KindLabel:
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil, false
		}
		return map[string]stats.Rating{"": stats.Text(s)}, true
	case KindLabels:
		var list []string
		if json.Unmarshal(raw, &list) != nil {
			return nil, false
		}
		out := map[string]stats.Rating{}
		for _, o := range q.Options {
			out[o] = stats.Text(yesNo(slices.Contains(list, o)))
		}
		return out, true
	case KindRating:
		var x float64
		if json.Unmarshal(raw, &x) != nil {
			return nil, false
		}
		return map[string]stats.Rating{"": stats.Number(x)}, true
	case KindRanking:
		var list []string
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return nil, false
		}
		out := map[string]stats.Rating{}
		for i, o := range list {
			out[o] = stats.Number(float64(i + 1))
		}
		return out, true
	case KindSpan:
		var spans []Span
		if json.Unmarshal(raw, &spans) != nil {
			return nil, false
		}
		out := map[string]stats.Rating{}
		for i, t := range tokens {
			label := "none"
			for _, s := range spans {
				if s.Start < t.End && t.Start < s.End {
					label = "span"
					if s.Label != "" {
						label = s.Label
					}
					break
				}
			}
			out[fmt.Sprintf("%06d", i)] = stats.Text(label)
		}
		return out, len(out) > 0
	}
	return nil, false
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
