package scorers

import (
	"fmt"
	"strings"
	"unicode"
)

// cjk reports whether r is written without spaces between words (Chinese,
// Japanese kana, Korean), so that each character counts as a token, as the
// Chinese reading-comprehension benchmarks (CMRC 2018, DuReader) score F1.
func cjk(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// words splits text into lower-case tokens: runs of letters and digits
// separated by whitespace, punctuation or symbols, each CJK character on
// its own.
func words(text string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range strings.ToLower(text) {
		switch {
		case cjk(r):
			flush()
			out = append(out, string(r))
		case unicode.IsSpace(r):
			flush()
		case unicode.IsPunct(r) || unicode.IsSymbol(r):
			// SQuAD deletes punctuation rather than splitting on it, so
			// "don't" is one token "dont" and "U.S." is "us".
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

// squadTokens normalises as SQuAD v1.1's evaluation script does: lower
// case, punctuation removed, the articles a, an and the dropped, whitespace
// collapsed; then splits (with CJK characters as tokens, see words).
func squadTokens(text string) []string {
	ws := words(text)
	out := ws[:0]
	for _, w := range ws {
		if w != "a" && w != "an" && w != "the" {
			out = append(out, w)
		}
	}
	return out
}

// TokenF1 is SQuAD's token F1 of an answer against a reference: the
// harmonic mean of precision and recall over the multiset of shared
// tokens. Two texts with no tokens after normalisation score 1 when both
// are empty and 0 otherwise, as in the SQuAD script.
func TokenF1(answer, reference string) float64 {
	a, r := squadTokens(answer), squadTokens(reference)
	if len(a) == 0 || len(r) == 0 {
		if len(a) == len(r) {
			return 1
		}
		return 0
	}
	counts := map[string]int{}
	for _, t := range r {
		counts[t]++
	}
	common := 0
	for _, t := range a {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p := float64(common) / float64(len(a))
	rc := float64(common) / float64(len(r))
	return 2 * p * rc / (p + rc)
}

// RougeL is ROUGE-L's F-measure of an answer against a reference (Lin,
// 2004, section 3.1): with L the longest common subsequence of their
// tokens, recall L/len(reference), precision L/len(answer), and F their
// harmonic mean (β = 1, as Google's rouge-score package computes it).
// Tokens are lower-cased words with punctuation removed; articles are
// kept, as ROUGE keeps them.
func RougeL(answer, reference string) float64 {
	a, r := words(answer), words(reference)
	if len(a) == 0 || len(r) == 0 {
		if len(a) == len(r) {
			return 1
		}
		return 0
	}
	l := lcs(a, r)
	if l == 0 {
		return 0
	}
	p := float64(l) / float64(len(a))
	rc := float64(l) / float64(len(r))
	return 2 * p * rc / (p + rc)
}

// lcs is the length of the longest common subsequence, by dynamic
// programming over two rows: time len(a)·len(b), memory len(b).
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			switch {
			case a[i] == b[j]:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func noReference(in Input) (Score, bool) {
	if strings.TrimSpace(in.Reference) == "" {
		return Invalidf("the item has no reference answer"), true
	}
	return Score{}, false
}

func referenceF1(in Input) Score {
	if s, none := noReference(in); none {
		return s
	}
	v := TokenF1(in.Answer, in.Reference)
	return Score{Value: v, Explanation: fmt.Sprintf("token F1 %.3f against the reference", v)}
}

func referenceRougeL(in Input) Score {
	if s, none := noReference(in); none {
		return s
	}
	v := RougeL(in.Answer, in.Reference)
	return Score{Value: v, Explanation: fmt.Sprintf("ROUGE-L %.3f against the reference", v)}
}
