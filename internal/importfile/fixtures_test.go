package importfile

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The files in testdata were written for these tests, a few lines each,
// so every reader is tested where the public data sets are not at hand.
// The expected values below were worked out by hand from the files.

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// curateLine has the fields the Curate JSONL fixture uses.
type curateLine struct {
	Query        string         `json:"query"`
	Response     string         `json:"response"`
	FeedbackType string         `json:"feedback_type"`
	ExternalID   string         `json:"external_id"`
	Tags         []string       `json:"tags"`
	Correction   string         `json:"correction"`
	Rating       int            `json:"rating"`
	Comment      string         `json:"comment"`
	Context      map[string]any `json:"context"`
}

func TestReadJSONLFixture(t *testing.T) {
	var lines []int
	var got []curateLine
	err := ReadJSONL(context.Background(), open(t, "feedback.jsonl"), func(line int, v curateLine) error {
		lines = append(lines, line)
		got = append(got, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Line 3 is blank.
	if !slices.Equal(lines, []int{1, 2, 4}) {
		t.Fatalf("lines %v, want [1 2 4]", lines)
	}
	if got[1].Correction != "30 days from delivery." || got[2].Rating != 2 || got[2].Context["documents"] == nil || got[0].Tags[0] != "account" {
		t.Fatalf("items %+v", got)
	}

	err = ReadJSONL(context.Background(), open(t, "feedback_truncated.jsonl"), func(int, curateLine) error { return nil })
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated file: %v, want a cut-off line 3", err)
	}
}

func TestReadHHRLHFFixture(t *testing.T) {
	for _, name := range []string{"hh_rlhf.jsonl", "hh_rlhf.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			var pairs []Pair
			rep, err := ReadHHRLHF(context.Background(), open(t, name), func(p Pair) error {
				pairs = append(pairs, p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantSkipped := []Skip{{3, "empty chosen reply"}, {4, "chosen and rejected are identical"}}
			if rep.Lines != 4 || rep.Pairs != 2 || len(pairs) != 2 || !slices.Equal(rep.Skipped, wantSkipped) {
				t.Fatalf("report %+v, %d pairs; want 4 lines, 2 pairs, skipped %v", rep, len(pairs), wantSkipped)
			}
			single := pairs[0]
			if single.Line != 1 || !slices.Equal(single.Prompt, []Message{{RoleUser, "How long should I boil an egg for a runny yolk?"}}) ||
				single.Chosen != "About six minutes from boiling, then cool it in cold water." || single.Rejected != "Twenty minutes." {
				t.Errorf("line 1: %+v", single)
			}
			multi := pairs[1]
			wantPrompt := []Message{
				{RoleUser, "I want to learn to juggle."},
				{RoleAssistant, "Start with one ball, thrown from hand to hand at eye height."},
				{RoleUser, "And after that?"},
			}
			if multi.Line != 2 || !slices.Equal(multi.Prompt, wantPrompt) ||
				multi.Chosen != "Add a second ball: throw it when the first one peaks." || multi.Rejected != "Buy some knives." {
				t.Errorf("line 2: %+v", multi)
			}
			if single.ExternalID == multi.ExternalID || !strings.HasPrefix(single.ExternalID, "hh-rlhf:") || single.Strength != 1 {
				t.Errorf("external ids %q, %q; strength %v", single.ExternalID, multi.ExternalID, single.Strength)
			}
		})
	}
}

func TestReadOASSTFixture(t *testing.T) {
	var trees []OASSTTree
	rep, err := ReadOASST(context.Background(), open(t, "oasst_trees.jsonl"), func(tr OASSTTree) error {
		trees = append(trees, tr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Tree t-1: m-2, m-3, m-4 answer the prompt (ranked 0, 2, 1); m-6 and
	// m-7 answer a follow-up (ranked 1, 0). Tree t-2: n-2, and n-3 deleted.
	if rep.Lines != 2 || rep.Items != 6 || rep.Pairs != 4 || !slices.Equal(rep.Skipped, []Skip{{2, "message n-3: deleted (with its replies)"}}) {
		t.Fatalf("report %+v", rep)
	}
	items := map[string]OASSTItem{}
	for _, tr := range trees {
		for _, it := range tr.Items {
			items[it.MessageID] = it
		}
	}
	for id, want := range map[string]struct {
		thumbs   Thumbs
		siblings int
		turns    int
	}{
		"m-2": {ThumbsUp, 3, 1}, "m-3": {ThumbsDown, 3, 1}, "m-4": {NoThumbs, 3, 1},
		"m-6": {ThumbsDown, 2, 3}, "m-7": {NoThumbs, 2, 3}, "n-2": {ThumbsUp, 1, 1},
	} {
		it, ok := items[id]
		if !ok || it.Thumbs != want.thumbs || it.Siblings != want.siblings || len(it.Prompt) != want.turns {
			t.Errorf("item %s: %+v, want thumbs %q, %d siblings, %d turns", id, it, want.thumbs, want.siblings, want.turns)
		}
	}
	if m4 := items["m-4"]; !m4.Synthetic || m4.ModelName != "fixture-7b" || m4.ParentID != "m-1" || m4.TreeID != "t-1" {
		t.Errorf("m-4: %+v", m4)
	}
	if m6 := items["m-6"]; m6.Prompt[1] != (Message{RoleAssistant, "Smokey suits a grey cat."}) || m6.Prompt[2].Content != "Something less common?" {
		t.Errorf("m-6 prompt %+v", m6.Prompt)
	}
	// Ranks 0 > 1 > 2 among three: adjacent ranks give 0.5, best against
	// worst 1; the two-reply group gives 1.
	want := map[string]float64{"oasst:m-2:m-4": 0.5, "oasst:m-2:m-3": 1, "oasst:m-4:m-3": 0.5, "oasst:m-7:m-6": 1}
	got := map[string]float64{}
	for _, p := range trees[0].Pairs {
		got[p.ExternalID] = p.Strength
		if p.ExternalID != p.ChosenExternalID+":"+strings.TrimPrefix(p.RejectedExternalID, "oasst:") {
			t.Errorf("pair %s names %s over %s", p.ExternalID, p.ChosenExternalID, p.RejectedExternalID)
		}
	}
	for id, s := range want {
		if g, ok := got[id]; !ok || math.Abs(g-s) > 1e-12 {
			t.Errorf("pair %s: strength %v (present %v), want %v", id, g, ok, s)
		}
	}
	if len(got) != len(want) || len(trees[1].Pairs) != 0 {
		t.Errorf("pairs %v and %d in tree 2; want %v", got, len(trees[1].Pairs), want)
	}
}

func TestReadTRLPreferenceFixture(t *testing.T) {
	var pairs []Pair
	rep, err := ReadTRLPreference(context.Background(), open(t, "trl_preference.jsonl"), func(p Pair) error {
		pairs = append(pairs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 4 || rep.Pairs != 4 || len(rep.Skipped) != 0 {
		t.Fatalf("report %+v", rep)
	}
	// Conversational, with a system message.
	if p := pairs[0]; p.System != "Answer in one sentence." || !slices.Equal(p.Prompt, []Message{{RoleUser, "Why is the sea salty?"}}) ||
		p.Chosen != "Rivers carry dissolved minerals into it, and evaporation leaves the salt behind." || p.Rejected != "Because fish cry." {
		t.Errorf("line 1: %+v", p)
	}
	// Standard: a plain-string prompt is one user turn.
	if p := pairs[1]; p.System != "" || !slices.Equal(p.Prompt, []Message{{RoleUser, "Name a prime number between 10 and 15."}}) ||
		p.Chosen != "11, or 13." || p.Rejected != "12." || p.Line != 2 {
		t.Errorf("line 2: %+v", p)
	}
	if p := pairs[2]; len(p.Prompt) != 3 || p.Prompt[1] != (Message{RoleAssistant, "Hello! How can I help?"}) || p.Chosen != "56." {
		t.Errorf("line 3: %+v", p)
	}
	// Replies equal but for case pass the reader; the importer judges them.
	if p := pairs[3]; p.Chosen != "Yes." || p.Rejected != "yes." || p.Strength != 1 || p.ExternalID != "" {
		t.Errorf("line 4: %+v", p)
	}
}

func TestReadOpenAIPreferenceFixture(t *testing.T) {
	var pairs []Pair
	rep, err := ReadOpenAIPreference(context.Background(), open(t, "openai_preference.jsonl"), func(p Pair) error {
		pairs = append(pairs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 2 || rep.Pairs != 2 {
		t.Fatalf("report %+v", rep)
	}
	if p := pairs[0]; p.System != "You are a terse assistant." || len(p.Prompt) != 1 || p.Prompt[0].Content != "Boiling point of water at sea level in Celsius?" ||
		p.Chosen != "100 °C." || p.Rejected != "90 °C." {
		t.Errorf("line 1: %+v", p)
	}
	if p := pairs[1]; p.System != "" || p.Chosen != "n-e-c-e-s-s-a-r-y" || p.Rejected != "n-e-c-c-e-s-a-r-y" || p.Line != 2 {
		t.Errorf("line 2: %+v", p)
	}
}

func TestReadPreferenceErrors(t *testing.T) {
	good := `{"prompt":"q","chosen":"a","rejected":"b"}` + "\n"
	malformed, err := os.ReadFile(filepath.Join("testdata", "trl_malformed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		read     func(context.Context, *strings.Reader, func(Pair) error) (Report, error)
		input    string
		line     int
		is       error
		contains string
	}{
		{"another format's line", trl, string(malformed), 2, nil, `"messages"`},
		{"TRL read as OpenAI", openAI, good, 1, nil, `"prompt"`},
		{"cut-off last line", trl, good + `{"prompt":"q","cho`, 2, ErrTruncated, ""},
		{"not JSON", trl, good + "prompt: q\n", 2, ErrInvalidJSON, "column"},
		{"prompt ends with a reply", trl, good + `{"prompt":[{"role":"user","content":"q"}],"chosen":[{"role":"user","content":"a"}],"rejected":"b"}` + "\n", 2, nil, "chosen[0].role"},
		{"invalid UTF-8", trl, good + "{\"prompt\":\"caf\xe9\",\"chosen\":\"a\",\"rejected\":\"b\"}\n", 2, ErrEncoding, ""},
		{"gzip cut short", trl, string(cutShort(gzipped(t, []byte(strings.Repeat(good, 5000))))), 0, ErrGzip, "ends early"},
		{"LFS pointer", openAI, "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n", 0, ErrLFSPointer, "git lfs pull"},
		{"blank", trl, "\n \n", 0, ErrEmpty, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.read(context.Background(), strings.NewReader(tt.input), func(Pair) error { return nil })
			if err == nil {
				t.Fatal("no error")
			}
			var le *LineError
			if tt.line != 0 && (!errors.As(err, &le) || le.Line != tt.line) {
				t.Fatalf("err = %v, want a LineError for line %d", err, tt.line)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want it to wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.contains)
			}
		})
	}
}

func trl(ctx context.Context, r *strings.Reader, fn func(Pair) error) (Report, error) {
	return ReadTRLPreference(ctx, r, fn)
}

func openAI(ctx context.Context, r *strings.Reader, fn func(Pair) error) (Report, error) {
	return ReadOpenAIPreference(ctx, r, fn)
}
