package langfuse

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// The OpenAI cookbook's toy fine-tuning file holds real {"messages": [...]}
// conversations; its second line is a multi-turn chat whose last user turn
// and last assistant turn are read off the file by hand.
func TestExtractFromCookbookConversation(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "..", "shared", "data", "openai-cookbook", "toy_chat_fine_tuning.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var line []byte
	for i := 0; i < 2 && sc.Scan(); i++ {
		line = sc.Bytes()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
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
