package export

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func user(s string) Message      { return Message{Role: RoleUser, Content: s} }
func assistant(s string) Message { return Message{Role: RoleAssistant, Content: s} }

// Golden lines are written by hand from each format's published example:
// OpenAI's fine-tuning guide (chat and DPO), TRL's dataset-formats page,
// the Bedrock fine-tuning notebook in Anthropic's cookbook, the
// "Anthropic Fine-Tuning Format" in this project's seed document, and
// LLaMA-Factory's data README for ShareGPT and Alpaca.
func TestGoldenSFT(t *testing.T) {
	marv := SFTExample{
		System: "Marv is a factual chatbot that is also sarcastic.",
		Messages: []Message{
			user("What's the capital of France?"),
			assistant("Paris, as if everyone doesn't know that already."),
		},
	}
	deploy := SFTExample{Messages: []Message{
		user("How do I check deployment status?"),
		assistant("Navigate to Deployments > Status panel..."),
	}}
	multi := SFTExample{
		System: "system prompt (optional)",
		Messages: []Message{
			user("human instruction in the first round (optional)"),
			assistant("model response in the first round (optional)"),
			user("human instruction (required)"),
			assistant("model response (required)"),
		},
	}
	cases := []struct {
		name   string
		format Format
		ex     SFTExample
		want   string
	}{
		{"openai chat", OpenAIChat, marv,
			`{"messages":[{"role":"system","content":"Marv is a factual chatbot that is also sarcastic."},{"role":"user","content":"What's the capital of France?"},{"role":"assistant","content":"Paris, as if everyone doesn't know that already."}]}`},
		{"openai chat no html escaping", OpenAIChat, SFTExample{Messages: []Message{user("Q&A <b>"), assistant("a > b & c")}},
			`{"messages":[{"role":"user","content":"Q&A <b>"},{"role":"assistant","content":"a > b & c"}]}`},
		{"bedrock with system", BedrockChat, SFTExample{System: "<optional_system_message>", Messages: []Message{user("user message"), assistant("assistant response")}},
			`{"system":"<optional_system_message>","messages":[{"role":"user","content":"user message"},{"role":"assistant","content":"assistant response"}]}`},
		{"bedrock without system", BedrockChat, SFTExample{Messages: []Message{user("user message"), assistant("assistant response")}},
			`{"messages":[{"role":"user","content":"user message"},{"role":"assistant","content":"assistant response"}]}`},
		{"anthropic text", AnthropicText, deploy,
			`{"input":"Human: How do I check deployment status?\n\nAssistant:","output":"Navigate to Deployments > Status panel..."}`},
		{"anthropic text multi-turn with system", AnthropicText, SFTExample{System: "Be brief.", Messages: []Message{user("Hi"), assistant("Hello."), user("Bye"), assistant("Goodbye.")}},
			`{"input":"Be brief.\n\nHuman: Hi\n\nAssistant: Hello.\n\nHuman: Bye\n\nAssistant:","output":"Goodbye."}`},
		{"sharegpt", ShareGPT, SFTExample{Messages: []Message{user("human instruction"), assistant("model response")}},
			`{"conversations":[{"from":"human","value":"human instruction"},{"from":"gpt","value":"model response"}]}`},
		{"sharegpt with system", ShareGPT, SFTExample{System: "system prompt", Messages: []Message{user("human instruction"), assistant("model response")}},
			`{"conversations":[{"from":"system","value":"system prompt"},{"from":"human","value":"human instruction"},{"from":"gpt","value":"model response"}]}`},
		{"alpaca", Alpaca, SFTExample{Messages: []Message{user("human instruction (required)"), assistant("model response (required)")}},
			`{"instruction":"human instruction (required)","input":"","output":"model response (required)"}`},
		{"alpaca with system and history", Alpaca, multi,
			`{"instruction":"human instruction (required)","input":"","output":"model response (required)","system":"system prompt (optional)","history":[["human instruction in the first round (optional)","model response in the first round (optional)"]]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := writeAll(t, tc.format, []SFTExample{tc.ex}, nil)
			if got != tc.want+"\n" {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestGoldenPref(t *testing.T) {
	sf := PrefExample{
		Prompt:   []Message{user("Hello, can you tell me how cold San Francisco is today?")},
		Chosen:   "Today in San Francisco, it is not quite cold as expected. Morning clouds will give away to sunshine, with a high near 68°F (20°C) and a low around 57°F (14°C).",
		Rejected: "It is not particularly cold in San Francisco today.",
	}
	sky := PrefExample{Prompt: []Message{user("What color is the sky?")}, Chosen: "It is blue.", Rejected: "It is green."}
	cases := []struct {
		name   string
		format Format
		ex     PrefExample
		want   string
	}{
		{"openai preference", OpenAIPreference, sf,
			`{"input":{"messages":[{"role":"user","content":"Hello, can you tell me how cold San Francisco is today?"}]},"preferred_output":[{"role":"assistant","content":"Today in San Francisco, it is not quite cold as expected. Morning clouds will give away to sunshine, with a high near 68°F (20°C) and a low around 57°F (14°C)."}],"non_preferred_output":[{"role":"assistant","content":"It is not particularly cold in San Francisco today."}]}`},
		{"trl preference", TRLPreference, sky,
			`{"prompt":[{"role":"user","content":"What color is the sky?"}],"chosen":[{"role":"assistant","content":"It is blue."}],"rejected":[{"role":"assistant","content":"It is green."}]}`},
		{"trl preference with system", TRLPreference, PrefExample{System: "Be terse.", Prompt: sky.Prompt, Chosen: sky.Chosen, Rejected: sky.Rejected},
			`{"prompt":[{"role":"system","content":"Be terse."},{"role":"user","content":"What color is the sky?"}],"chosen":[{"role":"assistant","content":"It is blue."}],"rejected":[{"role":"assistant","content":"It is green."}]}`},
		// SFT formats take the chosen reply.
		{"preference to openai chat", OpenAIChat, sky,
			`{"messages":[{"role":"user","content":"What color is the sky?"},{"role":"assistant","content":"It is blue."}]}`},
		{"preference to anthropic text", AnthropicText, sky,
			`{"input":"Human: What color is the sky?\n\nAssistant:","output":"It is blue."}`},
		{"preference to alpaca", Alpaca, sky,
			`{"instruction":"What color is the sky?","input":"","output":"It is blue."}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := writeAll(t, tc.format, nil, []PrefExample{tc.ex})
			if got != tc.want+"\n" {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func writeAll(t *testing.T, f Format, sft []SFTExample, pref []PrefExample) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(f, &buf, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range sft {
		if err := w.WriteSFT(ex); err != nil {
			t.Fatalf("WriteSFT: %v", err)
		}
	}
	for _, ex := range pref {
		if err := w.WritePref(ex); err != nil {
			t.Fatalf("WritePref: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestWriteRejects(t *testing.T) {
	okSFT := SFTExample{Messages: []Message{user("q"), assistant("a")}}
	cases := []struct {
		name    string
		format  Format
		sft     *SFTExample
		pref    *PrefExample
		wantErr string
	}{
		{"sft into trl", TRLPreference, &okSFT, nil, "not SFT examples"},
		{"sft into openai preference", OpenAIPreference, &okSFT, nil, "not SFT examples"},
		{"no messages", OpenAIChat, &SFTExample{}, nil, "messages: empty"},
		{"last from user", OpenAIChat, &SFTExample{Messages: []Message{user("q")}}, nil, "messages[0].role: the last message must be from the assistant"},
		{"unknown role", ShareGPT, &SFTExample{Messages: []Message{{Role: "tool", Content: "x"}, assistant("a")}}, nil, `messages[0].role: unknown role "tool"`},
		{"system inside bedrock", BedrockChat, &SFTExample{Messages: []Message{{Role: RoleSystem, Content: "s"}, user("q"), assistant("a")}}, nil, "messages[0].role"},
		{"alpaca without user", Alpaca, &SFTExample{Messages: []Message{assistant("a")}}, nil, "alpaca needs a user message"},
		{"alpaca broken history", Alpaca, &SFTExample{Messages: []Message{user("q1"), user("q2"), assistant("a")}}, nil, "messages[0]: alpaca history needs an assistant reply"},
		{"empty prompt", TRLPreference, nil, &PrefExample{Chosen: "a", Rejected: "b"}, "prompt: empty"},
		{"bad prompt role", OpenAIPreference, nil, &PrefExample{Prompt: []Message{{Role: "bot", Content: "x"}}, Chosen: "a", Rejected: "b"}, `prompt[0].role: unknown role "bot"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWriter(tc.format, &bytes.Buffer{}, "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.sft != nil {
				err = w.WriteSFT(*tc.sft)
			} else {
				err = w.WritePref(*tc.pref)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteAfterClose(t *testing.T) {
	for _, f := range Formats() {
		w, err := NewWriter(f, &bytes.Buffer{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePref(PrefExample{Prompt: []Message{user("q")}, Chosen: "a", Rejected: "b"}); err != ErrClosed {
			t.Errorf("%s: write after close = %v, want ErrClosed", f, err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		got, err := ParseFormat(" " + strings.ToUpper(string(f)) + " ")
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("csv"); err == nil || !strings.Contains(err.Error(), "openai_chat") {
		t.Errorf("ParseFormat(csv) error = %v, want one listing the formats", err)
	}
}

// The seed's export_format names (training_datasets.export_format: jsonl,
// parquet, openai, anthropic) stand for the formats of the dataset's kind.
func TestParseFormatForSeedNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		want Format
	}{
		{"jsonl", KindSFT, OpenAIChat},
		{"jsonl", KindPreference, TRLPreference},
		{"openai", KindSFT, OpenAIChat},
		{"OpenAI", KindPreference, OpenAIPreference},
		{"anthropic", KindSFT, AnthropicText},
		{"parquet", KindPreference, Parquet},
		{"bedrock_chat", KindSFT, BedrockChat},
	} {
		got, err := ParseFormatFor(tc.name, tc.kind)
		if err != nil || got != tc.want {
			t.Errorf("ParseFormatFor(%q, %s) = %q, %v; want %s", tc.name, tc.kind, got, err, tc.want)
		}
	}
	if _, err := ParseFormatFor("anthropic", KindPreference); err == nil || !strings.Contains(err.Error(), "trl_preference") {
		t.Errorf("anthropic for pairs: %v; want a refusal listing the pairs' formats", err)
	}
	if _, err := ParseFormatFor("csv", KindSFT); err == nil {
		t.Error("csv was taken")
	}
}

func TestAccepts(t *testing.T) {
	cases := []struct {
		f         Format
		sft, pref bool
	}{
		{OpenAIChat, true, true},
		{BedrockChat, true, true},
		{AnthropicText, true, true},
		{ShareGPT, true, true},
		{Alpaca, true, true},
		{Parquet, true, true},
		{OpenAIPreference, false, true},
		{TRLPreference, false, true},
		{Format("csv"), false, false},
	}
	for _, tc := range cases {
		if got := tc.f.Accepts(KindSFT); got != tc.sft {
			t.Errorf("%s.Accepts(sft) = %v", tc.f, got)
		}
		if got := tc.f.Accepts(KindPreference); got != tc.pref {
			t.Errorf("%s.Accepts(preference) = %v", tc.f, got)
		}
	}
}

// A dataset of pairs is offered the formats that keep the rejected reply,
// one of single examples those that hold an example; the lists follow the
// format table of DESIGN.md §5.
func TestFormatsFor(t *testing.T) {
	for k, want := range map[Kind][]Format{
		KindPreference: {OpenAIPreference, TRLPreference, Parquet},
		KindSFT:        {OpenAIChat, BedrockChat, AnthropicText, ShareGPT, Alpaca, Parquet},
	} {
		if got := FormatsFor(k); !slices.Equal(got, want) {
			t.Errorf("FormatsFor(%s) = %v, want %v", k, got, want)
		}
	}
}

// sampleExamples mixes systems, multi-turn prompts, non-ASCII text and
// characters that HTML escaping would change.
func sampleExamples() ([]SFTExample, []PrefExample) {
	sft := []SFTExample{
		{System: "Be kind.", Messages: []Message{user("I fell off my bike."), assistant("It’s great you’re outdoors!")}},
		{Messages: []Message{user("2 < 3 & 4 > 1?"), assistant("Yes."), user("日本語で？"), assistant("はい。")}},
	}
	pref := []PrefExample{
		{System: "You are terse.", Prompt: []Message{user("What color is the sky?")}, Chosen: "Blue.", Rejected: "Green."},
		{Prompt: []Message{user("Hi"), assistant("Hello!"), user("Tell me a joke <3")}, Chosen: "Why did the chicken…", Rejected: ""},
		{Prompt: []Message{user("line\nbreak\ttab \"quote\"")}, Chosen: "ok\n", Rejected: " "},
	}
	return sft, pref
}

func TestByteIdenticalRerun(t *testing.T) {
	sft, pref := sampleExamples()
	for _, f := range Formats() {
		var runs [2][]byte
		for i := range runs {
			var buf bytes.Buffer
			w, err := NewWriter(f, &buf, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pref {
				if err := w.WritePref(p); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
			if f.Accepts(KindSFT) && f != Parquet {
				for _, ex := range sft {
					if err := w.WriteSFT(ex); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			runs[i] = buf.Bytes()
		}
		if len(runs[0]) == 0 || !bytes.Equal(runs[0], runs[1]) {
			t.Errorf("%s: two runs gave different bytes (%d and %d)", f, len(runs[0]), len(runs[1]))
		}
		if f != Parquet && (!bytes.HasSuffix(runs[0], []byte("}\n")) || bytes.Contains(runs[0], []byte("\r"))) {
			t.Errorf("%s: lines must end in a bare \\n", f)
		}
	}
}
