package vllmtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Pooling is a stand-in for a vLLM server started with the pooling runner
// (vllm serve <model> --runner pooling) serving one reward model: it
// answers GET /v1/models, POST /classify and POST /pooling in the shapes
// of vLLM's pooling-model documentation, for text input ("input": a
// string or a list of them) and chat input ("messages": one
// conversation), and can be scripted to fail.
type Pooling struct {
	*httptest.Server
	// score is the model's output (a logit) for one conversation, or for
	// a text input as a single user message.
	score func(conv []Message) float64

	mu sync.Mutex
	// tokenLevel: a token-level reward model (SetTokenLevel).
	tokenLevel bool
	// delay is the model's time for one request.
	delay time.Duration
	// model is the name the server lists; root the path it was started
	// from.
	model, root string
	requests    []PoolingRequest
	inFlight    int
	peak        int
	script      map[string][]int
}

// Message is one turn of a scored conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// PoolingRequest is one scoring request the stand-in received.
type PoolingRequest struct {
	Path     string
	Model    string
	Messages []Message
	Inputs   []string
	// Activation is use_activation as sent (nil when left out).
	Activation *bool
	Auth       string
}

// NewPooling starts a stand-in serving model, started from root.
func NewPooling(t testing.TB, model, root string, score func(conv []Message) float64) *Pooling {
	p := &Pooling{model: model, root: root, score: score, script: map[string][]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// Script makes the next requests to path answer these statuses in turn
// (200: as vLLM would).
func (p *Pooling) Script(path string, statuses ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script[path] = append(p.script[path], statuses...)
}

// SetTokenLevel makes it a token-level reward model: no /classify route,
// and /pooling answers one row per token, the reward on the last.
func (p *Pooling) SetTokenLevel(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenLevel = on
}

// SetDelay sets the model's time for one request.
func (p *Pooling) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Restart makes the server serve another model, as a server restarted
// with it does.
func (p *Pooling) Restart(model, root string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.model, p.root = model, root
}

// Requests lists the scoring requests received, in order.
func (p *Pooling) Requests() []PoolingRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PoolingRequest(nil), p.requests...)
}

// Peak is the most scoring requests the stand-in was answering at once.
func (p *Pooling) Peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// Reset forgets the requests received.
func (p *Pooling) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests, p.peak = nil, 0
}

func (p *Pooling) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	status := http.StatusOK
	if next := p.script[r.URL.Path]; len(next) > 0 {
		status, p.script[r.URL.Path] = next[0], next[1:]
	}
	model, root, tokenLevel := p.model, p.root, p.tokenLevel
	p.mu.Unlock()
	if status != http.StatusOK {
		errorBody(w, status, "InternalServerError", "scripted failure: CUDA out of memory")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []map[string]any{
			{"id": model, "object": "model", "owned_by": "vllm", "root": root, "parent": nil, "max_model_len": 4096},
		}})
	case r.Method == http.MethodPost && (r.URL.Path == "/pooling" || r.URL.Path == "/classify" && !tokenLevel):
		p.answer(w, r, model, tokenLevel)
	default:
		// FastAPI's answer for a route the server does not have.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"detail":"Not Found"}`))
	}
}

// score answers a classification or pooling request.
func (p *Pooling) answer(w http.ResponseWriter, r *http.Request, model string, tokenLevel bool) {
	var req struct {
		Model         string          `json:"model"`
		Input         json.RawMessage `json:"input"`
		Messages      []Message       `json:"messages"`
		UseActivation *bool           `json:"use_activation"`
		Task          string          `json:"task"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		errorBody(w, http.StatusBadRequest, "BadRequestError", "the request is not JSON")
		return
	}
	var inputs []string
	if len(req.Input) > 0 {
		var one string
		if json.Unmarshal(req.Input, &one) == nil {
			inputs = []string{one}
		} else if json.Unmarshal(req.Input, &inputs) != nil {
			errorBody(w, http.StatusBadRequest, "BadRequestError", "input must be a string or a list of strings")
			return
		}
	}
	if (len(inputs) > 0) == (len(req.Messages) > 0) {
		errorBody(w, http.StatusBadRequest, "BadRequestError", "give input or messages")
		return
	}
	if req.Model != model {
		errorBody(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	if req.Task != "" && req.Task != "classify" && req.Task != "token_classify" {
		errorBody(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("Unsupported task: %q", req.Task))
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, PoolingRequest{Path: r.URL.Path, Model: req.Model, Messages: req.Messages, Inputs: inputs,
		Activation: req.UseActivation, Auth: r.Header.Get("Authorization")})
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	delay := p.delay
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	convs := [][]Message{req.Messages}
	if len(inputs) > 0 {
		convs = convs[:0]
		for _, in := range inputs {
			convs = append(convs, []Message{{Role: "user", Content: in}})
		}
	}
	tokens := 0
	var data []map[string]any
	for i, conv := range convs {
		// The pooler's default activation for one label is the sigmoid;
		// use_activation false leaves the logit.
		x := p.score(conv)
		if req.UseActivation == nil || *req.UseActivation {
			x = 1 / (1 + math.Exp(-x))
		}
		n := 0
		for _, m := range conv {
			n += len(m.Content)/4 + 4
		}
		tokens += n
		if r.URL.Path == "/classify" {
			data = append(data, map[string]any{"index": i, "label": "LABEL_0", "probs": []float64{x}, "num_classes": 1})
			continue
		}
		var out any = []float64{x}
		if tokenLevel {
			rows := make([][]float64, 0, n)
			for range n - 1 {
				rows = append(rows, []float64{0.01})
			}
			out = append(rows, []float64{x})
		}
		data = append(data, map[string]any{"index": i, "object": "pooling", "data": out})
	}
	prefix := "pool-"
	if r.URL.Path == "/classify" {
		prefix = "classify-"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": prefix + "7c87cac407b749a6935d8c7ce2a8fba2", "object": "list", "created": time.Now().Unix(), "model": model, "data": data,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0, "prompt_tokens_details": nil},
	})
}
