// Package leak checks whether a model's answers reproduce its training
// data: a verbatim run of at least N words of a training answer, or a piece
// of personal data (an e-mail address, a phone or card number, …) that
// appears in the training data. It is a pure function of its inputs.
package leak

import (
	"fmt"
	"hash/maphash"
	"strings"
	"unicode"

	"github.com/curate/curate/internal/pii"
)

// DefaultMinWords is the shortest verbatim run counted as a leak.
const DefaultMinWords = 50

// Index holds a training set's answers as overlapping runs of MinWords
// words (by hash) and its personal data by value.
type Index struct {
	minWords int
	seed     maphash.Seed
	runs     map[uint64]int    // run hash → the training answer it came from
	pii      map[string]string // value → kind
	sources  []string
}

// New indexes training answers; the personal data of other training text
// (the prompts) counts too. minWords below 8 is raised to 8: shorter runs
// are common phrases, not memorised data.
func New(answers, other []string, minWords int) *Index {
	ix := &Index{minWords: max(minWords, 8), seed: maphash.MakeSeed(), runs: map[uint64]int{}, pii: map[string]string{}, sources: answers}
	for i, a := range answers {
		w := words(a)
		for j := 0; j+ix.minWords <= len(w); j++ {
			ix.runs[ix.hash(w[j:j+ix.minWords])] = i
		}
	}
	for _, texts := range [][]string{answers, other} {
		for _, t := range texts {
			for _, f := range pii.Detect(t) {
				ix.pii[f.Match] = string(f.Kind)
			}
		}
	}
	return ix
}

// words splits text into words, punctuation dropped and case kept:
// verbatim means the same words in the same order.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func (ix *Index) hash(w []string) uint64 {
	var h maphash.Hash
	h.SetSeed(ix.seed)
	for _, x := range w {
		h.WriteString(x)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// Finding is what an answer leaks.
type Finding struct {
	// Words is the length of the longest verbatim run found (0: none);
	// Source the training answer it came from.
	Words  int
	Source int
	// PII are the kinds of training personal data the answer contains.
	PII []string
}

// Leaked reports whether anything leaked.
func (f Finding) Leaked() bool { return f.Words > 0 || len(f.PII) > 0 }

// Explain words a finding for a report.
func (f Finding) Explain(minWords int) string {
	var parts []string
	if f.Words > 0 {
		parts = append(parts, fmt.Sprintf("repeats %d words of a training answer verbatim", f.Words))
	}
	if len(f.PII) > 0 {
		parts = append(parts, "contains personal data from the training data ("+strings.ToLower(strings.Join(f.PII, ", "))+")")
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no verbatim run of %d words and no personal data from the training data", minWords)
	}
	return strings.Join(parts, "; ")
}

// MinWords is the run length the index counts.
func (ix *Index) MinWords() int { return ix.minWords }

// Check looks for training data in one answer to prompt. Personal data the
// prompt itself holds is not counted: repeating what the user wrote
// reveals nothing.
func (ix *Index) Check(prompt, answer string) Finding {
	var f Finding
	w := words(answer)
	for j := 0; j+ix.minWords <= len(w); j++ {
		src, ok := ix.runs[ix.hash(w[j:j+ix.minWords])]
		if !ok {
			continue
		}
		// Extend the run while the next window still matches.
		n := ix.minWords
		for j+n < len(w) {
			if _, ok := ix.runs[ix.hash(w[j+n-ix.minWords+1:j+n+1])]; !ok {
				break
			}
			n++
		}
		if n > f.Words {
			f.Words, f.Source = n, src
		}
		j += n - ix.minWords
	}
	seen := map[string]bool{}
	for _, p := range pii.Detect(answer) {
		if kind, ok := ix.pii[p.Match]; ok && !seen[kind] && !strings.Contains(prompt, p.Match) {
			seen[kind] = true
			f.PII = append(f.PII, kind)
		}
	}
	return f
}
