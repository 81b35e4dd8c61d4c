// Package openai runs Curate's fine-tuning jobs at OpenAI through the
// official Go SDK.
//
// Curate's job id travels with everything it creates there: in the upload
// file names ("curate-<id>-train.jsonl"), in the job's metadata
// (curate_job_id) and in the Idempotency-Key of every create, so a worker
// that crashed between a call and storing its answer finds and adopts what
// it already made.
package openai

import (
	"errors"
	"net/http"
	"os"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/curate/curate/internal/provider"
)

// Name is the provider's name in Curate.
const Name = "openai"

// metadataKey is the job metadata key that carries Curate's job id.
const metadataKey = "curate_job_id"

// maxFileBytes is the largest file the Files API takes in one request.
const maxFileBytes = 512 << 20

// Config holds the settings. Zero fields fall back to the SDK's own
// environment variables (OPENAI_API_KEY, OPENAI_BASE_URL) and defaults.
type Config struct {
	APIKey         string        // overrides OPENAI_API_KEY
	BaseURL        string        // overrides OPENAI_BASE_URL, e.g. "https://api.openai.com/v1/"
	MaxRetries     int           // retries after a 408, 409, 429, 5xx or lost connection; 0 keeps the SDK's default (2), negative means none
	RequestTimeout time.Duration // per attempt; 0 means none
	HTTPClient     *http.Client  // nil uses the SDK's
}

// Provider talks to OpenAI's files and fine-tuning APIs.
type Provider struct {
	client sdk.Client
}

var _ provider.Provider = (*Provider)(nil)

// New builds the provider. It fails when no API key is configured, rather
// than letting the first paid call fail.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" && os.Getenv("OPENAI_API_KEY") == "" {
		return nil, errors.New("openai: no API key: set OPENAI_API_KEY or configure one")
	}
	var opts []option.RequestOption
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	switch {
	case cfg.MaxRetries > 0:
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	case cfg.MaxRetries < 0:
		opts = append(opts, option.WithMaxRetries(0))
	}
	if cfg.RequestTimeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.RequestTimeout))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: sdk.NewClient(opts...)}, nil
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// fail turns an SDK error into a *provider.Error that carries OpenAI's
// own message, which the SDK's error text leaves out.
func fail(op string, err error) error {
	if err == nil {
		return nil
	}
	pe := &provider.Error{Provider: Name, Op: op, Err: err}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		pe.StatusCode = apiErr.StatusCode
		pe.Code = apiErr.Code
		if pe.Code == "" {
			pe.Code = apiErr.Type
		}
		pe.Message = apiErr.Message
		if apiErr.Param != "" {
			pe.Message += " (param " + apiErr.Param + ")"
		}
		pe.Permanent = provider.PermanentStatus(apiErr.StatusCode)
	}
	return pe
}

// idempotencyKey names one create for Curate's job, so that repeating it
// returns what the first one made.
func idempotencyKey(curateJobID, what string) option.RequestOption {
	return option.WithHeader("Idempotency-Key", "curate-"+curateJobID+"-"+what)
}

// AutoEpochs is how many epochs OpenAI runs when a job leaves n_epochs
// "auto", for a training file of n examples. It follows the OpenAI
// cookbook's "Data preparation and analysis for chat model fine-tuning": 3
// epochs, raised so that at least 100 examples are seen (at most 25
// epochs), lowered so that at most 25,000 are (at least 1).
func AutoEpochs(n int) int {
	const target, minExamples, maxExamples, minEpochs, maxEpochs = 3, 100, 25000, 1, 25
	switch {
	case n <= 0:
		return target
	case n*target < minExamples:
		return min(maxEpochs, minExamples/n)
	case n*target > maxExamples:
		return max(minEpochs, maxExamples/n)
	}
	return target
}
