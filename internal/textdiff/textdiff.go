// Package textdiff computes the word-level difference between two texts, as
// the correction editor and the pair editor show it: the original response
// against the curator's correction, the chosen reply against the rejected.
//
// Texts are cut into tokens (runs of letters and digits, runs of
// whitespace, and single other characters) and the shortest edit script
// between the token sequences is found with the O(NP) algorithm of Wu,
// Manber and Myers (github.com/cubicdaiya/gonp). Every byte of both texts
// appears in exactly one Op, so the ops rebuild both sides exactly.
package textdiff

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cubicdaiya/gonp"
)

// Kind says which side of the diff a piece of text belongs to.
type Kind int

const (
	// Equal text is in both a and b.
	Equal Kind = iota
	// Insert text is only in b.
	Insert
	// Delete text is only in a.
	Delete
)

func (k Kind) String() string {
	switch k {
	case Equal:
		return "equal"
	case Insert:
		return "insert"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Op is one piece of the diff.
type Op struct {
	Kind Kind
	Text string
}

// MaxWords bounds the work. The algorithm's cost grows with the product of
// the text length and the number of differences, so when either text has
// more words than this, Words compares whole lines instead (a line counts as
// one token); when either also has this many lines or more, it reports the
// differing middle as one replacement. Common leading and trailing tokens
// (words or lines) stay Equal in every case.
const MaxWords = 20_000

// maxRoute caps the edit-graph points gonp keeps (about 24 bytes each).
// When a comparison needs more, gonp commits the script found so far and
// continues from there: the result is still exact, possibly not minimal.
// This only happens for texts with thousands of changed words; it keeps the
// worst case within MaxWords (two unrelated 20,000-word texts) at about a
// second instead of several.
const maxRoute = 500_000

// Words returns the word-level diff of a and b. Concatenating the Text of the
// Equal and Delete ops gives a; of the Equal and Insert ops, b. Each changed
// region is one Delete followed by one Insert (either may be absent), and
// whitespace alone between two changes is folded into them, so "one two" →
// "uno dos" reads as one replacement rather than two around an unchanged
// space. Identical texts give one Equal op (none if both are empty). The
// ops' Text values are substrings of a and b.
func Words(a, b string) []Op {
	if a == b {
		if a == "" {
			return nil
		}
		return []Op{{Equal, a}}
	}
	if countWords(a) <= MaxWords && countWords(b) <= MaxWords {
		return diffTokens(a, b, words(a), words(b), true)
	}
	if strings.Count(a, "\n") < MaxWords && strings.Count(b, "\n") < MaxWords {
		return diffTokens(a, b, lines(a), lines(b), true)
	}
	return diffTokens(a, b, lines(a), lines(b), false)
}

// equalRun is a stretch of text present in both: a[a0:a1] == b[b0:b0+a1-a0].
type equalRun struct{ a0, a1, b0 int }

// diffTokens diffs a and b, given as token sequences ta and tb. Common ends
// are split off first: they are frequent in corrections (one fixed sentence
// inside a long reply) and the algorithm's cost then depends only on the
// differing middle. With compare false the middle is not compared at all
// and becomes one replacement (the bounded fallback).
func diffTokens(a, b string, ta, tb []string, compare bool) []Op {
	pre, suf := commonEnds(ta, tb)
	preBytes, sufBytes := joinedLen(ta[:pre]), joinedLen(ta[len(ta)-suf:])

	runs := []equalRun{{0, preBytes, 0}}
	if compare {
		runs = appendMiddleRuns(runs, ta[pre:len(ta)-suf], tb[pre:len(tb)-suf], preBytes)
	}
	runs = appendRun(runs, equalRun{len(a) - sufBytes, len(a), len(b) - sufBytes})
	return opsFromRuns(a, b, runs)
}

// appendRun appends r, or extends the last run when r continues it in both
// texts.
func appendRun(runs []equalRun, r equalRun) []equalRun {
	if last := &runs[len(runs)-1]; last.a1 == r.a0 && last.b0+last.a1-last.a0 == r.b0 {
		last.a1 = r.a1
		return runs
	}
	return append(runs, r)
}

// appendMiddleRuns runs the edit-script algorithm over the middle tokens,
// which start at byte offset off in both texts, and appends the equal runs
// it finds (merged where they touch).
func appendMiddleRuns(runs []equalRun, midA, midB []string, off int) []equalRun {
	// gonp compares comparable elements; small integers compare faster than
	// strings, so each distinct token gets a number.
	ids := make(map[string]int, len(midA)+len(midB))
	lens := make([]int, 0, len(midA)+len(midB))
	intern := func(toks []string) []int {
		out := make([]int, len(toks))
		for i, t := range toks {
			id, ok := ids[t]
			if !ok {
				id = len(lens)
				ids[t] = id
				lens = append(lens, len(t))
			}
			out[i] = id
		}
		return out
	}
	d := gonp.New(intern(midA), intern(midB))
	d.SetRouteSize(maxRoute)
	d.Compose()
	pa, pb := off, off
	for _, e := range d.Ses() {
		n := lens[e.GetElem()]
		switch e.GetType() {
		case gonp.SesCommon:
			runs = appendRun(runs, equalRun{pa, pa + n, pb})
			pa, pb = pa+n, pb+n
		case gonp.SesDelete:
			pa += n
		case gonp.SesAdd:
			pb += n
		}
	}
	return runs
}

// opsFromRuns turns the equal runs (in order, possibly empty) into ops: the
// text between two runs is a Delete from a and an Insert from b.
func opsFromRuns(a, b string, runs []equalRun) []Op {
	var ops []Op
	add := func(k Kind, text string) {
		if text != "" {
			ops = append(ops, Op{k, text})
		}
	}
	pa, pb := 0, 0
	for _, r := range runs {
		if r.a0 == r.a1 {
			continue
		}
		changeBefore := r.a0 > pa || r.b0 > pb
		changeAfter := r.a1 < len(a) || r.b0+r.a1-r.a0 < len(b)
		if changeBefore && changeAfter && isSpace(a[r.a0:r.a1]) {
			continue
		}
		add(Delete, a[pa:r.a0])
		add(Insert, b[pb:r.b0])
		add(Equal, a[r.a0:r.a1])
		pa, pb = r.a1, r.b0+r.a1-r.a0
	}
	add(Delete, a[pa:])
	add(Insert, b[pb:])
	return ops
}

// commonEnds returns the number of equal leading tokens and equal trailing
// tokens, not overlapping.
func commonEnds(ta, tb []string) (pre, suf int) {
	for pre < len(ta) && pre < len(tb) && ta[pre] == tb[pre] {
		pre++
	}
	for suf < len(ta)-pre && suf < len(tb)-pre && ta[len(ta)-1-suf] == tb[len(tb)-1-suf] {
		suf++
	}
	return pre, suf
}

func joinedLen(toks []string) int {
	n := 0
	for _, t := range toks {
		n += len(t)
	}
	return n
}

func isSpace(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

// words cuts s into runs of word characters (letters, digits, marks, '_'),
// runs of whitespace, and single other characters. Invalid UTF-8 bytes are
// single tokens, so no byte is lost.
func words(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		class := classOf(r, size)
		j := i + size
		if class != other {
			for j < len(s) {
				r2, size2 := utf8.DecodeRuneInString(s[j:])
				if classOf(r2, size2) != class {
					break
				}
				j += size2
			}
		}
		toks = append(toks, s[i:j])
		i = j
	}
	return toks
}

type charClass int

const (
	other charClass = iota
	word
	space
)

func classOf(r rune, size int) charClass {
	switch {
	case r == utf8.RuneError && size == 1:
		return other
	case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_':
		return word
	case unicode.IsSpace(r):
		return space
	}
	return other
}

// countWords counts runs of word characters in s, stopping once it is past
// MaxWords so that a huge text is not read to the end.
func countWords(s string) int {
	n, inWord := 0, false
	for i := 0; i < len(s) && n <= MaxWords; {
		r, size := utf8.DecodeRuneInString(s[i:])
		isWord := classOf(r, size) == word
		if isWord && !inWord {
			n++
		}
		inWord = isWord
		i += size
	}
	return n
}

// lines cuts s into lines, each keeping its "\n".
func lines(s string) []string {
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}
