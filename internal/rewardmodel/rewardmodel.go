// Package rewardmodel scores answers with a reward model Curate serves: a
// version of kind "reward" (what the local REWARD stage trains, or one
// registered by hand) deployed to a vLLM server running it with the
// pooling runner. Best-of-N, evaluations and an experiment's live scoring
// all call Score.
//
// Each answer is sent as a conversation (the documents it could draw on,
// the query, the answer) to the server's classification API, or its
// pooling API when the server has no classification API for its model
// (a token-level reward model), through the outbound client. vLLM takes
// one conversation per chat request, so a batch of answers is sent as that
// many requests at once, which the server's scheduler runs together; the
// cache is read and written once per batch. The model's output (a logit)
// is mapped to 0–1 with the logistic function, as the trainer maps ratings
// to its targets, so a reward model's score weighs like the judge's.
package rewardmodel

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/serving"
)

// DefaultInFlight is how many requests one batch has at the server at
// once.
const DefaultInFlight = 16

// MaxBatch bounds the answers one call scores.
const MaxBatch = 256

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool   *pgxpool.Pool
	Models *models.Service
	// InFlight bounds the requests one batch has at the server at once
	// (DefaultInFlight when 0).
	InFlight int

	// pooling remembers the servers (address and model) that answer
	// through /pooling only, so each is asked /classify once.
	pooling sync.Map
}

// New builds the reward models' scoring on the registry that finds where
// a reward version is served.
func New(pool *pgxpool.Pool, models *models.Service) *Service {
	return &Service{Pool: pool, Models: models}
}

// Ref names a reward model: a version by its id, or the version an alias
// of a registered model names.
type Ref struct {
	VersionID uuid.UUID
	Name      string
	Alias     string
}

// Refused is a reward model that cannot score, in words fit for the
// field that named it.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return e.Reason }

// Resolve finds the reward model a reference names and where it scores.
// A reference to nothing, to a version of another kind or to a reward
// model served nowhere Curate can ask is a *Refused saying which.
func (s *Service) Resolve(ctx context.Context, orgID uuid.UUID, ref Ref) (models.ScoringModel, error) {
	var m models.ScoringModel
	var err error
	if ref.VersionID != uuid.Nil {
		m, err = s.Models.Scoring(ctx, orgID, ref.VersionID)
	} else {
		m, err = s.Models.ScoringAlias(ctx, orgID, ref.Name, ref.Alias)
	}
	var notReward *models.NotReward
	switch {
	case errors.Is(err, errs.ErrNotFound) && ref.VersionID == uuid.Nil:
		return m, &Refused{Reason: fmt.Sprintf("no registered model %q has a version under the alias %q", ref.Name, ref.Alias)}
	case errors.Is(err, errs.ErrNotFound):
		return m, &Refused{Reason: "is not a model version of this organisation"}
	case errors.As(err, &notReward):
		return m, &Refused{Reason: notReward.Error()}
	case errors.Is(err, models.ErrNotScoring):
		return m, &Refused{Reason: fmt.Sprintf("%s %s is not served where Curate can ask it: deploy it to a vLLM server running the pooling runner (a vllm_pooling target)", m.Name, m.Version)}
	}
	return m, err
}

// Score is a reward model's score of one answer.
type Score struct {
	// Value is the score in 0–1: the logistic of Raw.
	Value float64
	// Raw is the model's own output: its logit, or for a model with two
	// labels the second's logit less the first's.
	Raw float64
	// Cached is true when no request was sent for it.
	Cached bool
	// Invalid, when set, is why there is no score; Value means nothing.
	Invalid string
}

// AsScore is the score as a scorer's result, explained in words naming
// the model.
func (s Score) AsScore(m models.ScoringModel) scorers.Score {
	if s.Invalid != "" {
		return scorers.Invalidf("%s", s.Invalid)
	}
	return scorers.Score{Value: s.Value, Explanation: fmt.Sprintf("%s %s scored %s (%s on 0–1)", m.Name, m.Version,
		strconv.FormatFloat(s.Raw, 'f', 3, 64), strconv.FormatFloat(s.Value, 'f', 3, 64))}
}

// Purpose says who asks for a score. Every request is recorded with its
// latency and score under it: the production monitors watch a reward
// model's latency over all its requests and the drift of its live
// scores only.
type Purpose string

// The purposes.
const (
	Live       Purpose = "live"       // production traffic: best-of-N, live scoring
	Evaluation Purpose = "evaluation" // an evaluation run
	Training   Purpose = "training"   // a policy-training run's reward
)

// ScoreRef resolves a reward model and scores answers with it: what an
// experiment's live scoring calls.
func (s *Service) ScoreRef(ctx context.Context, orgID uuid.UUID, ref Ref, purpose Purpose, ins []scorers.Input) ([]Score, error) {
	m, err := s.Resolve(ctx, orgID, ref)
	if err != nil {
		return nil, err
	}
	return s.Score(ctx, orgID, m, purpose, ins)
}

// Score scores answers with a resolved reward model, one Score per input
// in their order. Scores are read from the cache in one query; the rest
// are asked of the server at once (identical answers once) and stored in
// one statement. An answer the server could not score (after the serving
// client's retries) is Invalid with the reason and not cached: it says
// nothing about the answer. Each request sent is recorded, under purpose,
// with how long its answer took and its score. Only a failure of Curate's
// own (the database, a cancelled context) is an error.
func (s *Service) Score(ctx context.Context, orgID uuid.UUID, m models.ScoringModel, purpose Purpose, ins []scorers.Input) ([]Score, error) {
	if len(ins) > MaxBatch {
		return nil, fmt.Errorf("rewardmodel: %d answers in one batch; at most %d", len(ins), MaxBatch)
	}
	keys := make([]string, len(ins))
	first := map[string]int{} // key → the first input with it
	var unique [][]byte
	for i, in := range ins {
		k := CacheKey(m.VersionID, Conversation(in))
		keys[i] = string(k)
		if _, ok := first[keys[i]]; !ok {
			first[keys[i]] = i
			unique = append(unique, k)
		}
	}
	q := db.New(s.Pool)
	cached, err := q.RewardModelCacheList(ctx, db.RewardModelCacheListParams{OrgID: orgID, Keys: unique})
	if err != nil {
		return nil, err
	}
	raws := make(map[string]float64, len(unique))
	for _, c := range cached {
		raws[string(c.Key)] = c.Raw
	}
	var asked []int // the first input of each key not cached
	for _, k := range unique {
		if _, ok := raws[string(k)]; !ok {
			asked = append(asked, first[string(k)])
		}
	}
	answers := make([]Score, len(asked))
	took := make([]time.Duration, len(asked))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(s.InFlight, DefaultInFlight))
	for j, i := range asked {
		g.Go(func() error {
			start := time.Now()
			raw, err := s.ask(gctx, m, Conversation(ins[i]))
			took[j] = time.Since(start)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				answers[j] = Score{Invalid: "The reward model could not score the answer: " + outbound.Describe(err)}
				return nil
			}
			answers[j] = Score{Raw: raw}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	fresh := make(map[string]Score, len(asked))
	store := db.RewardModelCacheInsertManyParams{OrgID: orgID, VersionID: m.VersionID}
	for j, i := range asked {
		fresh[keys[i]] = answers[j]
		if answers[j].Invalid == "" {
			raws[keys[i]] = answers[j].Raw
			store.Keys, store.Raws = append(store.Keys, []byte(keys[i])), append(store.Raws, answers[j].Raw)
		}
	}
	if len(store.Keys) > 0 {
		if err := q.RewardModelCacheInsertMany(ctx, store); err != nil {
			return nil, err
		}
	}
	if len(asked) > 0 {
		calls := db.RewardModelCallInsertManyParams{OrgID: orgID, VersionID: m.VersionID, Purpose: string(purpose)}
		for j, a := range answers {
			ok := a.Invalid == ""
			calls.Latencies = append(calls.Latencies, float64(took[j].Microseconds())/1000)
			calls.Oks, calls.Scores = append(calls.Oks, ok), append(calls.Scores, logistic(a.Raw))
		}
		if err := q.RewardModelCallInsertMany(ctx, calls); err != nil {
			return nil, err
		}
	}
	out := make([]Score, len(ins))
	for i, k := range keys {
		a, wasAsked := fresh[k]
		if a.Invalid != "" {
			out[i] = Score{Invalid: a.Invalid}
			continue
		}
		out[i] = Score{Raw: raws[k], Value: logistic(raws[k]), Cached: !wasAsked || first[k] != i}
	}
	return out, nil
}

// ask sends one conversation to the server: /classify, or /pooling for a
// server without the classification API for its model.
func (s *Service) ask(ctx context.Context, m models.ScoringModel, conv []serving.Message) (float64, error) {
	memo := m.Address + "\x00" + m.Model
	var values []float64
	var err error
	if _, pooled := s.pooling.Load(memo); pooled {
		values, err = m.Client.Pool(ctx, m.Model, conv)
	} else {
		values, err = m.Client.Classify(ctx, m.Model, conv)
		if errors.Is(err, serving.ErrNoRoute) {
			s.pooling.Store(memo, true)
			values, err = m.Client.Pool(ctx, m.Model, conv)
		}
	}
	if err != nil {
		return 0, err
	}
	return Raw(values)
}

// Raw reads a reward from the model's output: its one value, or for a
// classifier with two labels (bad, good) the log-odds of the second.
func Raw(values []float64) (float64, error) {
	var raw float64
	switch len(values) {
	case 1:
		raw = values[0]
	case 2:
		raw = values[1] - values[0]
	default:
		return 0, &serving.AnswerError{Reason: fmt.Sprintf("it has %d values per answer; a reward model has one (its reward) or two (bad, good)", len(values))}
	}
	if math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 0, &serving.AnswerError{Reason: "its reward is not a finite number"}
	}
	return raw, nil
}

func logistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Conversation is what the reward model reads for one answer: the
// documents the answer could draw on (as a system message, when there are
// any), the query, and the answer. The reference answer is not shown: the
// model scores the answer on its own.
func Conversation(in scorers.Input) []serving.Message {
	msgs := make([]serving.Message, 0, 3)
	if len(in.Context) > 0 {
		var b strings.Builder
		b.WriteString("Documents the answer may draw on:")
		for i, d := range in.Context {
			fmt.Fprintf(&b, "\n\n[%d] %s", i+1, d)
		}
		msgs = append(msgs, serving.Message{Role: "system", Content: b.String()})
	}
	return append(msgs, serving.Message{Role: "user", Content: in.Query}, serving.Message{Role: "assistant", Content: in.Answer})
}

// CacheKey hashes what decides a score: the version (its weights never
// change) and the conversation. Each part is length-prefixed, so no two
// different conversations share a key.
func CacheKey(versionID uuid.UUID, conv []serving.Message) []byte {
	h := sha256.New()
	h.Write([]byte("reward-model/1"))
	h.Write(versionID[:])
	for _, m := range conv {
		fmt.Fprintf(h, "%d:%s%d:", len(m.Role), m.Role, len(m.Content))
		h.Write([]byte(m.Content))
	}
	return h.Sum(nil)
}
