package importfile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/internal/publicdata"
)

// oasstFile is the public OpenAssistant sample (see publicdata).
func oasstFile(t *testing.T) string {
	t.Helper()
	return publicdata.Path(t, "oasst", "en_100_tree.jsonl")
}

func readOASSTFile(t *testing.T) ([]OASSTTree, Report) {
	t.Helper()
	f, err := os.Open(oasstFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var trees []OASSTTree
	rep, err := ReadOASST(context.Background(), f, func(tr OASSTTree) error {
		trees = append(trees, tr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return trees, rep
}

// rawCounts walks the file as untyped JSON, apart from the reader's code:
// all messages, assistant messages, messages that got an assistant reply
// (the prompts of the items), and ranked sibling groups with the pairs they
// expand to.
func rawCounts(t *testing.T) (messages, assistants, answered, groups, pairs int) {
	t.Helper()
	f, err := os.Open(oasstFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var visit func(m map[string]any)
	visit = func(m map[string]any) {
		messages++
		if m["role"] == "assistant" {
			assistants++
		}
		replies, _ := m["replies"].([]any)
		ranked, byAssistant := 0, false
		for _, r := range replies {
			byAssistant = byAssistant || r.(map[string]any)["role"] == "assistant"
			if _, ok := r.(map[string]any)["rank"]; ok {
				ranked++
			}
			visit(r.(map[string]any))
		}
		if byAssistant {
			answered++
		}
		if ranked >= 2 {
			groups++
			pairs += ranked * (ranked - 1) / 2
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var tree map[string]any
		if err := json.Unmarshal(sc.Bytes(), &tree); err != nil {
			t.Fatal(err)
		}
		visit(tree["prompt"].(map[string]any))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return messages, assistants, answered, groups, pairs
}

func TestReadOASSTFileCounts(t *testing.T) {
	trees, rep := readOASSTFile(t)
	messages, assistants, answered, groups, pairs := rawCounts(t)

	// The data's README: 100 trees, 1,167 messages, 212 ranked sibling
	// groups expanding to 754 pairs.
	if messages != 1167 || groups != 212 || pairs != 754 {
		t.Fatalf("raw walk: %d messages, %d groups, %d pairs; the README says 1167, 212, 754", messages, groups, pairs)
	}
	if rep.Lines != 100 || len(trees) != 100 || len(rep.Skipped) != 0 {
		t.Fatalf("%d lines, %d trees, skipped %v; want 100, 100, none", rep.Lines, len(trees), rep.Skipped)
	}
	if rep.Items != assistants {
		t.Fatalf("%d items, want one per assistant message (%d)", rep.Items, assistants)
	}
	if rep.Pairs != 754 {
		t.Fatalf("%d pairs, want 754", rep.Pairs)
	}

	parents := map[string]string{} // external id → parent message id
	seen := map[string]bool{}
	items := 0
	for _, tr := range trees {
		for _, it := range tr.Items {
			items++
			if seen[it.ExternalID] || it.ExternalID != "oasst:"+it.MessageID {
				t.Fatalf("item external id %q repeated or malformed", it.ExternalID)
			}
			seen[it.ExternalID] = true
			parents[it.ExternalID] = it.ParentID
			if len(it.Prompt)%2 != 1 || it.Prompt[0].Role != RoleUser || it.Prompt[len(it.Prompt)-1].Role != RoleUser {
				t.Fatalf("item %s: prompt roles %v", it.MessageID, roles(it.Prompt))
			}
			if it.TreeID != tr.ID || it.Lang != "en" || it.Response == "" {
				t.Fatalf("item %+v", it)
			}
		}
	}
	if items != assistants {
		t.Fatalf("trees hold %d items, want %d", items, assistants)
	}
	prompts := map[string]bool{}
	for _, parent := range parents {
		prompts[parent] = true
	}
	if len(prompts) != answered {
		t.Fatalf("items answer %d distinct prompts, want %d", len(prompts), answered)
	}
	groupParents := map[string]bool{}
	for _, tr := range trees {
		for _, p := range tr.Pairs {
			pc, pr := parents[p.ChosenExternalID], parents[p.RejectedExternalID]
			if pc == "" || pc != pr {
				t.Fatalf("pair %s: replies to different messages", p.ExternalID)
			}
			groupParents[pc] = true
			if p.Strength <= 0 || p.Strength > 1 {
				t.Fatalf("pair %s: strength %v", p.ExternalID, p.Strength)
			}
		}
	}
	if len(groupParents) != 212 {
		t.Fatalf("pairs come from %d sibling groups, want 212", len(groupParents))
	}
}

func roles(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return out
}

// Trees 1 and 2 of the file, checked by hand.
func TestReadOASSTKnownTrees(t *testing.T) {
	trees, _ := readOASSTFile(t)

	// Tree 1: a prompt with three replies ranked 0, 1, 2 and no votes.
	t1 := trees[0]
	if t1.ID != "054e1df3-35e0-4bb8-a585-607dbdcd24e0" || t1.Line != 1 || len(t1.Items) != 3 {
		t.Fatalf("tree 1: %s line %d, %d items", t1.ID, t1.Line, len(t1.Items))
	}
	for _, it := range t1.Items {
		if it.Thumbs != NoThumbs || it.Siblings != 3 || it.ModelName != "chip20b" || !it.Synthetic {
			t.Errorf("tree 1 item %s: %+v", it.MessageID, it)
		}
		if len(it.Prompt) != 1 || it.Prompt[0] != (Message{RoleUser, "How can I find the best 401k plan for my needs?"}) {
			t.Errorf("tree 1 item %s: prompt %+v", it.MessageID, it.Prompt)
		}
	}
	// Ranks 0 > 1 > 2: gaps 1, 2, 1 over a largest gap of 2.
	const (
		research = "The first step is to research your options."
		goals    = "The first step is to determine your financial goals."
		bestWay  = "The best way to find a 401k plan that meets your needs"
		rank0    = "oasst:fa783ef0-4f4e-457d-b429-afd89edf8757"
		rank1    = "oasst:03334b2a-f315-4a0d-b9ff-ac94e017e266"
		rank2    = "oasst:8f5fa95e-0185-4960-a9c3-89382210cd6c"
	)
	wantPairs := []struct {
		chosenID, rejectedID string
		chosen, rejected     string
		strength             float64
	}{
		{rank0, rank1, research, goals, 0.5},
		{rank0, rank2, research, bestWay, 1},
		{rank1, rank2, goals, bestWay, 0.5},
	}
	if len(t1.Pairs) != len(wantPairs) {
		t.Fatalf("tree 1: %d pairs, want 3", len(t1.Pairs))
	}
	for i, want := range wantPairs {
		p := t1.Pairs[i]
		if p.ChosenExternalID != want.chosenID || p.RejectedExternalID != want.rejectedID ||
			p.ExternalID != want.chosenID+":"+strings.TrimPrefix(want.rejectedID, "oasst:") ||
			!strings.HasPrefix(p.Chosen, want.chosen) || !strings.HasPrefix(p.Rejected, want.rejected) ||
			math.Abs(p.Strength-want.strength) > 1e-12 || len(p.Prompt) != 1 || p.Line != 1 {
			t.Errorf("tree 1 pair %d: %+v", i, p)
		}
	}

	// Tree 2: two levels of ranked pairs and mixed votes.
	t2 := trees[1]
	byID := map[string]OASSTItem{}
	for _, it := range t2.Items {
		byID[it.MessageID[:8]] = it
	}
	tests := []struct {
		id       string
		thumbs   Thumbs
		up, down int
		rank     int
		prompt   []string // roles and first words of each turn
	}{
		{"2318748d", NoThumbs, 0, 0, 0, []string{"user: How to protect my eyes"}},
		{"8a325ada", ThumbsUp, 1, 0, 1, []string{"user: How to protect my eyes"}},
		{"24e027d1", NoThumbs, 1, 1, 0, []string{"user: How to protect my eyes", "assistant: Your eyes are not designed", "user: Are blue light blocking glasses"}},
		{"4a7f68b2", ThumbsUp, 2, 0, 1, []string{"user: How to protect my eyes", "assistant: Your eyes are not designed", "user: Are blue light blocking glasses"}},
		{"d4aaa7f1", ThumbsUp, 2, 0, 0, []string{"user: How to protect my eyes", "assistant: You should rest your eyes", "user: Thanks! It was really helpful."}},
		{"0b39aac7", NoThumbs, 0, 0, 1, []string{"user: How to protect my eyes", "assistant: You should rest your eyes", "user: Thanks! It was really helpful."}},
	}
	if len(t2.Items) != len(tests) || len(t2.Pairs) != 3 {
		t.Fatalf("tree 2: %d items, %d pairs; want 6 and 3", len(t2.Items), len(t2.Pairs))
	}
	for _, tt := range tests {
		it, ok := byID[tt.id]
		if !ok {
			t.Fatalf("tree 2: no item %s", tt.id)
		}
		if it.Thumbs != tt.thumbs || it.Up != tt.up || it.Down != tt.down || it.Rank == nil || *it.Rank != tt.rank || it.Siblings != 2 {
			t.Errorf("tree 2 item %s: thumbs %q (%d/%d) rank %v siblings %d", tt.id, it.Thumbs, it.Up, it.Down, it.Rank, it.Siblings)
		}
		if len(it.Prompt) != len(tt.prompt) {
			t.Fatalf("tree 2 item %s: prompt %v", tt.id, roles(it.Prompt))
		}
		for i, want := range tt.prompt {
			role, words, _ := strings.Cut(want, ": ")
			if it.Prompt[i].Role != role || !strings.HasPrefix(it.Prompt[i].Content, words) {
				t.Errorf("tree 2 item %s turn %d: %s %.40q, want %s", tt.id, i, it.Prompt[i].Role, it.Prompt[i].Content, want)
			}
		}
	}
	for _, p := range t2.Pairs {
		if p.Strength != 1 {
			t.Errorf("tree 2 pair %s: strength %v, want 1 (two siblings)", p.ExternalID, p.Strength)
		}
	}
}

func TestReadOASSTSkipsAndTies(t *testing.T) {
	// One prompt with four assistant replies: two tied at rank 0, one at
	// rank 2, one deleted; a prompter follow-up that failed review.
	line := `{"message_tree_id":"t","prompt":{"message_id":"p","text":"Q","role":"prompter","replies":[` +
		`{"message_id":"a","text":"A","role":"assistant","rank":0,"emojis":{"-1":2,"+1":1}},` +
		`{"message_id":"b","text":"B","role":"assistant","rank":0},` +
		`{"message_id":"c","text":"C","role":"assistant","rank":2,"replies":[{"message_id":"f","text":"F","role":"prompter","review_result":false,"replies":[{"message_id":"g","text":"G","role":"assistant"}]}]},` +
		`{"message_id":"d","text":"D","role":"assistant","rank":1,"deleted":true}]}}`
	var tree OASSTTree
	rep, err := ReadOASST(context.Background(), strings.NewReader(line), func(tr OASSTTree) error {
		tree = tr
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []Skip{{1, "message d: deleted (with its replies)"}, {1, "message f: failed review (with its replies)"}}
	if !slices.Equal(rep.Skipped, wantSkipped) {
		t.Fatalf("skipped %v, want %v", rep.Skipped, wantSkipped)
	}
	if len(tree.Items) != 3 || tree.Items[0].Thumbs != ThumbsDown || tree.Items[0].Siblings != 3 {
		t.Fatalf("items %+v", tree.Items)
	}
	// a and b tie (no pair); each beats c by one step of the one possible.
	var got []string
	for _, p := range tree.Pairs {
		got = append(got, p.ExternalID)
		if p.Strength != 1 {
			t.Errorf("pair %s strength %v, want 1", p.ExternalID, p.Strength)
		}
	}
	if want := []string{"oasst:a:c", "oasst:b:c"}; !slices.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
}

func TestReadOASSTErrors(t *testing.T) {
	tests := []struct{ name, input, contains string }{
		{"no prompt", `{"message_tree_id":"t"}`, `"prompt" is missing`},
		{"root not a prompter", `{"prompt":{"message_id":"p","text":"Q","role":"assistant"}}`, `role is "assistant"`},
		{"unknown role", `{"prompt":{"message_id":"p","text":"Q","role":"prompter","replies":[{"message_id":"a","text":"A","role":"bot"}]}}`, `prompt.replies[0]: role "bot"`},
		{"no message id", `{"prompt":{"message_id":"p","text":"Q","role":"prompter","replies":[{"text":"A","role":"assistant"}]}}`, "prompt.replies[0]: message_id is missing"},
		{"rank not a number", `{"prompt":{"message_id":"p","text":"Q","role":"prompter","replies":[{"message_id":"a","text":"A","role":"assistant","rank":"first"}]}}`, `"prompt.replies.rank"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := `{"prompt":{"message_id":"x","text":"fine","role":"prompter"}}` + "\n" + tt.input + "\n"
			_, err := ReadOASST(context.Background(), strings.NewReader(input), func(OASSTTree) error { return nil })
			var le *LineError
			if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("err = %v, want a line 2 error mentioning %s", err, tt.contains)
			}
		})
	}
}
