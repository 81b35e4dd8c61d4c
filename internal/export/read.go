package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// LineError reports the first line of an input file that could not be read.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadPref reads a JSON Lines file of preference pairs in OpenAIPreference or
// TRLPreference format and calls fn for each, with its 1-based line number.
// Blank lines are skipped. Reading stops at the first bad line with a
// *LineError naming the line and the reason, or at the first error fn
// returns (passed through unchanged).
//
// TRL lines may be conversational (lists of messages) or TRL's standard
// form with plain strings, where a string prompt is one user message.
// OpenAI lines may carry "tools" only when empty, since tool definitions
// cannot be kept. A leading system message becomes PrefExample.System.
func ReadPref(ctx context.Context, f Format, r io.Reader, fn func(lineNo int, ex PrefExample) error) error {
	if _, err := prefParser(f); err != nil {
		return err
	}
	return readLines(ctx, r, func(n int, line []byte) error {
		ex, err := ParsePref(f, line)
		if err != nil {
			return &LineError{Line: n, Err: err}
		}
		return fn(n, ex)
	})
}

// ParsePref parses one line of a preference file, as ReadPref does, for
// readers that split the lines themselves (package importfile).
func ParsePref(f Format, line []byte) (PrefExample, error) {
	parse, err := prefParser(f)
	if err != nil {
		return PrefExample{}, err
	}
	return parse(line)
}

func prefParser(f Format) (func([]byte) (PrefExample, error), error) {
	switch f {
	case OpenAIPreference:
		return parseOpenAIPref, nil
	case TRLPreference:
		return parseTRLPref, nil
	}
	return nil, fmt.Errorf("export: cannot read preference pairs from %s", f)
}

// ReadSFT reads a JSON Lines file of SFT examples in OpenAIChat or
// BedrockChat format, with the same conventions as ReadPref. Messages keep
// their roles as written (package validate judges them); only the shape is
// checked here: known keys, string role and content.
func ReadSFT(ctx context.Context, f Format, r io.Reader, fn func(lineNo int, ex SFTExample) error) error {
	var parse func([]byte) (SFTExample, error)
	switch f {
	case OpenAIChat:
		parse = parseOpenAIChat
	case BedrockChat:
		parse = parseBedrock
	default:
		return fmt.Errorf("export: cannot read SFT examples from %s", f)
	}
	return readLines(ctx, r, func(n int, line []byte) error {
		ex, err := parse(line)
		if err != nil {
			return &LineError{Line: n, Err: err}
		}
		return fn(n, ex)
	})
}

// readLines calls fn for each non-blank line. Lines may be of any length.
func readLines(ctx context.Context, r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			if ferr := fn(n, trimmed); ferr != nil {
				return ferr
			}
		}
		if err != nil { // io.EOF after the last line
			return nil
		}
	}
}

// decodeStrict decodes one JSON object, refusing unknown keys and anything
// after the object.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("invalid JSON: more than one value on the line")
	}
	return nil
}

// messageIn is a message as read, with pointers to tell a missing key from
// an empty value.
type messageIn struct {
	Role    *string `json:"role"`
	Content *string `json:"content"`
}

func convertMessages(field string, in []messageIn) ([]Message, error) {
	out := make([]Message, 0, len(in))
	for i, m := range in {
		if m.Role == nil {
			return nil, fmt.Errorf("%s[%d].role: missing", field, i)
		}
		if m.Content == nil {
			return nil, fmt.Errorf("%s[%d].content: missing", field, i)
		}
		out = append(out, Message{Role: *m.Role, Content: *m.Content})
	}
	return out, nil
}

// splitSystem moves a leading system message into the system prompt.
func splitSystem(msgs []Message) (string, []Message) {
	if len(msgs) > 0 && msgs[0].Role == RoleSystem {
		return msgs[0].Content, msgs[1:]
	}
	return "", msgs
}

// singleReply returns the content of a list that must hold exactly one
// assistant message.
func singleReply(field string, in []messageIn) (string, error) {
	if in == nil {
		return "", fmt.Errorf("%s: missing", field)
	}
	msgs, err := convertMessages(field, in)
	if err != nil {
		return "", err
	}
	if len(msgs) != 1 {
		return "", fmt.Errorf("%s: want exactly one assistant message, got %d", field, len(msgs))
	}
	if msgs[0].Role != RoleAssistant {
		return "", fmt.Errorf("%s[0].role: want %q, got %q", field, RoleAssistant, msgs[0].Role)
	}
	return msgs[0].Content, nil
}

func parseOpenAIPref(line []byte) (PrefExample, error) {
	var in struct {
		Input *struct {
			Messages          []messageIn     `json:"messages"`
			Tools             json.RawMessage `json:"tools"`
			ParallelToolCalls *bool           `json:"parallel_tool_calls"`
		} `json:"input"`
		PreferredOutput    []messageIn `json:"preferred_output"`
		NonPreferredOutput []messageIn `json:"non_preferred_output"`
	}
	if err := decodeStrict(line, &in); err != nil {
		return PrefExample{}, err
	}
	if in.Input == nil {
		return PrefExample{}, fmt.Errorf("input: missing")
	}
	if t := bytes.TrimSpace(in.Input.Tools); len(t) > 0 && !bytes.Equal(t, []byte("[]")) && !bytes.Equal(t, []byte("null")) {
		return PrefExample{}, fmt.Errorf("input.tools: tool definitions are not supported")
	}
	if in.Input.Messages == nil {
		return PrefExample{}, fmt.Errorf("input.messages: missing")
	}
	prompt, err := convertMessages("input.messages", in.Input.Messages)
	if err != nil {
		return PrefExample{}, err
	}
	chosen, err := singleReply("preferred_output", in.PreferredOutput)
	if err != nil {
		return PrefExample{}, err
	}
	rejected, err := singleReply("non_preferred_output", in.NonPreferredOutput)
	if err != nil {
		return PrefExample{}, err
	}
	system, prompt := splitSystem(prompt)
	return PrefExample{System: system, Prompt: prompt, Chosen: chosen, Rejected: rejected}, nil
}

func parseTRLPref(line []byte) (PrefExample, error) {
	var in struct {
		Prompt   json.RawMessage `json:"prompt"`
		Chosen   json.RawMessage `json:"chosen"`
		Rejected json.RawMessage `json:"rejected"`
	}
	if err := decodeStrict(line, &in); err != nil {
		return PrefExample{}, err
	}
	var ex PrefExample
	prompt, promptText, err := trlField("prompt", in.Prompt)
	if err != nil {
		return PrefExample{}, err
	}
	if prompt == nil {
		prompt = []messageIn{{Role: ptr(RoleUser), Content: &promptText}}
	}
	msgs, err := convertMessages("prompt", prompt)
	if err != nil {
		return PrefExample{}, err
	}
	ex.System, ex.Prompt = splitSystem(msgs)
	for _, reply := range []struct {
		field string
		raw   json.RawMessage
		dst   *string
	}{{"chosen", in.Chosen, &ex.Chosen}, {"rejected", in.Rejected, &ex.Rejected}} {
		list, text, err := trlField(reply.field, reply.raw)
		if err != nil {
			return PrefExample{}, err
		}
		if list == nil {
			*reply.dst = text
			continue
		}
		if *reply.dst, err = singleReply(reply.field, list); err != nil {
			return PrefExample{}, err
		}
	}
	return ex, nil
}

// trlField decodes a TRL column that holds either a list of messages
// (conversational) or a plain string (standard).
func trlField(field string, raw json.RawMessage) ([]messageIn, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, "", fmt.Errorf("%s: missing", field)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "", fmt.Errorf("%s: %w", field, err)
		}
		return nil, s, nil
	}
	var list []messageIn
	if err := decodeStrict(raw, &list); err != nil {
		return nil, "", fmt.Errorf("%s: want a string or a list of messages: %w", field, err)
	}
	if list == nil {
		list = []messageIn{}
	}
	return list, "", nil
}

func parseOpenAIChat(line []byte) (SFTExample, error) {
	var in struct {
		Messages []messageIn `json:"messages"`
	}
	if err := decodeStrict(line, &in); err != nil {
		return SFTExample{}, err
	}
	if in.Messages == nil {
		return SFTExample{}, fmt.Errorf("messages: missing")
	}
	msgs, err := convertMessages("messages", in.Messages)
	if err != nil {
		return SFTExample{}, err
	}
	system, msgs := splitSystem(msgs)
	return SFTExample{System: system, Messages: msgs}, nil
}

func parseBedrock(line []byte) (SFTExample, error) {
	var in struct {
		System   *string     `json:"system"`
		Messages []messageIn `json:"messages"`
	}
	if err := decodeStrict(line, &in); err != nil {
		return SFTExample{}, err
	}
	if in.Messages == nil {
		return SFTExample{}, fmt.Errorf("messages: missing")
	}
	msgs, err := convertMessages("messages", in.Messages)
	if err != nil {
		return SFTExample{}, err
	}
	ex := SFTExample{Messages: msgs}
	if in.System != nil {
		ex.System = *in.System
	}
	return ex, nil
}

func ptr[T any](v T) *T { return &v }
