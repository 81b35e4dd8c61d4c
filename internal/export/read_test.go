package export

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTripPref(t *testing.T) {
	_, pref := sampleExamples()
	for _, f := range []Format{TRLPreference, OpenAIPreference} {
		t.Run(string(f), func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(f, &buf, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pref {
				if err := w.WritePref(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []PrefExample
			var lines []int
			err = ReadPref(context.Background(), f, &buf, func(n int, p PrefExample) error {
				got = append(got, p)
				lines = append(lines, n)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, pref) {
				t.Errorf("round trip changed the examples:\ngot  %+v\nwant %+v", got, pref)
			}
			if !reflect.DeepEqual(lines, []int{1, 2, 3}) {
				t.Errorf("line numbers = %v, want [1 2 3]", lines)
			}
		})
	}
}

func TestReadPublishedExamples(t *testing.T) {
	// OpenAI's DPO example, as published, with its empty tool list.
	openai := `{"input": {"messages": [{"role": "user", "content": "Hello, can you tell me how cold San Francisco is today?"}], "tools": [], "parallel_tool_calls": true}, "preferred_output": [{"role": "assistant", "content": "Today in San Francisco, it is not quite cold as expected."}], "non_preferred_output": [{"role": "assistant", "content": "It is not particularly cold in San Francisco today."}]}`
	// The seed document's DPO example: TRL's standard (plain string) form.
	trlStandard := `{"prompt": "How do I check deployment status?", "chosen": "Navigate to Deployments > Status panel...", "rejected": "Click on the deployments tab."}`
	cases := []struct {
		name string
		f    Format
		line string
		want PrefExample
	}{
		{"openai", OpenAIPreference, openai, PrefExample{
			Prompt:   []Message{user("Hello, can you tell me how cold San Francisco is today?")},
			Chosen:   "Today in San Francisco, it is not quite cold as expected.",
			Rejected: "It is not particularly cold in San Francisco today.",
		}},
		{"trl standard", TRLPreference, trlStandard, PrefExample{
			Prompt:   []Message{user("How do I check deployment status?")},
			Chosen:   "Navigate to Deployments > Status panel...",
			Rejected: "Click on the deployments tab.",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []PrefExample
			err := ReadPref(context.Background(), tc.f, strings.NewReader(tc.line), func(_ int, p PrefExample) error {
				got = append(got, p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadPrefErrors(t *testing.T) {
	good := `{"prompt":[{"role":"user","content":"q"}],"chosen":[{"role":"assistant","content":"a"}],"rejected":[{"role":"assistant","content":"b"}]}`
	goodOpenAI := `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]}`
	cases := []struct {
		name     string
		f        Format
		input    string
		wantLine int
		wantMsg  string
	}{
		{"not json", TRLPreference, good + "\n{oops\n", 2, "invalid JSON"},
		{"unknown key", TRLPreference, `{"prompt":"q","chosen":"a","rejected":"b","score":1}`, 1, `unknown field "score"`},
		{"missing rejected", TRLPreference, `{"prompt":"q","chosen":"a"}`, 1, "rejected: missing"},
		{"two chosen", TRLPreference, good + "\n\n" + `{"prompt":"q","chosen":[{"role":"assistant","content":"a"},{"role":"assistant","content":"c"}],"rejected":"b"}`, 3, "chosen: want exactly one assistant message, got 2"},
		{"chosen from user", TRLPreference, `{"prompt":"q","chosen":[{"role":"user","content":"a"}],"rejected":"b"}`, 1, `chosen[0].role: want "assistant", got "user"`},
		{"message without content", TRLPreference, `{"prompt":[{"role":"user"}],"chosen":"a","rejected":"b"}`, 1, "prompt[0].content: missing"},
		{"extra key in message", TRLPreference, `{"prompt":[{"role":"user","content":"q","name":"x"}],"chosen":"a","rejected":"b"}`, 1, `unknown field "name"`},
		{"number content", OpenAIPreference, `{"input":{"messages":[{"role":"user","content":5}]},"preferred_output":[],"non_preferred_output":[]}`, 1, "input.messages.content: want string, got number"},
		{"missing input", OpenAIPreference, goodOpenAI + "\n" + `{"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]}`, 2, "input: missing"},
		{"empty preferred", OpenAIPreference, `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[],"non_preferred_output":[{"role":"assistant","content":"b"}]}`, 1, "preferred_output: want exactly one assistant message, got 0"},
		{"tools", OpenAIPreference, `{"input":{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function"}]},"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]}`, 1, "input.tools"},
		{"two objects", OpenAIPreference, goodOpenAI + " {}", 1, "more than one value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := ReadPref(context.Background(), tc.f, strings.NewReader(tc.input), func(int, PrefExample) error {
				calls++
				return nil
			})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.Line != tc.wantLine || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error = %q (line %d), want line %d mentioning %q", err, le.Line, tc.wantLine, tc.wantMsg)
			}
			// fn sees only the good lines before the bad one.
			if calls >= tc.wantLine {
				t.Errorf("fn called %d times, but line %d was bad", calls, tc.wantLine)
			}
		})
	}
}

func TestReadStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	in := strings.Repeat(`{"prompt":"q","chosen":"a","rejected":"b"}`+"\n", 5)
	calls := 0
	err := ReadPref(context.Background(), TRLPreference, strings.NewReader(in), func(int, PrefExample) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("err = %v after %d calls, want the callback's error after 2", err, calls)
	}
}

func TestReadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ReadPref(ctx, TRLPreference, strings.NewReader(`{"prompt":"q","chosen":"a","rejected":"b"}`), func(int, PrefExample) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestReadSFT(t *testing.T) {
	in := `{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}` + "\n" +
		`{"messages": [{"role": "user", "content": "q2"}, {"role": "tool", "content": "t"}]}` + "\n"
	var got []SFTExample
	err := ReadSFT(context.Background(), OpenAIChat, strings.NewReader(in), func(_ int, ex SFTExample) error {
		got = append(got, ex)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []SFTExample{
		{System: "S", Messages: []Message{user("q"), assistant("a")}},
		// Roles are kept as written; judging them is validation's job.
		{Messages: []Message{user("q2"), {Role: "tool", Content: "t"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}

	bad := `{"system":"s","messages":[{"role":"user","content":"q"}],"extra":1}`
	err = ReadSFT(context.Background(), BedrockChat, strings.NewReader(bad), func(int, SFTExample) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `line 1: invalid JSON: json: unknown field "extra"`) {
		t.Errorf("bedrock extra key: err = %v", err)
	}
}
