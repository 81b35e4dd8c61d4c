package langfuse

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/curate/curate/internal/publicdata"
)

func TestQueryText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"absent", ``, ""},
		{"null", `null`, ""},
		{"plain string", `"What is 2+2?"`, "What is 2+2?"},
		{"chat list picks the last user turn",
			`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Capital of France?"}]`,
			"Capital of France?"},
		{"role names ignore case", `[{"role":"Human","content":"hey"}]`, "hey"},
		{"OpenAI request with text and image parts",
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"text","text":"this image"}]}]}`,
			"Describe\nthis image"},
		{"LangChain chain input", `{"input":"How do I reset my password?","chat_history":[]}`, "How do I reset my password?"},
		{"question key", `{"question":"Why is the sky blue?","k":4}`, "Why is the sky blue?"},
		{"content key", `{"content":"plain"}`, "plain"},
		{"nested input holding messages", `{"input":{"messages":[{"role":"user","content":"nested"}]}}`, "nested"},
		{"JSON serialised into a string", `"{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"}]}"`, "Hi there"},
		{"string holding JSON with no known shape stays as is", `"{\"a\": 1}"`, `{"a": 1}`},
		{"Gemini contents", `{"contents":[{"role":"user","parts":[{"text":"Hola"}]}]}`, "Hola"},
		{"list of strings", `["first","second"]`, "first\nsecond"},
		{"no user message falls back to JSON", `[{"role":"system","content":"x"}]`, `[{"role":"system","content":"x"}]`},
		{"unknown object is compact JSON in its own key order", "{ \"zeta\" : 1,\n \"alpha\": [1, 2] }", `{"zeta":1,"alpha":[1,2]}`},
		{"markup and accents survive", `{"input":"<b>é & ü</b>"}`, "<b>é & ü</b>"},
		{"number", `42`, "42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QueryText(json.RawMessage(tc.in)); got != tc.want {
				t.Errorf("QueryText(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestResponseText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"absent", ``, ""},
		{"plain string", `"Hello"`, "Hello"},
		{"OpenAI chat completion",
			`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}]}`,
			"Paris."},
		{"OpenAI legacy completion", `{"choices":[{"text":" Paris.","index":0}]}`, " Paris."},
		{"tool-call-only completion falls back to JSON",
			`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}}]}`,
			`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}}]}`},
		{"assistant message", `{"role":"assistant","content":"Sure."}`, "Sure."},
		{"Anthropic message with text blocks",
			`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Part one."},{"type":"text","text":"Part two."}]}`,
			"Part one.\nPart two."},
		{"LangChain message without role", `{"content":"lc answer","additional_kwargs":{}}`, "lc answer"},
		{"output key", `{"output":"done"}`, "done"},
		{"answer key beside sources", `{"answer":"42","sources":["a"]}`, "42"},
		{"message list picks the last assistant turn",
			`[{"role":"user","content":"Q"},{"role":"assistant","content":"A1"},{"role":"tool","content":"t"}]`,
			"A1"},
		{"message list without assistant takes the last", `[{"role":"tool","content":"t"}]`, "t"},
		{"messages key", `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"final"}]}`, "final"},
		{"Gemini candidates", `{"candidates":[{"content":{"role":"model","parts":[{"text":"Gem"}]}}]}`, "Gem"},
		{"completion serialised into a string", `"{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"inner\"}}]}"`, "inner"},
		{"unknown object is compact JSON", `{"score": 0.9, "label": "ok"}`, `{"score":0.9,"label":"ok"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResponseText(json.RawMessage(tc.in)); got != tc.want {
				t.Errorf("ResponseText(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// lines reads a JSON Lines file.
func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, slices.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// testdata/conversations.jsonl was written for this test: logged chat
// requests as {"messages": [...]}, one with a system prompt, one with two
// turns (the last of each role counts), one with content parts (the image
// is left out, text parts are joined by newlines).
func TestExtractFromConversations(t *testing.T) {
	want := []struct{ query, response string }{
		{"How do I share my calendar?", "Open Settings, choose Sharing and add your colleague's e-mail address."},
		{"The big one on the third floor.", "Done: the Atrium is yours on Friday from 10:00 to 11:00."},
		{"What is on this screenshot?", "Your week view,\nwith two meetings on Tuesday."},
	}
	got := lines(t, filepath.Join("testdata", "conversations.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, line := range got {
		if q := QueryText(line); q != want[i].query {
			t.Errorf("line %d: QueryText = %q, want %q", i+1, q, want[i].query)
		}
		if r := ResponseText(line); r != want[i].response {
			t.Errorf("line %d: ResponseText = %q, want %q", i+1, r, want[i].response)
		}
	}
}

// The OpenAI cookbook's toy fine-tuning file (public data) holds real
// {"messages": [...]} conversations; its second line is a multi-turn chat
// whose last user turn and last assistant turn are read off the file by
// hand.
func TestExtractFromCookbookConversation(t *testing.T) {
	line := lines(t, publicdata.Path(t, "openai-cookbook", "toy_chat_fine_tuning.jsonl"))[1]
	if got, want := QueryText(line), "I don't even know how to play golf."; got != want {
		t.Errorf("QueryText = %q, want %q", got, want)
	}
	if got, want := ResponseText(line), "It's easy to learn!"; got != want {
		t.Errorf("ResponseText = %q, want %q", got, want)
	}
}

// Langfuse v4 keeps input and output on observations; a trace without its
// own falls back to them.
func TestTraceFallsBackToObservations(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := Trace{
		ID: "tr-1",
		Observations: []Observation{
			{ID: "late", Type: "GENERATION", Model: "m-late", StartTime: base.Add(2 * time.Second),
				Input: json.RawMessage(`{"messages":[{"role":"user","content":"later question"}]}`), Output: json.RawMessage(`"last answer"`)},
			{ID: "span", Type: "SPAN", Model: "not-a-generation", StartTime: base.Add(3 * time.Second)},
			{ID: "early", Type: "GENERATION", Model: "m-early", StartTime: base.Add(1 * time.Second),
				Input: json.RawMessage(`"earliest question"`), Output: json.RawMessage(`"first answer"`)},
		},
	}
	if got := tr.Query(); got != "earliest question" {
		t.Errorf("Query = %q, want the earliest observation's input", got)
	}
	if got := tr.Response(); got != "last answer" {
		t.Errorf("Response = %q, want the latest observation's output", got)
	}
	if got := tr.Model(); got != "m-late" {
		t.Errorf("Model = %q, want the latest generation's model m-late", got)
	}
	tr.Metadata = json.RawMessage(`{"model_name":"meta-model"}`)
	if got := tr.Model(); got != "meta-model" {
		t.Errorf("Model with metadata = %q, want meta-model", got)
	}
}
