package langfuse

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// maxDepth bounds recursion into nested values.
const maxDepth = 8

var (
	queryKeys    = []string{"input", "query", "question", "prompt", "content", "text", "message"}
	responseKeys = []string{"output", "response", "answer", "completion", "content", "text", "result", "generation", "message"}
	userRoles    = []string{"user", "human"}
	replyRoles   = []string{"assistant", "ai", "model"}
)

// QueryText is the user's question in a trace or observation input.
//
// Langfuse stores whatever JSON an application logs as input and output.
// QueryText recognises the shapes common SDKs and integrations write and
// falls back to compact JSON for anything else, so nothing is lost, only left
// unformatted. The first rule that yields text wins:
//  1. a JSON string: its text; when the string itself holds a JSON object or
//     array (SDKs that serialise early), the rules apply to that instead;
//  2. a list of chat messages ([{"role":..., "content":...}]): the content of
//     the last message whose role is user or human;
//  3. an object with "messages" (OpenAI chat request, LangChain) or
//     "contents" (Gemini): rule 2 on that list;
//  4. a single message object ({"role":..., "content":...}): its content;
//  5. an object with one of "input", "query", "question", "prompt",
//     "content", "text", "message": the rules applied to that value;
//  6. a list of strings: the strings joined by newlines;
//  7. anything else: compact JSON, keys in their original order.
//
// Message content may be a string, a list of parts ({"type":"text",
// "text":...} as OpenAI and Anthropic write it; images and other non-text
// parts are left out), an object with "text", or Gemini's {"parts":[...]};
// text parts are joined by newlines. Absent or null JSON gives "".
func QueryText(input json.RawMessage) string { return extract(input, queryFrom) }

// ResponseText is the assistant's answer in a trace or observation output,
// found like QueryText's question by the first rule that yields text:
//  1. a JSON string: as for QueryText;
//  2. an OpenAI completion ({"choices":[...]}): the first choice's message
//     content, or its "text" (legacy completions); Gemini
//     ({"candidates":[...]}): the first candidate's content;
//  3. a single message object ({"role":"assistant","content":...}): its content;
//  4. an object with "messages": rule 6 on that list;
//  5. an object with one of "output", "response", "answer", "completion",
//     "content", "text", "result", "generation", "message": the rules
//     applied to that value;
//  6. a list of chat messages: the content of the last message whose role is
//     assistant, ai or model, else of the last message;
//  7. a list of strings: joined by newlines;
//  8. anything else: compact JSON (a tool-call-only completion, for one).
func ResponseText(output json.RawMessage) string { return extract(output, responseFrom) }

func extract(raw json.RawMessage, from func(any, int) (string, bool)) string {
	raw = present(raw)
	if raw == nil {
		return ""
	}
	v, ok := decodeJSON(raw)
	if !ok {
		return strings.TrimSpace(string(raw))
	}
	if s, ok := from(v, 0); ok {
		return s
	}
	return compactJSON(raw)
}

func queryFrom(v any, depth int) (string, bool) {
	if depth > maxDepth {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return fromString(x, depth, queryFrom)
	case []any:
		if msgs, ok := messageList(x); ok {
			if m := lastWithRole(msgs, userRoles); m != nil {
				return messageText(m, depth)
			}
			return "", false
		}
		return joinStrings(x)
	case map[string]any:
		for _, k := range []string{"messages", "contents"} {
			if list, ok := x[k].([]any); ok {
				return queryFrom(list, depth+1)
			}
		}
		if isMessage(x) {
			return messageText(x, depth)
		}
		return fromKeys(x, queryKeys, depth, queryFrom)
	}
	return "", false
}

func responseFrom(v any, depth int) (string, bool) {
	if depth > maxDepth {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return fromString(x, depth, responseFrom)
	case []any:
		if msgs, ok := messageList(x); ok {
			m := lastWithRole(msgs, replyRoles)
			if m == nil {
				m = msgs[len(msgs)-1]
			}
			return messageText(m, depth)
		}
		return joinStrings(x)
	case map[string]any:
		if first, ok := firstObject(x["choices"]); ok {
			if msg, ok := first["message"].(map[string]any); ok {
				return contentText(msg["content"], depth+1)
			}
			if text, ok := first["text"].(string); ok {
				return text, true
			}
		}
		if first, ok := firstObject(x["candidates"]); ok {
			return contentText(first["content"], depth+1)
		}
		if isMessage(x) {
			return messageText(x, depth)
		}
		if list, ok := x["messages"].([]any); ok {
			return responseFrom(list, depth+1)
		}
		return fromKeys(x, responseKeys, depth, responseFrom)
	}
	return "", false
}

// fromString returns s, or what the rules find in the JSON object or list
// that s holds.
func fromString(s string, depth int, from func(any, int) (string, bool)) (string, bool) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		if inner, ok := decodeJSON([]byte(t)); ok {
			if text, ok := from(inner, depth+1); ok {
				return text, true
			}
		}
	}
	return s, true
}

func fromKeys(m map[string]any, keys []string, depth int, from func(any, int) (string, bool)) (string, bool) {
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if k == "content" {
			if text, ok := contentText(v, depth+1); ok {
				return text, true
			}
		}
		if text, ok := from(v, depth+1); ok && strings.TrimSpace(text) != "" {
			return text, true
		}
	}
	return "", false
}

// messageList reports whether every element is an object with a string
// "role", as chat message lists are.
func messageList(list []any) ([]map[string]any, bool) {
	if len(list) == 0 {
		return nil, false
	}
	msgs := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok || !isMessage(m) {
			return nil, false
		}
		msgs = append(msgs, m)
	}
	return msgs, true
}

func isMessage(m map[string]any) bool {
	_, ok := m["role"].(string)
	return ok
}

func lastWithRole(msgs []map[string]any, roles []string) map[string]any {
	for i := len(msgs) - 1; i >= 0; i-- {
		role, _ := msgs[i]["role"].(string)
		if slices.Contains(roles, strings.ToLower(role)) {
			return msgs[i]
		}
	}
	return nil
}

func messageText(m map[string]any, depth int) (string, bool) {
	if text, ok := contentText(m["content"], depth+1); ok {
		return text, true
	}
	return contentText(m["parts"], depth+1)
}

// contentText reads message content: a string, a list of parts, an object
// with "text", or an object with "parts".
func contentText(v any, depth int) (string, bool) {
	if depth > maxDepth {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case []any:
		var texts []string
		for _, part := range x {
			if text, ok := partText(part); ok {
				texts = append(texts, text)
			}
		}
		return strings.Join(texts, "\n"), len(texts) > 0
	case map[string]any:
		if text, ok := x["text"].(string); ok {
			return text, true
		}
		if parts, ok := x["parts"].([]any); ok {
			return contentText(parts, depth+1)
		}
	}
	return "", false
}

// partText is the text of one content part; parts of other types (images,
// audio, tool calls) have none.
func partText(part any) (string, bool) {
	switch p := part.(type) {
	case string:
		return p, true
	case map[string]any:
		if typ, ok := p["type"].(string); ok && typ != "text" && typ != "input_text" && typ != "output_text" {
			return "", false
		}
		text, ok := p["text"].(string)
		return text, ok
	}
	return "", false
}

func firstObject(v any) (map[string]any, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	m, ok := list[0].(map[string]any)
	return m, ok
}

func joinStrings(list []any) (string, bool) {
	if len(list) == 0 {
		return "", false
	}
	parts := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return "", false
		}
		parts[i] = s
	}
	return strings.Join(parts, "\n"), true
}

func decodeJSON(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}

// Query is the user's question of the trace: QueryText of the trace input,
// or, when that is empty (Langfuse v4 keeps input on observations), of the
// earliest observation that has an input.
func (t Trace) Query() string {
	if q := QueryText(t.Input); strings.TrimSpace(q) != "" {
		return q
	}
	for _, o := range t.byStart() {
		if q := QueryText(o.Input); strings.TrimSpace(q) != "" {
			return q
		}
	}
	return ""
}

// Response is the assistant's answer of the trace: ResponseText of the
// trace output, or, when that is empty, of the latest observation that has
// an output.
func (t Trace) Response() string {
	if r := ResponseText(t.Output); strings.TrimSpace(r) != "" {
		return r
	}
	obs := t.byStart()
	for i := len(obs) - 1; i >= 0; i-- {
		if r := ResponseText(obs[i].Output); strings.TrimSpace(r) != "" {
			return r
		}
	}
	return ""
}

// metadataModelKeys are the trace metadata keys that name the model, as
// applications and LangChain's callbacks write them.
var metadataModelKeys = []string{"model", "model_name", "modelName", "ls_model_name"}

// Model is the model that answered: a string under one of metadataModelKeys
// in the trace metadata, else the model of the latest GENERATION observation
// that names one.
func (t Trace) Model() string {
	if meta, ok := decodeJSON(t.Metadata); ok {
		if m, ok := meta.(map[string]any); ok {
			for _, k := range metadataModelKeys {
				if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
					return s
				}
			}
		}
	}
	obs := t.byStart()
	for i := len(obs) - 1; i >= 0; i-- {
		if obs[i].Type == "GENERATION" && obs[i].Model != "" {
			return obs[i].Model
		}
	}
	return ""
}

// observation finds an observation by id.
func (t Trace) observation(id string) (Observation, bool) {
	for _, o := range t.Observations {
		if o.ID == id {
			return o, true
		}
	}
	return Observation{}, false
}

// byStart lists the observations oldest first.
func (t Trace) byStart() []Observation {
	obs := slices.Clone(t.Observations)
	slices.SortStableFunc(obs, func(a, b Observation) int { return a.StartTime.Compare(b.StartTime) })
	return obs
}
