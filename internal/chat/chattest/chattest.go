// Package chattest is a stand-in for an OpenAI-compatible chat-completions
// server, for tests: it speaks the published request and answer shapes of
// POST /v1/chat/completions (and, when a test sets Embed, of POST
// /v1/embeddings) and answers what a test scripts, including the failures
// a real endpoint has (429, 500, hangs, malformed bodies).
package chattest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
)

// Request is what the server was asked.
type Request struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Temperature    *float64 `json:"temperature"`
	TopP           *float64 `json:"top_p"`
	MaxTokens      int      `json:"max_tokens"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Authorization string `json:"-"`
}

// Last is the last message's text (the user's prompt).
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// Reply is one scripted answer. The zero Reply is a 200 with empty text.
type Reply struct {
	// Status other than 0 or 200 answers an OpenAI-style error body.
	Status int
	// Content is the assistant message's text.
	Content string
	// Raw, when set, is sent as the whole body instead of a completion.
	Raw string
	// Usage; when both are 0 they are counted as words of the prompt and
	// of the content.
	PromptTokens, CompletionTokens int64
	// Hang holds the request until the client gives up.
	Hang bool
}

// Server is a running stand-in.
type Server struct {
	*httptest.Server
	// Script answers each request; set it before the first call.
	Script func(Request) Reply
	// Embed, when set, answers POST /v1/embeddings with a vector for each
	// input text; it is asked once per request with all of them.
	Embed func(model string, input []string) [][]float64

	calls atomic.Int64
	mu    sync.Mutex
	seen  []Request
}

// New starts a stand-in answering with script. The base URL to give a
// client is s.URL + "/v1".
func New(script func(Request) Reply) *Server {
	s := &Server{Script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Calls is the number of chat-completion requests received.
func (s *Server) Calls() int { return int(s.calls.Load()) }

// Requests returns the requests received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.seen...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings" && s.Embed != nil {
		s.embed(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	s.calls.Add(1)
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	rep := s.Script(req)
	switch {
	case rep.Hang:
		<-r.Context().Done()
		return
	case rep.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(rep.Raw))
		return
	case rep.Status != 0 && rep.Status != http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": http.StatusText(rep.Status), "type": "server_error"}})
		return
	}
	if rep.PromptTokens == 0 && rep.CompletionTokens == 0 {
		for _, m := range req.Messages {
			rep.PromptTokens += int64(len(strings.Fields(m.Content)))
		}
		rep.CompletionTokens = int64(len(strings.Fields(rep.Content)))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": rep.Content}}},
		"usage": map[string]any{"prompt_tokens": rep.PromptTokens, "completion_tokens": rep.CompletionTokens,
			"total_tokens": rep.PromptTokens + rep.CompletionTokens},
	})
}

// embed answers an embeddings request in OpenAI's shape, counting a token
// a word of input.
func (s *Server) embed(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	vecs := s.Embed(req.Model, req.Input)
	data := make([]map[string]any, len(vecs))
	tokens := 0
	for i, v := range vecs {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
	}
	for _, in := range req.Input {
		tokens += len(strings.Fields(in))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
}
