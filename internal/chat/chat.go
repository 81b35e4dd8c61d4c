// Package chat calls an OpenAI-compatible chat-completions endpoint (POST
// {base}/chat/completions): a model under evaluation, a judge, a served
// adapter on vLLM. Calls go through the outbound client; answers that may
// change (429, 5xx, timeouts, network errors) are retried with exponential
// back-off and jitter up to a limit, and each answer carries the tokens it
// used so its cost can be recorded.
package chat

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/curate/curate/internal/outbound"
)

// Client speaks to one endpoint.
type Client struct {
	// HTTP makes the calls: the outbound client's.
	HTTP *http.Client
	// BaseURL ends in the API's version, as OpenAI's does
	// ("https://api.deepseek.com/v1"); /chat/completions is appended.
	BaseURL string
	APIKey  string // "" when the endpoint has none
	// Attempts is the number of tries for an answer that may change, the
	// first included (default 4); BaseDelay the first wait, doubled after
	// each, with 20% jitter (default 1s).
	Attempts  int
	BaseDelay time.Duration
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one completion to ask for.
type Request struct {
	Model       string
	Messages    []Message
	Temperature *float64
	TopP        *float64
	MaxTokens   int
	// JSON asks for a JSON object (response_format json_object).
	JSON bool
}

// Response is the first choice's text and what the call used.
type Response struct {
	Content          string
	PromptTokens     int64
	CompletionTokens int64
	// Latency is the time of the call that answered, retries excluded.
	Latency time.Duration
	// Tries is how many calls it took.
	Tries int
}

// AnswerError is a 200 answer that is not a usable completion. It is not
// retried: the same request would be billed again for the same result.
type AnswerError struct{ Reason string }

func (e *AnswerError) Error() string    { return "chat: " + e.Reason }
func (e *AnswerError) Describe() string { return e.Reason }

// Answers that are not usable completions.
var (
	ErrEmpty     = &AnswerError{"The answer had no text."}
	ErrMalformed = &AnswerError{"The answer was not a chat completion."}
)

// maxAnswer caps what is read of one answer.
const maxAnswer = 8 << 20

type wireRequest struct {
	Model          string    `json:"model"`
	Messages       []Message `json:"messages"`
	Temperature    *float64  `json:"temperature,omitempty"`
	TopP           *float64  `json:"top_p,omitempty"`
	MaxTokens      int       `json:"max_tokens,omitempty"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format,omitempty"`
}

type wireResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// Complete asks for one completion.
func (c *Client) Complete(ctx context.Context, r Request) (Response, error) {
	w := wireRequest{Model: r.Model, Messages: r.Messages, Temperature: r.Temperature, TopP: r.TopP, MaxTokens: r.MaxTokens}
	if r.JSON {
		w.ResponseFormat = &struct {
			Type string `json:"type"`
		}{"json_object"}
	}
	payload, err := json.Marshal(w)
	if err != nil {
		return Response{}, err
	}
	var out Response
	out.Tries, out.Latency, err = c.post(ctx, "/chat/completions", payload, func(resp *http.Response) error { return read(resp, &out) })
	return out, err
}

// post sends payload to path under the base URL, retrying answers that may
// change, and hands each answer to read; it returns the number of calls
// made and the latency of the last.
func (c *Client) post(ctx context.Context, path string, payload []byte, read func(*http.Response) error) (tries int, latency time.Duration, err error) {
	url := strings.TrimSuffix(c.BaseURL, "/") + path
	b := retry.NewExponential(cmp.Or(c.BaseDelay, time.Second))
	b = retry.WithJitterPercent(20, b)
	b = retry.WithMaxRetries(uint64(max(cmp.Or(c.Attempts, 4)-1, 0)), b)
	err = retry.Do(ctx, b, func(ctx context.Context) error {
		tries++
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if c.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.APIKey)
		}
		start := time.Now()
		resp, err := c.HTTP.Do(req)
		if err == nil {
			err = read(resp)
			latency = time.Since(start)
		}
		var answer *AnswerError
		if err != nil && ctx.Err() == nil && !errors.As(err, &answer) && outbound.Transient(err) {
			return retry.RetryableError(err)
		}
		return err
	})
	return tries, latency, err
}

func read(resp *http.Response, out *Response) error {
	if resp.StatusCode != http.StatusOK {
		return outbound.Status(resp)
	}
	defer resp.Body.Close()
	var w wireResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&w); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return ErrMalformed
		}
		return err
	}
	out.PromptTokens, out.CompletionTokens = w.Usage.PromptTokens, w.Usage.CompletionTokens
	if len(w.Choices) == 0 || strings.TrimSpace(w.Choices[0].Message.Content) == "" {
		return ErrEmpty
	}
	out.Content = w.Choices[0].Message.Content
	return nil
}
