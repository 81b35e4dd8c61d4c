// Package vllmtest is a stand-in for a vLLM OpenAI-compatible server
// started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: it
// answers GET /v1/models, POST /v1/load_lora_adapter and POST
// /v1/unload_lora_adapter as vLLM does, and POST /v1/chat/completions for
// the base model and every loaded adapter (with Answer's text), and can be
// scripted to fail. Pooling stands in for a server running a reward model
// with the pooling runner.
package vllmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
)

// Server is the stand-in. Its zero value is not usable: call New.
type Server struct {
	*httptest.Server
	Base string // the base model every adapter loads onto

	mu      sync.Mutex
	loaded  map[string]string // adapter name → path
	loads   int               // load requests that loaded something
	unloads int
	script  map[string][]int // path → statuses to answer next; 0 hangs until the caller gives up
	// AfterLoad, when set, runs after an adapter is loaded and before the
	// answer is written: a test kills the caller there.
	AfterLoad func(name string)
	hide      int // answers of /v1/models that leave the adapters out
	// Answer, when set, writes the reply of model (the base or a loaded
	// adapter's name) to the conversation's last message; else the reply
	// echoes it.
	Answer func(model, prompt string) string
}

// HideAdapters makes the next n answers of /v1/models list the base model
// only, as a server does in the moment between loading an adapter and
// listing it.
func (s *Server) HideAdapters(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hide = n
}

// New starts a stand-in serving base.
func New(t testing.TB, base string) *Server {
	s := &Server{Base: base, loaded: map[string]string{}, script: map[string][]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Script makes the next requests to path answer these statuses in turn
// (200: as vLLM would; 0: no answer until the caller gives up).
func (s *Server) Script(path string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script[path] = append(s.script[path], statuses...)
}

// Loads is how many adapters were loaded.
func (s *Server) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// Unloads is how many adapters were unloaded.
func (s *Server) Unloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unloads
}

// Restart empties the server, as vLLM restarted without its runtime
// adapters is: it lists the base model alone.
func (s *Server) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = map[string]string{}
}

// Drop forgets one adapter, as if it were unloaded behind Curate's back.
func (s *Server) Drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.loaded, name)
}

// Loaded lists the adapters served now, by name.
func (s *Server) Loaded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.loaded {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func errorBody(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "type": kind, "param": nil, "code": status})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status := http.StatusOK
	if next := s.script[r.URL.Path]; len(next) > 0 {
		status = next[0]
		s.script[r.URL.Path] = next[1:]
	}
	s.mu.Unlock()
	switch status {
	case http.StatusOK: // answered as vLLM would
	case 0:
		<-r.Context().Done()
		return
	default:
		errorBody(w, status, "InternalServerError", "scripted failure: CUDA out of memory at /opt/vllm/worker.py:1234")
		return
	}

	if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
		s.chat(w, r)
		return
	}
	var body struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
			errorBody(w, http.StatusBadRequest, "BadRequestError", "lora_name is required")
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		s.mu.Lock()
		data := []map[string]any{{"id": s.Base, "object": "model", "owned_by": "vllm", "root": s.Base, "parent": nil}}
		listed := s.loaded
		if s.hide > 0 {
			s.hide--
			listed = nil
		}
		for _, n := range sortedKeys(listed) {
			data = append(data, map[string]any{"id": n, "object": "model", "owned_by": "vllm", "root": s.loaded[n], "parent": s.Base})
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/load_lora_adapter":
		s.mu.Lock()
		if _, ok := s.loaded[body.Name]; ok {
			s.mu.Unlock()
			errorBody(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("The lora adapter '%s' has already been loaded.", body.Name))
			return
		}
		s.loaded[body.Name] = body.Path
		s.loads++
		after := s.AfterLoad
		s.mu.Unlock()
		if after != nil {
			after(body.Name)
		}
		_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", body.Name)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/unload_lora_adapter":
		s.mu.Lock()
		if _, ok := s.loaded[body.Name]; !ok {
			s.mu.Unlock()
			errorBody(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", body.Name))
			return
		}
		delete(s.loaded, body.Name)
		s.unloads++
		s.mu.Unlock()
		_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", body.Name)
	default:
		errorBody(w, http.StatusNotFound, "NotFoundError", "no such route")
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// chat answers a chat completion as vLLM's OpenAI-compatible server does,
// refusing a model it does not serve with vLLM's 404.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		errorBody(w, http.StatusBadRequest, "BadRequestError", "messages are required")
		return
	}
	s.mu.Lock()
	_, loaded := s.loaded[req.Model]
	answer := s.Answer
	s.mu.Unlock()
	if !loaded && req.Model != s.Base {
		errorBody(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	text := "You asked: " + prompt
	if answer != nil {
		text = answer(req.Model, prompt)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-vllm", "object": "chat.completion", "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}},
		"usage":   map[string]any{"prompt_tokens": len(prompt) / 4, "completion_tokens": len(text) / 4, "total_tokens": (len(prompt) + len(text)) / 4},
	})
}
