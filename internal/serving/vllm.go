package serving

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/curate/curate/internal/outbound"
)

// VLLM speaks to a vLLM OpenAI-compatible server started with
// --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: it loads and
// unloads LoRA adapters at runtime and lists what it serves. It speaks to
// a server started with the pooling runner too (pooling.go).
type VLLM struct {
	// HTTP makes the calls: the outbound client's, under the operator's
	// address policy.
	HTTP    *http.Client
	BaseURL string // without the trailing /v1
	APIKey  string // "" when the server has none
	// Attempts is the number of tries for an answer that may change (a
	// 5xx, 429, a timeout or a network error), the first included
	// (default 4); BaseDelay the first wait, doubled after each (default
	// 2s).
	Attempts  int
	BaseDelay time.Duration
}

// Served is one model a vLLM server lists: a base model, or an adapter
// with the base model it is loaded on (Parent).
type Served struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Root   string `json:"root"`
}

// ErrAlreadyLoaded is vLLM's 400 for an adapter name it already serves.
var ErrAlreadyLoaded = errors.New("vllm: adapter already loaded")

// maxAnswer caps what is read of an answer: /v1/models lists a few hundred
// entries at most.
const maxAnswer = 4 << 20

// Models lists what the server serves (GET /v1/models).
func (v *VLLM) Models(ctx context.Context) ([]Served, error) {
	var out struct {
		Data []Served `json:"data"`
	}
	err := v.call(ctx, http.MethodGet, "/v1/models", nil, func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return outbound.Status(resp)
		}
		return json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out)
	})
	return out.Data, err
}

// Load asks the server to load the adapter at path under name (POST
// /v1/load_lora_adapter). A name it already serves is ErrAlreadyLoaded.
func (v *VLLM) Load(ctx context.Context, name, path string) error {
	body := map[string]string{"lora_name": name, "lora_path": path}
	return v.call(ctx, http.MethodPost, "/v1/load_lora_adapter", body, func(resp *http.Response) error {
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode == http.StatusBadRequest:
			st := outbound.Status(resp)
			if strings.Contains(strings.ToLower(st.Body), "already") {
				return ErrAlreadyLoaded
			}
			return st
		}
		return outbound.Status(resp)
	})
}

// Unload asks the server to drop the adapter name (POST
// /v1/unload_lora_adapter). A name the server does not know is already
// gone: not an error.
func (v *VLLM) Unload(ctx context.Context, name string) error {
	return v.call(ctx, http.MethodPost, "/v1/unload_lora_adapter", map[string]string{"lora_name": name}, func(resp *http.Response) error {
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
			return nil
		}
		return outbound.Status(resp)
	})
}

// call sends one request, retrying with exponential backoff while the
// answer may change, and hands the response to read.
func (v *VLLM) call(ctx context.Context, method, path string, body any, read func(*http.Response) error) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	b := retry.NewExponential(cmp.Or(v.BaseDelay, 2*time.Second))
	b = retry.WithJitterPercent(10, b)
	b = retry.WithMaxRetries(uint64(max(cmp.Or(v.Attempts, 4)-1, 0)), b)
	return retry.Do(ctx, b, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, method, v.BaseURL+path, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if v.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+v.APIKey)
		}
		resp, err := v.HTTP.Do(req)
		if err != nil {
			if ctx.Err() != nil || !mayChange(err) {
				return err
			}
			return retry.RetryableError(err)
		}
		defer resp.Body.Close()
		err = read(resp)
		if err != nil && mayChange(err) {
			return retry.RetryableError(err)
		}
		return err
	})
}

// mayChange tells an answer worth asking again for from one that will stay
// the same; an adapter already loaded stays loaded, and a missing API or
// an answer that is not a score stays so.
func mayChange(err error) bool {
	var answer *AnswerError
	return !errors.Is(err, ErrAlreadyLoaded) && !errors.Is(err, ErrNoRoute) && !errors.As(err, &answer) && outbound.Transient(err)
}

// Lists reports whether the server lists name, loaded on parent when
// parent is given.
func Lists(served []Served, name, parent string) (bool, error) {
	for _, s := range served {
		if s.ID != name {
			continue
		}
		if parent != "" && s.Parent != "" && s.Parent != parent {
			return false, fmt.Errorf("the server lists %s on %s, not on %s", name, s.Parent, parent)
		}
		return true, nil
	}
	return false, nil
}

// Serves finds the model a server started with it lists: by its served
// name, or by the path or hub id it was started from (vLLM lists that as
// the root of a model served under another name). It answers the name to
// send as "model".
func Serves(served []Served, model string) (string, bool) {
	for _, s := range served {
		if s.ID == model && s.Parent == "" {
			return s.ID, true
		}
	}
	for _, s := range served {
		if s.Root == model && s.Parent == "" {
			return s.ID, true
		}
	}
	return "", false
}
