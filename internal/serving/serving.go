// Package serving holds the places model versions are served from: a vLLM
// server that loads LoRA adapters at runtime, a vLLM server running a
// reward model with its pooling runner, a provider that hosts its own
// fine-tuned models (nothing to load), or a team's own deployment pipeline
// reached by a signed webhook. Admins configure them per organisation; an
// API key, when a target has one, is stored sealed and never shown again.
package serving

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyed"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/webhook"
)

// Kinds of serving target.
const (
	KindVLLM    = "vllm"
	KindOpenAI  = "openai"
	KindWebhook = "webhook"
	// KindVLLMPooling is a vLLM server started with the pooling runner
	// (vllm serve <model> --runner pooling): it serves the one reward model
	// it was started with, through its classification and pooling APIs.
	KindVLLMPooling = "vllm_pooling"
)

// Kinds lists the kinds of serving target.
var Kinds = []string{KindVLLM, KindOpenAI, KindWebhook, KindVLLMPooling}

// Limits on input.
const (
	MaxURL    = 2000
	MaxAPIKey = 4000
	// DefaultUnloadGrace is how long an old adapter stays loaded after an
	// alias moves away from it: requests already routed to it finish.
	DefaultUnloadGrace = 5 * time.Minute
)

var name = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
	// Secrets seals targets' API keys; nil refuses targets with a key.
	Secrets *secrets.Box
	// Outbound checks targets' addresses against the operator's policy
	// and makes every call to them.
	Outbound *outbound.Client
	// Attempts and RetryDelay shape the retries of calls to targets
	// (defaults: 4 tries, 2 s doubling); tests shorten them.
	Attempts   int
	RetryDelay time.Duration
	// ProviderKey and ProviderBaseURL are the server's own OpenAI
	// credentials (OPENAI_API_KEY, OPENAI_BASE_URL), which its fine-tuning
	// jobs use: a provider target with no address of its own calls the
	// models they made there, with its own key or else with this one.
	ProviderKey, ProviderBaseURL string
}

// New builds the serving targets' service: secrets seals their API keys
// (nil refuses targets with a key), out makes every call to them, and
// providerKey and providerBaseURL are the server's own OpenAI credentials.
func New(pool *pgxpool.Pool, secrets *secrets.Box, out *outbound.Client, providerKey, providerBaseURL string) *Service {
	return &Service{Pool: pool, Secrets: secrets, Outbound: out, ProviderKey: providerKey, ProviderBaseURL: providerBaseURL}
}

// Target is a serving target as the API shows it: never its key.
type Target struct {
	ID          uuid.UUID `json:"id"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	BaseURL     string    `json:"base_url"`
	HasAPIKey   bool      `json:"has_api_key"`
	UnloadGrace int32     `json:"unload_grace_seconds"`
	CreatedAt   time.Time `json:"created_at"`
}

func targetOf(t db.ServingTarget) Target {
	return Target{ID: t.ID, Name: t.Name, Kind: t.Kind, BaseURL: t.BaseUrl, HasAPIKey: t.ApiKeyCiphertext != nil,
		UnloadGrace: t.UnloadGraceS, CreatedAt: t.CreatedAt}
}

// NewTarget is what an admin sends to add a target.
type NewTarget struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	BaseURL     string `json:"base_url"`
	APIKey      string `json:"api_key"`
	UnloadGrace *int   `json:"unload_grace_seconds"`
}

// kind is how serving targets keep their keys and are audited.
var kind = keyed.Kind{Name: "serving_target", Table: "serving_targets", Noun: "a serving target"}

func (s *Service) keys() keyed.Store {
	return keyed.Store{Kind: kind, Pool: s.Pool, Secrets: s.Secrets}
}

// Create adds a serving target.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewTarget) (Target, error) {
	v := &errs.Invalid{}
	if in.Name == "" {
		v.Add("name", "is required")
	} else if !name.MatchString(in.Name) {
		v.Add("name", "must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64")
	}
	if !slices.Contains(Kinds, in.Kind) {
		v.Add("kind", "must be one of %s", strings.Join(Kinds, ", "))
	}
	in.BaseURL = strings.TrimRight(strings.TrimSpace(in.BaseURL), "/")
	needsURL := in.Kind == KindVLLM || in.Kind == KindWebhook || in.Kind == KindVLLMPooling
	if v.Text("base_url", in.BaseURL, MaxURL, needsURL) && in.BaseURL != "" {
		if err := s.Outbound.CheckURL(ctx, in.BaseURL); err != nil {
			v.Add("base_url", "%s", outbound.Describe(err))
		}
	}
	if v.Text("api_key", in.APIKey, MaxAPIKey, in.Kind == KindWebhook) && in.Kind == KindWebhook {
		if err := webhook.CheckSecret(in.APIKey); err != nil {
			v.Add("api_key", "must be the webhook's signing secret: whsec_ followed by a base64 key of 24 to 64 bytes")
		}
	}
	s.keys().CheckKey(v, in.APIKey)
	grace := int32(DefaultUnloadGrace / time.Second)
	if in.UnloadGrace != nil {
		if *in.UnloadGrace < 0 || *in.UnloadGrace > 86400 {
			v.Add("unload_grace_seconds", "must be 0 to 86400")
		}
		grace = int32(*in.UnloadGrace)
	}
	if err := v.Err(); err != nil {
		return Target{}, err
	}
	p := db.ServingTargetInsertParams{OrgID: orgID, Name: in.Name, Kind: in.Kind, BaseUrl: in.BaseURL, UnloadGraceS: grace}
	details := map[string]any{"name": in.Name, "kind": in.Kind, "base_url": in.BaseURL}
	out, err := keyed.Create(ctx, s.keys(), actor, orgID, in.Name, in.APIKey, details,
		func(ctx context.Context, q *db.Queries, key keyed.Sealed) (db.ServingTarget, uuid.UUID, error) {
			p.ApiKeyCiphertext, p.ApiKeyNonce = key.Ciphertext, key.Nonce
			t, err := q.ServingTargetInsert(ctx, p)
			return t, t.ID, err
		})
	if err != nil {
		return Target{}, err
	}
	return targetOf(out), nil
}

// List returns the organisation's serving targets by name.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Target, error) {
	rows, err := db.New(s.Pool).ServingTargetList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Target, 0, len(rows))
	for _, t := range rows {
		out = append(out, targetOf(t))
	}
	return out, nil
}

// Get returns one of the organisation's targets, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (db.ServingTarget, error) {
	return getTarget(ctx, db.New(s.Pool), orgID, id)
}

// GetTx is Get in the caller's transaction.
func (s *Service) GetTx(ctx context.Context, tx pgx.Tx, orgID, id uuid.UUID) (db.ServingTarget, error) {
	return getTarget(ctx, db.New(tx), orgID, id)
}

func getTarget(ctx context.Context, q *db.Queries, orgID, id uuid.UUID) (db.ServingTarget, error) {
	t, err := q.ServingTargetGet(ctx, db.ServingTargetGetParams{OrgID: orgID, ID: id})
	return t, errs.NotFound(err)
}

// GetByNameTx returns, in the caller's transaction, the organisation's
// target of that name; an unknown name is an invalid "target" field.
func (s *Service) GetByNameTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, name string) (db.ServingTarget, error) {
	t, err := db.New(tx).ServingTargetGetByName(ctx, db.ServingTargetGetByNameParams{OrgID: orgID, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.InvalidField("target", "no serving target is named %q", name)
	}
	return t, err
}

// key opens a target's API key ("" when it has none).
func (s *Service) key(t db.ServingTarget) (string, error) {
	return s.keys().Open(t.OrgID, keyed.Sealed{Ciphertext: t.ApiKeyCiphertext, Nonce: t.ApiKeyNonce})
}

// VLLM is the client of a vllm or vllm_pooling target.
func (s *Service) VLLM(t db.ServingTarget) (*VLLM, error) {
	key, err := s.key(t)
	if err != nil {
		return nil, err
	}
	return &VLLM{HTTP: s.Outbound.HTTP(), BaseURL: t.BaseUrl, APIKey: key, Attempts: s.Attempts, BaseDelay: s.RetryDelay}, nil
}

// Notify delivers a signed deployment message to a webhook target under
// the message id (the same id for every retry of one deployment, so the
// receiver can drop repeats).
func (s *Service) Notify(ctx context.Context, t db.ServingTarget, id string, payload any) (webhook.Result, error) {
	secret, err := s.key(t)
	if err != nil {
		return webhook.Result{}, err
	}
	sender := &webhook.Sender{Outbound: s.Outbound, MaxAttempts: s.Attempts, BaseDelay: s.RetryDelay}
	return sender.Send(ctx, webhook.Endpoint{URL: t.BaseUrl, Secret: secret}, id, payload)
}

// Chat is where to send chat completions for what a target serves: its
// OpenAI-compatible base URL (ending in /v1) and key. A vLLM target is
// called at its address; a provider target at its address (an
// OpenAI-compatible API's base, with its version) with its key, or, when
// it has no address, at the server's OpenAI address (OpenAI's own by
// default) with its key or the server's. A webhook answers ok false.
func (s *Service) Chat(t db.ServingTarget) (baseURL, apiKey string, ok bool, err error) {
	if !CanChat(t.Kind) {
		return "", "", false, nil
	}
	key, err := s.key(t)
	if err != nil {
		return "", "", false, err
	}
	if t.Kind == KindVLLM {
		return t.BaseUrl + "/v1", key, true, nil
	}
	if t.BaseUrl != "" {
		// The server's key is never sent to an address a user named.
		return t.BaseUrl, key, true, nil
	}
	return cmp.Or(strings.TrimRight(s.ProviderBaseURL, "/"), OpenAIBaseURL), cmp.Or(key, s.ProviderKey), true, nil
}
