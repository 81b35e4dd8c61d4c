package openaitest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ChatFunc answers a chat completion: the model asked and the last
// message's text give the assistant's answer.
type ChatFunc func(model, prompt string) string

// SetChat makes the server answer POST /v1/chat/completions with f, for
// the base models and for the models its succeeded jobs made; another
// fine-tuned model id is answered 404, as OpenAI answers one it does not
// have. Without f every chat completion is answered 404.
func (s *Server) SetChat(f ChatFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chat = f
}

// ChatCalls counts the chat completions answered for a model.
func (s *Server) ChatCalls(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chatCalls[model]
}

// chatCompletion answers in the shape of OpenAI's chat completions, with
// usage counted in words.
func (s *Server) chatCompletion(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "The request needs a model and messages.", "messages", "")
		return
	}
	s.mu.Lock()
	answer := s.chat
	known := !strings.HasPrefix(req.Model, "ft:")
	for _, j := range s.jobs {
		if j.fineTunedModel == req.Model && j.status == "succeeded" {
			known = true
		}
	}
	if answer != nil && known {
		if s.chatCalls == nil {
			s.chatCalls = map[string]int{}
		}
		s.chatCalls[req.Model]++
	}
	s.mu.Unlock()
	if answer == nil || !known {
		writeError(w, http.StatusNotFound, "The model `"+req.Model+"` does not exist or you do not have access to it.", "model", "model_not_found")
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	text := answer(req.Model, prompt)
	var promptTokens int
	for _, m := range req.Messages {
		promptTokens += len(strings.Fields(m.Content))
	}
	completion := len(strings.Fields(text))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": s.stampNow(), "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}},
		"usage":   map[string]any{"prompt_tokens": promptTokens, "completion_tokens": completion, "total_tokens": promptTokens + completion},
	})
}

func (s *Server) stampNow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stamp()
}
