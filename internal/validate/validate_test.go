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

			// The same examples added by their stored facts give the same report.
			stored, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			var facts []Facts
			for _, ex := range tc.sft {
				facts = append(facts, v.SFTFacts(ex))
			}
			for _, p := range tc.pref {
				facts = append(facts, v.PrefFacts(p))
			}
			for _, fa := range facts {
				stored.AddFacts(roundTrip(t, fa))
			}
			if got := stored.Report(); !reflect.DeepEqual(got, r) {
				t.Errorf("report from stored facts differs:\n%+v\nwant\n%+v", got, r)
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

// validateFile reads an OpenAI chat file and returns its report.
func validateFile(t *testing.T, path string, opts Options) *Report {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := New(opts)
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
	return v.Report()
}

// fileWant is what a report on a five-example chat file should say.
type fileWant struct {
	limit                           int
	tokens                          []int
	total, billable, epochs, billed int
	dist                            Distribution
	asstMin, asstMax                int
	asstMedian                      float64
	findings                        map[string][]int
	overContextMessage              string
	withErrors, withWarnings        int
	score                           float64
}

func checkFileReport(t *testing.T, r *Report, want fileWant) {
	t.Helper()
	if r.Encoding != tokens.CL100K || r.ContextLimit != want.limit {
		t.Errorf("encoding %s, limit %d; want cl100k_base, %d", r.Encoding, r.ContextLimit, want.limit)
	}
	if !slices.Equal(r.ExampleTokens, want.tokens) {
		t.Errorf("example tokens = %v, want %v", r.ExampleTokens, want.tokens)
	}
	if r.TotalTokens != want.total || r.BillableTokens != want.billable || r.Epochs != want.epochs || r.EstimatedBilledTokens != want.billed {
		t.Errorf("total %d, billable %d, epochs %d, billed %d; want %d, %d, %d, %d",
			r.TotalTokens, r.BillableTokens, r.Epochs, r.EstimatedBilledTokens, want.total, want.billable, want.epochs, want.billed)
	}
	if !closeDist(r.Tokens, want.dist) {
		t.Errorf("token distribution = %+v, want %+v", r.Tokens, want.dist)
	}
	if a := r.AssistantTokens; a.Min != want.asstMin || a.Max != want.asstMax || a.Median != want.asstMedian {
		t.Errorf("assistant distribution = %+v, want min %d, max %d, median %g", a, want.asstMin, want.asstMax, want.asstMedian)
	}
	if got := found(r); !reflect.DeepEqual(got, want.findings) {
		t.Errorf("findings = %v, want %v", got, want.findings)
	}
	if !r.Blocking() {
		t.Error("report does not block, but an example exceeds the context and there are fewer than 10 examples")
	}
	if r.ExamplesWithErrors != want.withErrors || r.ExamplesWithWarnings != want.withWarnings || math.Abs(r.QualityScore-want.score) > 1e-9 {
		t.Errorf("errors %d, warnings %d, score %v; want %d, %d, %v",
			r.ExamplesWithErrors, r.ExamplesWithWarnings, r.QualityScore, want.withErrors, want.withWarnings, want.score)
	}
	for _, s := range r.Findings {
		if s.Code == CodeOverContext && !strings.Contains(s.Samples[0].Message, want.overContextMessage) {
			t.Errorf("over-context message %q does not give the count", s.Samples[0].Message)
		}
	}
}

// testdata/chat.jsonl was written for this test: five support chats, the
// third without a user message, the fourth a long answer. Token counts
// (47, 30, 24, 140, 38; assistant 15, 12, 8, 122, 11) come from OpenAI's
// own tiktoken, not from this module. With a 100-token context the fourth
// is over it; everything else by hand below.
func TestChatFixture(t *testing.T) {
	r := validateFile(t, filepath.Join("testdata", "chat.jsonl"),
		Options{Format: export.OpenAIChat, BaseModel: "gpt-3.5-turbo-0613", ContextLimit: 100})
	checkFileReport(t, r, fileWant{
		limit:  100,
		tokens: []int{47, 30, 24, 140, 38},
		// Billable: 47 + 30 + 24 + 100 (capped) + 38 = 239; 5 examples
		// make 20 default epochs (100 passes / 5), so 4,780 billed.
		total: 279, billable: 239, epochs: 20, billed: 4780,
		// Sorted 24, 30, 38, 47, 140: mean 279/5; p5 at rank 0.2 = 24 +
		// 0.2 × 6; p95 at rank 3.8 = 47 + 0.8 × 93.
		dist:    Distribution{Min: 24, Max: 140, Mean: 55.8, Median: 38, P5: 25.2, P95: 121.4},
		asstMin: 8, asstMax: 122, asstMedian: 12,
		// Deviations from the median 38: 9, 8, 14, 102, 0; their median
		// 9 × 1.4826 × 3 = 40.0: only the fourth is an outlier.
		findings: map[string][]int{
			CodeOverContext:    {3},
			CodeTooFewExamples: {-1},
			CodeNoUserMessage:  {2},
			CodeLengthOutlier:  {3},
		},
		overContextMessage: "140 tokens",
		// The fourth has an error, the third only a warning: 1 - (1 + 0.5)/5.
		withErrors: 1, withWarnings: 1, score: 0.7,
	})
}

// The OpenAI cookbook's toy file (public data): its numbers are printed by
// the cookbook's data-preparation notebook (per-example totals 45, 111, 26,
// 28, 8032; one example over a 4,096-token limit; ~4306 billable tokens; 20
// epochs by default; ~86120 tokens charged).
func TestCookbookToyFile(t *testing.T) {
	// gpt-3.5-turbo-0613 trained on at most 4,096 tokens per example, the
	// limit the notebook checked against.
	r := validateFile(t, publicdata.Path(t, "openai-cookbook", "toy_chat_fine_tuning.jsonl"),
		Options{Format: export.OpenAIChat, BaseModel: "gpt-3.5-turbo-0613"})
	checkFileReport(t, r, fileWant{
		limit:  4096,
		tokens: []int{45, 111, 26, 28, 8032},
		total:  8242, billable: 4306, epochs: 20, billed: 86120,
		// By hand, numpy-style: sorted 26, 28, 45, 111, 8032; p5 at rank 0.2
		// = 26.4; p95 at rank 3.8 = 111 + 0.8 × 7921 = 6447.8.
		dist: Distribution{Min: 26, Max: 8032, Mean: 1648.4, Median: 45, P5: 26.4, P95: 6447.8},
		// Assistant tokens 10, 28, 9, 4, 8000.
		asstMin: 4, asstMax: 8000, asstMedian: 10,
		findings: map[string][]int{
			CodeOverContext:    {4},
			CodeTooFewExamples: {-1},
			CodeNoUserMessage:  {3},
			CodeLengthOutlier:  {4},
		},
		overContextMessage: "8032 tokens",
		// Example 4 has an error, example 3 only a warning: 1 - (1 + 0.5)/5.
		withErrors: 1, withWarnings: 1, score: 0.7,
	})
}

func closeDist(a, b Distribution) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Min == b.Min && a.Max == b.Max && near(a.Mean, b.Mean) && near(a.Median, b.Median) && near(a.P5, b.P5) && near(a.P95, b.P95)
}

// testdata/chat_faults.jsonl, written for this test, read as the export reads
// an OpenAI chat file: four examples (too few for length outliers to be
// looked for), of which the second has no user message, the third ends on
// the user's turn and the fourth repeats the first. By hand: 4 < 10
// examples is too few (a dataset-level error); one example has an error
// and two only warnings, so the score is 1 - (1 + 0.5 × 2) / 4 = 0.5.
func TestChatFaultsFixture(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "chat_faults.jsonl"))
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

// roundTrip encodes facts as they are stored and decodes them again.
func roundTrip(t *testing.T, fa Facts) Facts {
	t.Helper()
	raw, err := fa.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Facts
	if err := out.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, fa) {
		t.Fatalf("facts changed on the way through storage:\n%+v\nwant\n%+v", out, fa)
	}
	return out
}

func TestFactsRefuseDamage(t *testing.T) {
	v, err := New(Options{Format: export.OpenAIChat, Counter: counter(t), PIIDetector: func(string) []string { return []string{"email"} }})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := v.SFTFacts(sft(user("Mail me at ann@example.com"), assistant("Sure."))).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(raw) {
		var fa Facts
		if err := fa.UnmarshalBinary(raw[:cut]); err == nil {
			t.Fatalf("facts cut to %d of %d bytes decoded", cut, len(raw))
		}
	}
	var fa Facts
	if err := fa.UnmarshalBinary(append(slices.Clone(raw), 0)); err == nil {
		t.Fatal("facts with a trailing byte decoded")
	}
	if p := v.Profile(); p != "openai_chat/cl100k_base/pii=true/r1" {
		t.Errorf("profile = %q", p)
	}
}
