package textdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWords(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want []Op
	}{
		{"both empty", "", "", nil},
		{"identical", "same text", "same text", []Op{{Equal, "same text"}}},
		{"all inserted", "", "new text", []Op{{Insert, "new text"}}},
		{"all deleted", "old text", "", []Op{{Delete, "old text"}}},
		{
			"one word replaced", "the cat sat", "the dog sat",
			[]Op{{Equal, "the "}, {Delete, "cat"}, {Insert, "dog"}, {Equal, " sat"}},
		},
		{
			"number in a sentence", "The answer is 42.", "The answer is 43.",
			[]Op{{Equal, "The answer is "}, {Delete, "42"}, {Insert, "43"}, {Equal, "."}},
		},
		{
			"punctuation added", "Hello world", "Hello, world!",
			[]Op{{Equal, "Hello"}, {Insert, ","}, {Equal, " world"}, {Insert, "!"}},
		},
		{
			"space between two changes folds into one replacement", "one two", "uno dos",
			[]Op{{Delete, "one two"}, {Insert, "uno dos"}},
		},
		{
			"whitespace changed", "a  b", "a b",
			[]Op{{Equal, "a"}, {Delete, "  "}, {Insert, " "}, {Equal, "b"}},
		},
		{
			"non-ASCII words", "Grüße, Welt", "Grüße, Erde",
			[]Op{{Equal, "Grüße, "}, {Delete, "Welt"}, {Insert, "Erde"}},
		},
		{
			"word appended", "Use the API", "Use the API key",
			[]Op{{Equal, "Use the API"}, {Insert, " key"}},
		},
		{
			"paragraph kept, sentence rewritten",
			"First line.\n\nPython 2 is current.\n\nLast line.",
			"First line.\n\nPython 3 is current.\n\nLast line.",
			[]Op{{Equal, "First line.\n\nPython "}, {Delete, "2"}, {Insert, "3"}, {Equal, " is current.\n\nLast line."}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Words(tt.a, tt.b)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Words(%q, %q)\n got %v\nwant %v", tt.a, tt.b, got, tt.want)
			}
			checkOps(t, tt.a, tt.b, got)
		})
	}
}

// checkOps asserts what Words promises for any input.
func checkOps(t *testing.T, a, b string, ops []Op) {
	t.Helper()
	var gotA, gotB strings.Builder
	for i, op := range ops {
		if op.Text == "" {
			t.Fatalf("op %d has empty text: %v", i, ops)
		}
		if i > 0 && ops[i-1].Kind == op.Kind {
			t.Fatalf("ops %d and %d share kind %v: %v", i-1, i, op.Kind, ops)
		}
		if i > 0 && ops[i-1].Kind == Insert && op.Kind == Delete {
			t.Fatalf("insert before delete at op %d: %v", i, ops)
		}
		switch op.Kind {
		case Equal:
			gotA.WriteString(op.Text)
			gotB.WriteString(op.Text)
		case Delete:
			gotA.WriteString(op.Text)
		case Insert:
			gotB.WriteString(op.Text)
		default:
			t.Fatalf("op %d has kind %v", i, op.Kind)
		}
	}
	if gotA.String() != a {
		t.Fatalf("Equal+Delete = %q, want a = %q", gotA.String(), a)
	}
	if gotB.String() != b {
		t.Fatalf("Equal+Insert = %q, want b = %q", gotB.String(), b)
	}
}

func TestWordsRebuildsBothSides(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := []string{"the", "model", "answer", "is", "wrong", "right", ",", ".", " ", "\n", "  ", "é", "日本", "\xff"}
	gen := func() string {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(vocab[rng.IntN(len(vocab))])
		}
		return sb.String()
	}
	for range 2000 {
		a, b := gen(), gen()
		checkOps(t, a, b, Words(a, b))
	}
}

// numbered returns n lines of words, distinct per line.
func numbered(n, wordsPerLine int) []string {
	ls := make([]string, n)
	for i := range ls {
		var sb strings.Builder
		for w := range wordsPerLine {
			if w > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "w%d_%d", i, w)
		}
		sb.WriteByte('\n')
		ls[i] = sb.String()
	}
	return ls
}

func TestHugeTextsFallBackToLines(t *testing.T) {
	// 2,500 lines of 10 words: over MaxWords words, under MaxWords lines.
	la := numbered(2500, 10)
	lb := slices.Clone(la)
	lb[100] = "a changed line\n"
	lb[2000] = "another changed line\n"
	a, b := strings.Join(la, ""), strings.Join(lb, "")

	got := Words(a, b)
	want := []Op{
		{Equal, strings.Join(la[:100], "")},
		{Delete, la[100]},
		{Insert, lb[100]},
		{Equal, strings.Join(la[101:2000], "")},
		{Delete, la[2000]},
		{Insert, lb[2000]},
		{Equal, strings.Join(la[2001:], "")},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("line diff: got %d ops, want the 7 line-level ops", len(got))
	}
	checkOps(t, a, b, got)
}

func TestHugeLineCountsFallBackToOneReplacement(t *testing.T) {
	// MaxWords+5,000 one-word lines: over the limit on words and on lines.
	la := numbered(MaxWords+5000, 1)
	lb := slices.Clone(la)
	lb[10] = "first change\n"
	lb[len(lb)-10] = "last change\n"
	a, b := strings.Join(la, ""), strings.Join(lb, "")

	got := Words(a, b)
	want := []Op{
		{Equal, strings.Join(la[:10], "")},
		{Delete, strings.Join(la[10:len(la)-9], "")},
		{Insert, strings.Join(lb[10:len(lb)-9], "")},
		{Equal, strings.Join(la[len(la)-9:], "")},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replacement fallback: got %d ops, want 4", len(got))
	}
	checkOps(t, a, b, got)
}

// The worst case inside the word limit, two unrelated texts of MaxWords
// words each, must finish in bounded time (about a second on one core; the
// limit leaves room for the race detector).
func TestWorstCaseWithinLimitIsBounded(t *testing.T) {
	a := strings.Join(numbered(MaxWords/10, 10), "")
	b := strings.ReplaceAll(a, "w", "v")
	start := time.Now()
	ops := Words(a, b)
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("diff of two unrelated %d-word texts took %v", MaxWords, d)
	}
	checkOps(t, a, b, ops)
}

func FuzzWords(f *testing.F) {
	f.Add("the cat sat", "the dog sat")
	f.Add("one two", "uno dos")
	f.Add("", "x")
	f.Add("a\n\nb  c", "a\nb c\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		checkOps(t, a, b, Words(a, b))
	})
}

func BenchmarkWords(b *testing.B) {
	para := strings.Repeat("The assistant should cite the policy document and give the exact figure. ", 40)
	edited := strings.Replace(para, "exact figure", "exact figure from 2024", 5)
	b.Run("correction-3k-words", func(b *testing.B) {
		for b.Loop() {
			Words(para, edited)
		}
	})
}
