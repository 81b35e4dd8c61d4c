package tokens

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/curate/curate/internal/publicdata"
)

// readChat reads an OpenAI chat fine-tuning file: {"messages": [...]} per
// line.
func readChat(t *testing.T, path string) [][]Message {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
				Name    string `json:"name"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		var msgs []Message
		for _, m := range line.Messages {
			msgs = append(msgs, Message{Role: m.Role, Content: m.Content, Name: m.Name})
		}
		out = append(out, msgs)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCounts compares each example's counts with the expected ones, and
// the count of a conversation split before its last message and joined.
func checkCounts(t *testing.T, c *Counter, examples [][]Message, wantTotal, wantAssistant []int) {
	t.Helper()
	if len(examples) != len(wantTotal) {
		t.Fatalf("read %d examples, want %d", len(examples), len(wantTotal))
	}
	for i, msgs := range examples {
		if got := c.CountMessages(msgs); got != wantTotal[i] {
			t.Errorf("%s example %d: CountMessages = %d, want %d", c.Encoding(), i, got, wantTotal[i])
		}
		if got := c.CountAssistant(msgs); got != wantAssistant[i] {
			t.Errorf("%s example %d: CountAssistant = %d, want %d", c.Encoding(), i, got, wantAssistant[i])
		}
		if total, asst := c.Conversation(msgs); total != wantTotal[i] || asst != wantAssistant[i] {
			t.Errorf("%s example %d: Conversation = %d, %d, want %d, %d", c.Encoding(), i, total, asst, wantTotal[i], wantAssistant[i])
		}
		last := len(msgs) - 1
		if got := c.CountMessages(msgs[:last]) + c.CountMessages(msgs[last:]) - ReplyPriming; got != wantTotal[i] {
			t.Errorf("%s example %d: split count = %d, want %d", c.Encoding(), i, got, wantTotal[i])
		}
	}
}

// testdata/chat.jsonl was written for these tests: a system prompt, two
// turns, a named German user with typographic quotes, no user message, an
// emoji. The expected counts come from OpenAI's own tiktoken (its
// JavaScript/WASM build) with the cookbook's counting rule, not from this
// package. The fourth line by hand: 3 + system(1) + "Be brief."(3) + 3 +
// assistant(1) + "Hello!"(2) + 3 priming = 16.
func TestChatFixture(t *testing.T) {
	examples := readChat(t, filepath.Join("testdata", "chat.jsonl"))
	for _, tc := range []struct {
		encoding            string
		wantTotal, wantAsst []int
	}{
		{CL100K, []int{46, 62, 53, 16, 31}, []int{14, 27, 21, 2, 9}},
		{O200K, []int{46, 61, 49, 16, 31}, []int{14, 26, 17, 2, 9}},
	} {
		c, err := New(tc.encoding)
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, c, examples, tc.wantTotal, tc.wantAsst)
	}
}

// The OpenAI cookbook's toy chat fine-tuning file (public data): the
// expected numbers are printed by the cookbook's Chat_finetuning_data_prep
// notebook for it (cl100k_base).
func TestCookbookToyFile(t *testing.T) {
	examples := readChat(t, publicdata.Path(t, "openai-cookbook", "toy_chat_fine_tuning.jsonl"))
	c, err := New(CL100K)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, c, examples, []int{45, 111, 26, 28, 8032}, []int{10, 28, 9, 4, 8000})
}

func TestCount(t *testing.T) {
	// Token counts from OpenAI's tokenizer for these strings: "hello world" is
	// two tokens in both encodings; "tiktoken is great!" is six in cl100k_base
	// (the tiktoken README's example) and the special marker is read as text.
	cases := []struct {
		encoding, text string
		want           int
	}{
		{CL100K, "", 0},
		{CL100K, "hello world", 2},
		{O200K, "hello world", 2},
		{CL100K, "tiktoken is great!", 6},
		{CL100K, "<|endoftext|>", 7},
	}
	for _, tc := range cases {
		c, err := New(tc.encoding)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Count(tc.text); got != tc.want {
			t.Errorf("%s Count(%q) = %d, want %d", tc.encoding, tc.text, got, tc.want)
		}
	}
}

func TestCountMessagesName(t *testing.T) {
	c, err := New(CL100K)
	if err != nil {
		t.Fatal(err)
	}
	// One message: 3 framing + "user"(1) + "hi"(1) + name "bob"(1) + 1 for the
	// name + 3 priming = 10.
	got := c.CountMessages([]Message{{Role: "user", Content: "hi", Name: "bob"}})
	if got != 10 {
		t.Errorf("CountMessages with name = %d, want 10", got)
	}
	if got := c.CountMessages(nil); got != 3 {
		t.Errorf("CountMessages(nil) = %d, want 3 (reply priming only)", got)
	}
}

func TestNewUnknownEncoding(t *testing.T) {
	if _, err := New("p50k_base"); err == nil {
		t.Fatal("New(p50k_base) succeeded, want an error")
	}
}

func TestModelInfo(t *testing.T) {
	cases := []struct {
		model string
		want  Model
	}{
		{"gpt-4o-mini-2024-07-18", Model{O200K, 65536}},
		{"gpt-4o-2024-08-06", Model{O200K, 65536}},
		{"gpt-4.1-nano-2025-04-14", Model{O200K, 65536}},
		{"o4-mini-2025-04-16", Model{O200K, 65536}},
		{"ft:gpt-4o-mini-2024-07-18:acme::abc123", Model{O200K, 65536}},
		{"openai/gpt-4o", Model{O200K, 65536}},
		{"gpt-3.5-turbo-0125", Model{CL100K, 16385}},
		{"gpt-3.5-turbo-0613", Model{CL100K, 4096}},
		{"gpt-4-0613", Model{CL100K, 8192}},
		{"anthropic.claude-3-haiku-20240307-v1:0", Model{CL100K, 32000}},
		{"us.anthropic.claude-3-haiku-20240307-v1:0", Model{CL100K, 32000}},
		{"llama-3-8b", Model{CL100K, 0}},
		{"", Model{CL100K, 0}},
	}
	for _, tc := range cases {
		if got := ModelInfo(tc.model); got != tc.want {
			t.Errorf("ModelInfo(%q) = %+v, want %+v", tc.model, got, tc.want)
		}
	}
}

// A Counter is shared by concurrent validations; run with -race.
func TestCountConcurrent(t *testing.T) {
	c, err := New(O200K)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	for range 4 {
		go func() { done <- c.Count("hello world") }()
	}
	for range 4 {
		if got := <-done; got != 2 {
			t.Errorf("concurrent Count = %d, want 2", got)
		}
	}
}
