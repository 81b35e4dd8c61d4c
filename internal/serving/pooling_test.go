package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/curate/curate/internal/outbound"
)

// answering is a server that answers every request with status and body,
// counting the requests.
func answering(t *testing.T, status int, body string) (*VLLM, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &VLLM{HTTP: srv.Client(), BaseURL: srv.URL, Attempts: 3, BaseDelay: time.Millisecond}, &n
}

// The pooling APIs' answers are read as vLLM's documentation shapes them,
// and what is not a score is refused without asking again.
func TestPoolingAnswers(t *testing.T) {
	ctx := context.Background()
	conv := []Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}

	c, _ := answering(t, 200, `{"id":"classify-1","object":"list","created":1,"model":"rm","data":[{"index":0,"label":"LABEL_0","probs":[1.25],"num_classes":1}],"usage":{}}`)
	if got, err := c.Classify(ctx, "rm", conv); err != nil || !slices.Equal(got, []float64{1.25}) {
		t.Errorf("classify: %v %v", got, err)
	}
	c, _ = answering(t, 200, `{"id":"pool-1","object":"list","data":[{"index":0,"object":"pooling","data":[[0.1],[0.2],[-0.5]]}]}`)
	if got, err := c.Pool(ctx, "rm", conv); err != nil || !slices.Equal(got, []float64{-0.5}) {
		t.Errorf("pooling, token-level: %v %v", got, err)
	}
	c, _ = answering(t, 200, `{"data":[{"index":0,"object":"pooling","data":[0.3, 0.7]}]}`)
	if got, err := c.Pool(ctx, "rm", conv); err != nil || !slices.Equal(got, []float64{0.3, 0.7}) {
		t.Errorf("pooling, two labels: %v %v", got, err)
	}

	for _, tc := range []struct {
		name, body string
		pool       bool
	}{
		{"two results", `{"data":[{"probs":[1]},{"probs":[2]}]}`, false},
		{"no value", `{"data":[{"probs":[]}]}`, false},
		{"not JSON", `<html>`, false},
		{"a string", `{"data":[{"probs":"high"}]}`, false},
		{"base64 data", `{"data":[{"data":"AAAAPw=="}]}`, true},
		{"no token", `{"data":[{"data":[]}]}`, true},
	} {
		c, n := answering(t, 200, tc.body)
		var err error
		if tc.pool {
			_, err = c.Pool(ctx, "rm", conv)
		} else {
			_, err = c.Classify(ctx, "rm", conv)
		}
		var answer *AnswerError
		if !errors.As(err, &answer) || n.Load() != 1 {
			t.Errorf("%s: %v after %d requests; want an answer error after one", tc.name, err, n.Load())
		}
	}

	// FastAPI's 404 is a route the server does not have; vLLM's own 404
	// names a model it does not serve.
	c, n := answering(t, 404, `{"detail":"Not Found"}`)
	if _, err := c.Classify(ctx, "rm", conv); !errors.Is(err, ErrNoRoute) || n.Load() != 1 {
		t.Errorf("no /classify: %v after %d requests", err, n.Load())
	}
	c, _ = answering(t, 404, `{"object":"error","message":"The model `+"`rm`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
	var status *outbound.StatusError
	if _, err := c.Classify(ctx, "rm", conv); !errors.As(err, &status) || status.Status != 404 {
		t.Errorf("an unknown model: %v", err)
	}
	// A 503 is asked again, up to the attempts.
	c, n = answering(t, 503, `{"object":"error","message":"overloaded"}`)
	if _, err := c.Classify(ctx, "rm", conv); !errors.As(err, &status) || n.Load() != 3 {
		t.Errorf("a 503: %v after %d requests", err, n.Load())
	}
}

// A pooling server lists the model it was started with under its served
// name, with the path it was started from as its root.
func TestServes(t *testing.T) {
	served := []Served{{ID: "support-rm", Root: "/runs/7f3a/final"}, {ID: "adapter", Root: "/runs/x", Parent: "base"}}
	for _, tc := range []struct {
		model, want string
		ok          bool
	}{
		{"support-rm", "support-rm", true},
		{"/runs/7f3a/final", "support-rm", true},
		{"/runs/x", "", false}, // an adapter is not what a pooling server runs
		{"other", "", false},
	} {
		if got, ok := Serves(served, tc.model); got != tc.want || ok != tc.ok {
			t.Errorf("Serves(%s) = %q %v", tc.model, got, ok)
		}
	}
}
