// Package endpoints holds the OpenAI-compatible chat endpoints an admin
// registers: a judge (DeepSeek, an OpenAI model, a local server) or a model
// to evaluate. Each has a base URL, a model, an API key stored sealed and
// never shown again, its prices per million tokens, and the generation
// settings used when Curate asks it for answers. Every call goes through
// the outbound client.
package endpoints

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyed"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/secrets"
)

// Limits on input.
const (
	MaxURL    = 2000
	MaxModel  = 200
	MaxAPIKey = 4000
	// MaxPrice bounds a price per million tokens: well past any real one,
	// so a slipped digit is caught.
	MaxPrice = 10000
)

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
	// Secrets seals API keys; nil refuses endpoints with a key.
	Secrets *secrets.Box
	// Outbound checks addresses against the operator's policy and makes
	// every call.
	Outbound *outbound.Client
	// Attempts and RetryDelay shape retries of calls (chat.Client's
	// defaults when zero).
	Attempts   int
	RetryDelay time.Duration
}

// New builds the endpoints' service: secrets seals their API keys (nil
// refuses endpoints with a key) and out makes every call to them.
func New(pool *pgxpool.Pool, secrets *secrets.Box, out *outbound.Client) *Service {
	return &Service{Pool: pool, Secrets: secrets, Outbound: out}
}

// Endpoint is an endpoint as the API shows it: never its key.
type Endpoint struct {
	ID                    uuid.UUID `json:"id"`
	Name                  string    `json:"name"`
	BaseURL               string    `json:"base_url"`
	Model                 string    `json:"model"`
	HasAPIKey             bool      `json:"has_api_key"`
	PricePerMillionInput  float64   `json:"price_per_million_input"`
	PricePerMillionOutput float64   `json:"price_per_million_output"`
	Temperature           float64   `json:"temperature"`
	MaxTokens             int       `json:"max_tokens"`
	Concurrency           int       `json:"concurrency"`
	CreatedAt             time.Time `json:"created_at"`
}

func endpointOf(e db.Endpoint) Endpoint {
	return Endpoint{ID: e.ID, Name: e.Name, BaseURL: e.BaseUrl, Model: e.Model, HasAPIKey: e.ApiKeyCiphertext != nil,
		PricePerMillionInput: e.PricePerMillionInput, PricePerMillionOutput: e.PricePerMillionOutput,
		Temperature: e.Temperature, MaxTokens: int(e.MaxTokens), Concurrency: int(e.Concurrency), CreatedAt: e.CreatedAt}
}

// Cost is what a call that used these tokens cost.
func (e Endpoint) Cost(prompt, completion int64) pricing.Micros {
	return pricing.Cost(prompt, e.PricePerMillionInput) + pricing.Cost(completion, e.PricePerMillionOutput)
}

// NewEndpoint is what an admin sends to register an endpoint. Generation
// settings left out take their defaults (temperature 0, 1024 tokens, 4 at
// a time).
type NewEndpoint struct {
	Name                  string   `json:"name"`
	BaseURL               string   `json:"base_url"`
	Model                 string   `json:"model"`
	APIKey                string   `json:"api_key"`
	PricePerMillionInput  float64  `json:"price_per_million_input"`
	PricePerMillionOutput float64  `json:"price_per_million_output"`
	Temperature           *float64 `json:"temperature"`
	MaxTokens             *int     `json:"max_tokens"`
	Concurrency           *int     `json:"concurrency"`
}

// kind is how endpoints keep their keys and are audited.
var kind = keyed.Kind{Name: "endpoint", Table: "endpoints", Noun: "an endpoint"}

func (s *Service) keys() keyed.Store {
	return keyed.Store{Kind: kind, Pool: s.Pool, Secrets: s.Secrets}
}

// Create registers an endpoint.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewEndpoint) (Endpoint, error) {
	v := &errs.Invalid{}
	if v.Text("name", in.Name, 64, true) && !namePattern.MatchString(in.Name) {
		v.Add("name", "must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	in.BaseURL = strings.TrimRight(strings.TrimSpace(in.BaseURL), "/")
	if v.Text("base_url", in.BaseURL, MaxURL, true) {
		if err := s.Outbound.CheckURL(ctx, in.BaseURL); err != nil {
			v.Add("base_url", "%s", outbound.Describe(err))
		}
	}
	v.Text("model", in.Model, MaxModel, true)
	v.Text("api_key", in.APIKey, MaxAPIKey, false)
	s.keys().CheckKey(v, in.APIKey)
	price := func(field string, p float64) {
		if !(p >= 0 && p <= MaxPrice) { // NaN fails
			v.Add(field, "must be a price in US dollars per million tokens, from 0 to %d", MaxPrice)
		}
	}
	price("price_per_million_input", in.PricePerMillionInput)
	price("price_per_million_output", in.PricePerMillionOutput)
	p := db.EndpointInsertParams{OrgID: orgID, Name: in.Name, BaseUrl: in.BaseURL, Model: in.Model,
		PricePerMillionInput: in.PricePerMillionInput, PricePerMillionOutput: in.PricePerMillionOutput,
		MaxTokens: 1024, Concurrency: 4, CreatedByLabel: actor.Label}
	if t := in.Temperature; t != nil {
		if !(*t >= 0 && *t <= 2) || math.IsNaN(*t) {
			v.Add("temperature", "must be from 0 to 2")
		}
		p.Temperature = *t
	}
	if m := in.MaxTokens; m != nil {
		if *m < 1 || *m > 32768 {
			v.Add("max_tokens", "must be from 1 to 32768")
		}
		p.MaxTokens = int32(*m)
	}
	if c := in.Concurrency; c != nil {
		if *c < 1 || *c > 64 {
			v.Add("concurrency", "must be from 1 to 64")
		}
		p.Concurrency = int32(*c)
	}
	if err := v.Err(); err != nil {
		return Endpoint{}, err
	}
	details := map[string]any{"name": in.Name, "base_url": in.BaseURL, "model": in.Model}
	out, err := keyed.Create(ctx, s.keys(), actor, orgID, in.Name, in.APIKey, details,
		func(ctx context.Context, q *db.Queries, key keyed.Sealed) (db.Endpoint, uuid.UUID, error) {
			p.ApiKeyCiphertext, p.ApiKeyNonce = key.Ciphertext, key.Nonce
			e, err := q.EndpointInsert(ctx, p)
			return e, e.ID, err
		})
	if err != nil {
		return Endpoint{}, err
	}
	return endpointOf(out), nil
}

// List returns the organisation's endpoints by name.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Endpoint, error) {
	rows, err := db.New(s.Pool).EndpointList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, len(rows))
	for i, r := range rows {
		out[i] = endpointOf(r)
	}
	return out, nil
}

// ErrUnknown is a name no endpoint of the organisation has.
var ErrUnknown = errors.New("no endpoint has this name")

// Client returns the endpoint named name with a client that calls it.
func (s *Service) Client(ctx context.Context, orgID uuid.UUID, name string) (Endpoint, *chat.Client, error) {
	e, err := db.New(s.Pool).EndpointGetByName(ctx, db.EndpointGetByNameParams{OrgID: orgID, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, nil, ErrUnknown
	}
	if err != nil {
		return Endpoint{}, nil, err
	}
	key, err := s.keys().Open(orgID, keyed.Sealed{Ciphertext: e.ApiKeyCiphertext, Nonce: e.ApiKeyNonce})
	if err != nil {
		return Endpoint{}, nil, err
	}
	return endpointOf(e), s.ChatClient(e.BaseUrl, key), nil
}

// ChatClient is a client for any OpenAI-compatible base URL, under the
// outbound policy and this service's retry settings.
func (s *Service) ChatClient(baseURL, apiKey string) *chat.Client {
	return &chat.Client{HTTP: s.Outbound.HTTP(), BaseURL: baseURL, APIKey: apiKey, Attempts: s.Attempts, BaseDelay: s.RetryDelay}
}
