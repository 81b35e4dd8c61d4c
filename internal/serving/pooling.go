package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/curate/curate/internal/outbound"
)

// A vLLM server started with the pooling runner serves a reward model
// through two APIs, as vLLM's pooling-model documentation gives them:
//
//   - POST /classify, for sequence classifiers (what Curate's REWARD stage
//     trains, and reward models such as Skywork's): {"model", "messages",
//     "use_activation"} answered {"data": [{"index", "label", "probs",
//     "num_classes"}], ...};
//   - POST /pooling, for every pooling model, token-level reward models
//     included: the same request answered {"data": [{"index", "object":
//     "pooling", "data": [...]}], ...}, data holding one value per label,
//     or one row per token for a token-level model.
//
// A chat request ("messages") is one conversation, which vLLM formats with
// the model's chat template, so that the model reads the answer as it was
// trained to; several answers are scored by several requests at once,
// which the server's scheduler runs together.

// Message is one turn of a conversation a reward model scores.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ErrNoRoute is a server without the asked API: vLLM registers a pooling
// API only for the tasks its model supports, and answers FastAPI's 404
// for the others.
var ErrNoRoute = errors.New("vllm: the server has no such API for its model")

// AnswerError is an answer that is not the reward model's output.
type AnswerError struct{ Reason string }

func (e *AnswerError) Error() string { return "vllm: " + e.Reason }

// Describe words it for a page.
func (e *AnswerError) Describe() string {
	return "The reward model's answer was not a score: " + e.Reason + "."
}

// poolingRequest is a chat request to /classify or /pooling.
// use_activation false asks for the model's own output (its logits), the
// same whatever activation the model's configuration names.
type poolingRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	UseActivation bool      `json:"use_activation"`
}

// Classify scores one conversation with POST /classify and returns the
// model's output, one value per label.
func (v *VLLM) Classify(ctx context.Context, model string, conv []Message) ([]float64, error) {
	var out []float64
	err := v.call(ctx, http.MethodPost, "/classify", poolingRequest{Model: model, Messages: conv}, func(resp *http.Response) error {
		if err := poolingStatus(resp); err != nil {
			return err
		}
		var body struct {
			Data []struct {
				Probs []float64 `json:"probs"`
			} `json:"data"`
		}
		if err := decodeAnswer(resp, &body); err != nil {
			return err
		}
		if len(body.Data) != 1 {
			return &AnswerError{Reason: fmt.Sprintf("%d results for one conversation", len(body.Data))}
		}
		out = body.Data[0].Probs
		return finite(out)
	})
	return out, err
}

// Pool scores one conversation with POST /pooling and returns the model's
// output: one value per label, or the last token's values for a
// token-level reward model (the reward of the whole answer).
func (v *VLLM) Pool(ctx context.Context, model string, conv []Message) ([]float64, error) {
	var out []float64
	err := v.call(ctx, http.MethodPost, "/pooling", poolingRequest{Model: model, Messages: conv}, func(resp *http.Response) error {
		if err := poolingStatus(resp); err != nil {
			return err
		}
		var body struct {
			Data []struct {
				Data json.RawMessage `json:"data"`
			} `json:"data"`
		}
		if err := decodeAnswer(resp, &body); err != nil {
			return err
		}
		if len(body.Data) != 1 {
			return &AnswerError{Reason: fmt.Sprintf("%d results for one conversation", len(body.Data))}
		}
		raw := body.Data[0].Data
		var flat []float64
		if json.Unmarshal(raw, &flat) == nil {
			out = flat
			return finite(out)
		}
		var rows [][]float64
		if json.Unmarshal(raw, &rows) != nil {
			return &AnswerError{Reason: "its data is neither a list of numbers nor one list per token"}
		}
		if len(rows) == 0 {
			return &AnswerError{Reason: "it holds no token"}
		}
		out = rows[len(rows)-1]
		return finite(out)
	})
	return out, err
}

// poolingStatus reads a pooling API's failure: FastAPI's bare 404 is a
// route the server does not have; any other is the outbound client's
// status error.
func poolingStatus(resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	st := outbound.Status(resp)
	if resp.StatusCode == http.StatusNotFound {
		var body struct {
			Detail  *string `json:"detail"`
			Message *string `json:"message"`
		}
		if json.Unmarshal([]byte(st.Body), &body) == nil && body.Detail != nil && body.Message == nil {
			return ErrNoRoute
		}
	}
	return st
}

func decodeAnswer(resp *http.Response, v any) error {
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(v); err != nil {
		return &AnswerError{Reason: "it is not the JSON of vLLM's pooling API"}
	}
	return nil
}

func finite(values []float64) error {
	if len(values) == 0 {
		return &AnswerError{Reason: "it holds no value"}
	}
	for _, x := range values {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return &AnswerError{Reason: "it holds a value that is not a finite number"}
		}
	}
	return nil
}
