package validate

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/publicdata"
	"github.com/curate/curate/internal/tokens"
)

var cl100k = sync.OnceValues(func() (*tokens.Counter, error) { return tokens.New(tokens.CL100K) })

func counter(t *testing.T) *tokens.Counter {
	t.Helper()
	c, err := cl100k()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func user(s string) export.Message { return export.Message{Role: export.RoleUser, Content: s} }
func assistant(s string) export.Message {
	return export.Message{Role: export.RoleAssistant, Content: s}
}
func msg(role, s string) export.Message { return export.Message{Role: role, Content: s} }
func sft(msgs ...export.Message) export.SFTExample {
	return export.SFTExample{Messages: msgs}
}
func pair(prompt string, chosen, rejected string) export.PrefExample {
	return export.PrefExample{Prompt: []export.Message{user(prompt)}, Chosen: chosen, Rejected: rejected}
}

// found maps each code in the report to the example indexes of its samples.
func found(r *Report) map[string][]int {
	out := map[string][]int{}
	for _, s := range r.Findings {
		for _, f := range s.Samples {
			out[s.Code] = append(out[s.Code], f.Example)
		}
	}
	return out
}

func TestRules(t *testing.T) {
	longText := func(swap string) string {
		words := make([]string, 300)
		for i := range words {
			words[i] = fmt.Sprintf("word%d", i)
		}
		words[150] = swap
		return strings.Join(words, " ")
	}
	cases := []struct {
		name     string
		opts     Options
		sft      []export.SFTExample
		pref     []export.PrefExample
		want     map[string][]int
		blocking bool
	}{
		{name: "clean openai chat", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{{System: "Be kind.", Messages: []export.Message{user("Hi"), assistant("Hello!")}}},
			want: map[string][]int{}},
		{name: "unknown role", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{sft(user("Hi"), msg("tool", "{}"), assistant("Done."))},
			want: map[string][]int{CodeInvalidRole: {0}}, blocking: true},
		{name: "empty user content", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{sft(user("Hi"), assistant("Hello")), sft(user("  \n"), assistant("Hello?"))},
			want: map[string][]int{CodeEmptyContent: {1}}, blocking: true},
		{name: "last from user", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{sft(user("Hi"), assistant("Hello"), user("Bye"))},
			want: map[string][]int{CodeLastNotAssistant: {0}}, blocking: true},
		{name: "no messages", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{{System: "Be kind."}},
			want: map[string][]int{CodeLastNotAssistant: {0}}, blocking: true},
		{name: "whitespace reply", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{sft(user("Hi"), assistant(" \t"))},
			want: map[string][]int{CodeEmptyResponse: {0}}, blocking: true},
		{name: "no user message warns only", opts: Options{Format: export.OpenAIChat},
			sft:  []export.SFTExample{{System: "Be kind.", Messages: []export.Message{assistant("You're great!")}}},
			want: map[string][]int{CodeNoUserMessage: {0}}},
		{name: "openai minimum of ten", opts: Options{Format: export.OpenAIChat, MinExamples: -1},
			sft:  []export.SFTExample{sft(user("Hi"), assistant("Hello"))},
			want: map[string][]int{CodeTooFewExamples: {-1}}, blocking: true},
		{name: "openai preference one turn", opts: Options{Format: export.OpenAIPreference},
			pref: []export.PrefExample{
				{System: "Be brief.", Prompt: []export.Message{user("Sky color?")}, Chosen: "Blue.", Rejected: "Green."},
				{Prompt: []export.Message{user("Hi"), assistant("Hello"), user("Sky color?")}, Chosen: "Blue.", Rejected: "Green."},
			},
			want: map[string][]int{CodeNotOneTurn: {1}}, blocking: true},
		{name: "openai preference empty outputs", opts: Options{Format: export.OpenAIPreference},
			pref: []export.PrefExample{pair("Sky color?", "Blue.", ""), pair("Grass color?", "\n", "Green.")},
			want: map[string][]int{CodeEmptyResponse: {0, 1}}, blocking: true},
		{name: "chosen equals rejected", opts: Options{Format: export.TRLPreference},
			pref: []export.PrefExample{pair("Sky color?", "Blue.", " Blue.\n")},
			want: map[string][]int{CodeChosenEqualsRejected: {0}}, blocking: true},
		{name: "prompt ends with assistant", opts: Options{Format: export.TRLPreference},
			pref: []export.PrefExample{{Prompt: []export.Message{user("Hi"), assistant("Hello")}, Chosen: "a", Rejected: "b"}},
			want: map[string][]int{CodePromptNotUserLast: {0}}, blocking: true},
		{name: "sft into preference format", opts: Options{Format: export.TRLPreference},
			sft:  []export.SFTExample{sft(user("Hi"), assistant("Hello"))},
			want: map[string][]int{CodeWrongKind: {0}}, blocking: true},
		{name: "preference into sft format checks only the chosen reply", opts: Options{Format: export.OpenAIChat},
			pref: []export.PrefExample{pair("Sky color?", "Blue.", "")},
			want: map[string][]int{}},
		{name: "bedrock first message", opts: Options{Format: export.BedrockChat},
			sft:  []export.SFTExample{sft(assistant("Hello"), user("Hi"), assistant("Hi again"))},
			want: map[string][]int{CodeFirstNotUser: {0}}, blocking: true},
		{name: "bedrock alternation", opts: Options{Format: export.BedrockChat},
			sft:  []export.SFTExample{sft(user("Hi"), user("Anyone?"), assistant("Yes"))},
			want: map[string][]int{CodeRolesNotAlternating: {0}}, blocking: true},
		{name: "bedrock system inside", opts: Options{Format: export.BedrockChat},
			sft:  []export.SFTExample{sft(user("Hi"), msg("system", "Be brief."), assistant("Yes"))},
			want: map[string][]int{CodeInvalidRole: {0}}, blocking: true},
		{name: "alpaca shape", opts: Options{Format: export.Alpaca},
			sft:  []export.SFTExample{sft(user("Q1"), user("Q2"), assistant("A"))},
			want: map[string][]int{CodeUnwritable: {0}}, blocking: true},
		{name: "exact duplicate after normalising", opts: Options{Format: export.OpenAIChat},
			sft: []export.SFTExample{
				sft(user("What is the capital of France?"), assistant("Paris.")),
				sft(user("what is the  capital of\nFrance?"), assistant("PARIS.")),
				sft(user("What is the capital of Spain?"), assistant("Madrid.")),
			},
			want: map[string][]int{CodeDuplicate: {1}}},
		// 300 words with one changed: 295 of 301 distinct 3-grams are
		// shared, a Jaccard similarity of 0.98.
		{name: "near duplicate", opts: Options{Format: export.OpenAIChat},
			sft: []export.SFTExample{
				sft(user("Summarise"), assistant(longText("alpha"))),
				sft(user("Summarise"), assistant(longText("beta"))),
				sft(user("Summarise"), assistant("Something else entirely, with no shared phrasing at all.")),
			},
			want: map[string][]int{CodeNearDuplicate: {1}}},
		{name: "over context", opts: Options{Format: export.OpenAIChat, ContextLimit: 20},
			sft: []export.SFTExample{
				sft(user("Hi"), assistant("Hello")),
				sft(user("Tell me a story"), assistant(strings.Repeat("Once upon a time. ", 10))),
			},
			want: map[string][]int{CodeOverContext: {1}}, blocking: true},
		{name: "pii hook", opts: Options{Format: export.OpenAIChat, PIIDetector: func(s string) []string {
			var kinds []string
			if strings.Contains(s, "@") {
				kinds = append(kinds, "email", "email")
			}
			return kinds
		}},
			sft: []export.SFTExample{
				sft(user("Mail me at ann@example.com"), assistant("Sure.")),
				sft(user("Hi"), assistant("Hello")),
			},
			want: map[string][]int{CodePII: {0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Counter = counter(t)
			switch opts.MinExamples {
			case 0:
				opts.MinExamples = 1
			case -1:
				opts.MinExamples = 0 // the format's own minimum
			}
			v, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, ex := range tc.sft {
				v.AddSFT(ex)
			}
			for _, p := range tc.pref {
				v.AddPref(p)
			}
			r := v.Report()
			if got := found(r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("findings = %v, want %v\n%+v", got, tc.want, r.Findings)
			}
			if r.Blocking() != tc.blocking {
				t.Errorf("Blocking() = %v, want %v", r.Blocking(), tc.blocking)
			}
		})
	}
}

func TestFindingMessages(t *testing.T) {
	v, err := New(Options{Format: export.OpenAIChat, MinExamples: 1, Counter: counter(t),
		PIIDetector: func(string) []string { return []string{"phone", "email"} }})
	if err != nil {
		t.Fatal(err)
	}
	v.AddSFT(sft(user("Hi"), msg("tool", "{}"), assistant("Done.")))
	r := v.Report()
	want := map[string]string{
		CodeInvalidRole: `messages[1].role: "tool" is not allowed in openai_chat (want system, user, assistant)`,
		CodePII:         "possible personal data: email, phone",
	}
	for _, s := range r.Findings {
		if w, ok := want[s.Code]; ok && s.Samples[0].Message != w {
			t.Errorf("%s message = %q, want %q", s.Code, s.Samples[0].Message, w)
		}
	}
	// Errors are listed before warnings.
	if r.Findings[0].Severity != Error || r.Findings[len(r.Findings)-1].Severity != Warning {
		t.Errorf("findings not ordered errors first: %+v", r.Findings)
	}
}

func TestSamplesCappedCountsKept(t *testing.T) {
	v, err := New(Options{Format: export.OpenAIChat, MinExamples: 1, MaxSamples: 2, Counter: counter(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		v.AddSFT(sft(user(fmt.Sprintf("question %d", i)), assistant("")))
	}
	r := v.Report()
	if len(r.Findings) != 1 || r.Findings[0].Count != 5 || len(r.Findings[0].Samples) != 2 {
		t.Fatalf("findings = %+v, want one code counted 5 times with 2 samples", r.Findings)
	}
	if r.Errors != 5 || r.ExamplesWithErrors != 5 || r.QualityScore != 0 {
		t.Errorf("errors %d, examples with errors %d, score %v; want 5, 5, 0", r.Errors, r.ExamplesWithErrors, r.QualityScore)
	}
}

func TestLengthOutliers(t *testing.T) {
	cases := []struct {
		values []int
		want   []int
	}{
		// Median 45; deviations 0, 66, 19, 17, 7987; MAD 19, so the cut is
		// 3 × 1.4826 × 19 = 84.5 tokens from the median.
		{[]int{45, 111, 26, 28, 8032}, []int{4}},
		// MAD 0 (most values equal): mean deviation 99, cut 3 × 1.2533 × 99 = 372.
		{[]int{10, 10, 10, 10, 10, 10, 10, 10, 10, 1000}, []int{9}},
		{[]int{10, 10, 10, 10, 11, 11}, nil},
		{[]int{1, 1000, 1000000, 5}, nil}, // too few to judge
		{[]int{100, 101, 99, 102, 98, 100}, nil},
	}
	for _, tc := range cases {
		var got []int
		for _, o := range lengthOutliers(tc.values) {
			got = append(got, o.index)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("lengthOutliers(%v) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

func TestDefaultEpochs(t *testing.T) {
	// The cookbook's rule, worked by hand.
	cases := map[int]int{1: 25, 5: 20, 33: 3, 34: 3, 50: 3, 8333: 3, 8334: 2, 20000: 1, 100000: 1}
	for n, want := range cases {
		if got := defaultEpochs(n); got != want {
			t.Errorf("defaultEpochs(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestReportTwice(t *testing.T) {
	v, err := New(Options{Format: export.OpenAIChat, Counter: counter(t)})
	if err != nil {
		t.Fatal(err)
	}
	v.AddSFT(sft(user("Hi"), assistant("Hello")))
	a, b := v.Report(), v.Report()
	if a.Count(CodeTooFewExamples) != 1 || b.Count(CodeTooFewExamples) != 1 || a.Errors != b.Errors {
		t.Errorf("second report differs: %+v vs %+v", a.Findings, b.Findings)
	}
}

func TestNewRejectsUnknownFormat(t *testing.T) {
	if _, err := New(Options{Format: "csv"}); err == nil {
		t.Fatal("New accepted format csv")
	}
}

// The OpenAI cookbook's toy file: its numbers are printed by the cookbook's
// data-preparation notebook (per-example totals 45, 111, 26, 28, 8032; one
// example over a 4,096-token limit; ~4306 billable tokens; 20 epochs by
// default; ~86120 tokens charged).
func TestCookbookToyFile(t *testing.T) {
	f, err := os.Open(publicdata.Path(t, "openai-cookbook", "toy_chat_fine_tuning.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// gpt-3.5-turbo-0613 trained on at most 4,096 tokens per example, the
	// limit the notebook checked against.
	v, err := New(Options{Format: export.OpenAIChat, BaseModel: "gpt-3.5-turbo-0613"})
	if err != nil {
		t.Fatal(err)
	}
	err = export.ReadSFT(context.Background(), export.OpenAIChat, f, func(_ int, ex export.SFTExample) error {
		v.AddSFT(ex)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := v.Report()

	if r.Encoding != tokens.CL100K || r.ContextLimit != 4096 {
		t.Errorf("encoding %s, limit %d; want cl100k_base, 4096", r.Encoding, r.ContextLimit)
	}
	if want := []int{45, 111, 26, 28, 8032}; !slices.Equal(r.ExampleTokens, want) {
		t.Errorf("example tokens = %v, want %v", r.ExampleTokens, want)
	}
	if r.TotalTokens != 8242 || r.BillableTokens != 4306 || r.Epochs != 20 || r.EstimatedBilledTokens != 86120 {
		t.Errorf("total %d, billable %d, epochs %d, billed %d; want 8242, 4306, 20, 86120",
			r.TotalTokens, r.BillableTokens, r.Epochs, r.EstimatedBilledTokens)
	}
	// By hand, numpy-style: sorted 26, 28, 45, 111, 8032; p5 at rank 0.2
	// = 26.4; p95 at rank 3.8 = 111 + 0.8 × 7921 = 6447.8.
	wantDist := Distribution{Min: 26, Max: 8032, Mean: 1648.4, Median: 45, P5: 26.4, P95: 6447.8}
	if !closeDist(r.Tokens, wantDist) {
		t.Errorf("token distribution = %+v, want %+v", r.Tokens, wantDist)
	}
	// Assistant tokens 10, 28, 9, 4, 8000.
	if r.AssistantTokens.Min != 4 || r.AssistantTokens.Max != 8000 || r.AssistantTokens.Median != 10 {
		t.Errorf("assistant distribution = %+v, want min 4, max 8000, median 10", r.AssistantTokens)
	}

	want := map[string][]int{
		CodeOverContext:    {4},
		CodeTooFewExamples: {-1},
		CodeNoUserMessage:  {3},
		CodeLengthOutlier:  {4},
	}
	if got := found(r); !reflect.DeepEqual(got, want) {
		t.Errorf("findings = %v, want %v", got, want)
	}
	if !r.Blocking() {
		t.Error("report does not block, but an example exceeds the context and there are fewer than 10 examples")
	}
	// Example 4 has an error, example 3 only a warning: 1 - (1 + 0.5)/5.
	if r.ExamplesWithErrors != 1 || r.ExamplesWithWarnings != 1 || math.Abs(r.QualityScore-0.7) > 1e-9 {
		t.Errorf("errors %d, warnings %d, score %v; want 1, 1, 0.7", r.ExamplesWithErrors, r.ExamplesWithWarnings, r.QualityScore)
	}
	for _, s := range r.Findings {
		if s.Code == CodeOverContext && !strings.Contains(s.Samples[0].Message, "8032 tokens") {
			t.Errorf("over-context message %q does not give the count", s.Samples[0].Message)
		}
	}
}

// testdata/chat.jsonl, written for this test, read as the export reads
// an OpenAI chat file: four examples (too few for length outliers to be
// looked for), of which the second has no user message, the third ends on
// the user's turn and the fourth repeats the first. By hand: 4 < 10
// examples is too few (a dataset-level error); one example has an error
// and two only warnings, so the score is 1 - (1 + 0.5 × 2) / 4 = 0.5.
func TestChatFixture(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "chat.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := New(Options{Format: export.OpenAIChat, Counter: counter(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := export.ReadSFT(context.Background(), export.OpenAIChat, f, func(_ int, ex export.SFTExample) error {
		v.AddSFT(ex)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := v.Report()
	want := map[string][]int{
		CodeTooFewExamples:   {-1},
		CodeNoUserMessage:    {1},
		CodeLastNotAssistant: {2},
		CodeDuplicate:        {3},
	}
	if got := found(r); r.Examples != 4 || !reflect.DeepEqual(got, want) {
		t.Errorf("%d examples, findings %v; want 4 and %v", r.Examples, got, want)
	}
	if !r.Blocking() || r.ExamplesWithErrors != 1 || r.ExamplesWithWarnings != 2 || math.Abs(r.QualityScore-0.5) > 1e-9 {
		t.Errorf("blocking %v, errors %d, warnings %d, score %v; want true, 1, 2, 0.5",
			r.Blocking(), r.ExamplesWithErrors, r.ExamplesWithWarnings, r.QualityScore)
	}
}

func closeDist(a, b Distribution) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Min == b.Min && a.Max == b.Max && near(a.Mean, b.Mean) && near(a.Median, b.Median) && near(a.P5, b.P5) && near(a.P95, b.P95)
}
