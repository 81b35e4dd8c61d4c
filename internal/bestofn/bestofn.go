// Package bestofn answers a query with the best of several candidate
// answers (the design's serving steps 3 to 6): the candidates are given,
// or sampled from a served model version with several temperature/top_p
// pairs; each is scored by the judge, by a reward model Curate serves (all
// candidates in one batch), or by rules; one is selected (the highest
// score, a draw weighted by score, or the first above a threshold that
// passes the rule filters); and every call is logged with its
// candidates, scores and selection under a response id, which feedback can
// carry later as its trace_id.
package bestofn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
)

// Limits on a request.
const (
	MaxText       = 32 << 10 // the query, and each candidate
	MaxContext    = 64 << 10 // the context, as JSON
	MinCandidates = 2
	MaxCandidates = 16
)

// Selections.
const (
	SelectMax       = "max"
	SelectWeighted  = "weighted"
	SelectThreshold = "threshold"
)

// Generation methods, as the answer names them.
const (
	GenerationProvided = "provided"
	GenerationSampled  = "sampled"
)

// DefaultSamples are the sampling settings used in turn when a request
// asks a model for N answers without giving its own.
var DefaultSamples = []Sample{{0.7, 0.95}, {1.0, 0.95}, {0.3, 0.9}, {0.9, 1.0}}

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool      *pgxpool.Pool
	Judge     *judge.Service
	Endpoints *endpoints.Service
	Models    *models.Service
	// RewardModels scores candidates with a served reward model.
	RewardModels *rewardmodel.Service
}

// New builds the best-of-N service on the judge, the endpoints and the
// registry it asks for answers, and the reward models that may score them.
func New(pool *pgxpool.Pool, judge *judge.Service, endpoints *endpoints.Service, models *models.Service, rewardModels *rewardmodel.Service) *Service {
	return &Service{Pool: pool, Judge: judge, Endpoints: endpoints, Models: models, RewardModels: rewardModels}
}

// Sample is one sampling strategy.
type Sample struct {
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p"`
}

// Scorer names how candidates are scored: exactly one of the judge (an
// endpoint's name), a reward model (a registered model's name with an
// alias, "production" when left out, or a version's id), or rules.
type Scorer struct {
	Judge                string           `json:"judge,omitempty"`
	Template             string           `json:"template,omitempty"`
	RewardModel          string           `json:"reward_model,omitempty"`
	Alias                string           `json:"alias,omitempty"`
	RewardModelVersionID *uuid.UUID       `json:"reward_model_version_id,omitempty"`
	Rules                []scorers.Config `json:"rules,omitempty"`
	// ScoredBy is the reward model version that scored, written to the
	// log by Curate (an alias may move later); never taken from a
	// request.
	ScoredBy *uuid.UUID `json:"scored_by,omitempty"`
}

// DefaultAlias is the alias a reward model named without one is called
// under.
const DefaultAlias = "production"

// Request is what the API takes.
type Request struct {
	Query      string          `json:"query"`
	Context    json.RawMessage `json:"context,omitempty"`
	Candidates []string        `json:"candidates,omitempty"`
	// ModelVersionID and N ask a served version for N answers, with
	// Samples (DefaultSamples when empty) used in turn.
	ModelVersionID *uuid.UUID `json:"model_version_id,omitempty"`
	N              int        `json:"n,omitempty"`
	Samples        []Sample   `json:"samples,omitempty"`
	Scorer         Scorer     `json:"scorer"`
	Selection      string     `json:"selection,omitempty"` // max when empty
	// Threshold is the score a candidate needs under "threshold" selection
	// (0.5 when nil); Filters are rules it must pass: a required rule fully
	// met, a forbidden one not triggered.
	Threshold *float64         `json:"threshold,omitempty"`
	Filters   []scorers.Config `json:"filters,omitempty"`
}

// Candidate is one answer with its score.
type Candidate struct {
	Index       int     `json:"index"`
	Text        string  `json:"text"`
	Score       float64 `json:"score"`
	Explanation string  `json:"explanation,omitempty"`
	// Invalid is why the candidate has no score; it cannot be selected.
	Invalid string `json:"invalid,omitempty"`
	// Filtered is true when a rule filter excluded it.
	Filtered bool `json:"filtered,omitempty"`
}

// Response is what the API answers.
type Response struct {
	Response         string      `json:"response"`
	RewardScore      float64     `json:"reward_score"`
	CandidatesCount  int         `json:"candidates_count"`
	GenerationMethod string      `json:"generation_method"`
	ResponseID       uuid.UUID   `json:"response_id"`
	Selection        string      `json:"selection"`
	Selected         int         `json:"selected"`
	Scores           []Candidate `json:"scores"`
}

// check validates a request, naming each field.
func (r *Request) check() (rules, filters scorers.Set, err error) {
	v := &errs.Invalid{}
	v.Text("query", r.Query, MaxText, true)
	if len(r.Context) > MaxContext {
		v.Add("context", "is %d bytes; at most %d", len(r.Context), MaxContext)
	} else if len(r.Context) > 0 && string(r.Context) != "null" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(r.Context, &obj) != nil {
			v.Add("context", "must be a JSON object")
		}
	}
	switch {
	case len(r.Candidates) > 0 && r.ModelVersionID != nil:
		v.Add("candidates", "give candidates or a model_version_id with n, not both")
	case len(r.Candidates) > 0:
		if len(r.Candidates) < MinCandidates || len(r.Candidates) > MaxCandidates {
			v.Add("candidates", "must hold %d to %d answers", MinCandidates, MaxCandidates)
		}
		for i, c := range r.Candidates {
			v.Text(fmt.Sprintf("candidates[%d]", i), c, MaxText, true)
		}
	case r.ModelVersionID != nil:
		if r.N < MinCandidates || r.N > MaxCandidates {
			v.Add("n", "must be %d to %d", MinCandidates, MaxCandidates)
		}
		for i, s := range r.Samples {
			if !(s.Temperature >= 0 && s.Temperature <= 2) {
				v.Add(fmt.Sprintf("samples[%d].temperature", i), "must be from 0 to 2")
			}
			if !(s.TopP > 0 && s.TopP <= 1) {
				v.Add(fmt.Sprintf("samples[%d].top_p", i), "must be above 0 and at most 1")
			}
		}
	default:
		v.Add("candidates", "give 2 to 16 candidate answers, or a model_version_id and n")
	}
	sc := &r.Scorer
	sc.ScoredBy = nil
	named := 0
	for _, set := range []bool{sc.Judge != "", sc.RewardModel != "", sc.RewardModelVersionID != nil, len(sc.Rules) > 0} {
		if set {
			named++
		}
	}
	if sc.Alias != "" && sc.RewardModel == "" {
		v.Add("scorer.alias", "goes with reward_model: the alias of the registered reward model that scores")
	}
	switch {
	case named != 1:
		v.Add("scorer", `name exactly one of {"judge": "<endpoint>"}, {"reward_model": "<registered model>", "alias": "production"}, {"reward_model_version_id": "<model version id>"} or {"rules": [...]}`)
	case sc.RewardModel != "":
		if !models.ValidName(sc.RewardModel) {
			v.Add("scorer.reward_model", "must be a registered model's name: %s", models.NameRule)
		}
		if sc.Alias == "" {
			sc.Alias = DefaultAlias
		} else if !models.ValidName(sc.Alias) {
			v.Add("scorer.alias", "%s", models.NameRule)
		}
	case sc.RewardModelVersionID != nil && *sc.RewardModelVersionID == uuid.Nil:
		v.Add("scorer.reward_model_version_id", "must be a model version's id")
	case len(sc.Rules) > 0:
		if rules, err = scorers.Parse("scorer.rules", sc.Rules); err != nil {
			v.Merge(err)
		} else if len(rules.External) > 0 || len(rules.RewardModels) > 0 {
			v.Add("scorer.rules", "take rule scorers only: name the judge as {\"judge\": \"<endpoint>\"}, a reward model as {\"reward_model\": \"<registered model>\"}")
		}
	}
	if r.Selection == "" {
		r.Selection = SelectMax
	}
	if !slices.Contains([]string{SelectMax, SelectWeighted, SelectThreshold}, r.Selection) {
		v.Add("selection", "must be max, weighted or threshold")
	}
	if r.Threshold != nil && !(*r.Threshold >= 0 && *r.Threshold <= 1) {
		v.Add("threshold", "must be from 0 to 1")
	}
	if len(r.Filters) > 0 {
		if filters, err = scorers.Parse("filters", r.Filters); err != nil {
			v.Merge(err)
		} else if len(filters.External) > 0 || len(filters.RewardModels) > 0 {
			v.Add("filters", "take rule scorers only")
		}
	}
	return rules, filters, v.Err()
}

// Select answers a request: generates candidates when asked to, scores
// them, selects one and logs the whole call.
func (s *Service) Select(ctx context.Context, actor audit.Actor, orgID uuid.UUID, r Request) (Response, error) {
	rules, filters, err := r.check()
	if err != nil {
		return Response{}, err
	}
	out := Response{GenerationMethod: GenerationProvided, Selection: r.Selection}
	texts := r.Candidates
	if r.ModelVersionID != nil {
		if texts, err = s.sample(ctx, orgID, r); err != nil {
			return Response{}, err
		}
		out.GenerationMethod = GenerationSampled
	}
	if r.Scorer.Judge != "" {
		if _, err := s.Judge.Template(ctx, orgID, r.Scorer.Template); err != nil {
			return Response{}, err
		}
	}
	cands := make([]Candidate, len(texts))
	for i, text := range texts {
		cands[i] = Candidate{Index: i, Text: text}
	}
	if r.Scorer.RewardModel != "" || r.Scorer.RewardModelVersionID != nil {
		// A reward model scores the candidates in one batch.
		by, err := s.scoreByRewardModel(ctx, orgID, r, cands)
		if err != nil {
			return Response{}, err
		}
		r.Scorer.ScoredBy = &by
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4)
		for i := range cands {
			g.Go(func() error { return s.score(gctx, orgID, r, rules, &cands[i]) })
		}
		if err := g.Wait(); err != nil {
			return Response{}, err
		}
	}
	for i := range cands {
		for _, sc := range filters.Rules {
			v := sc.Score(scorers.Input{Query: r.Query, Answer: cands[i].Text})
			pass := v.Valid() && (sc.Kind == scorers.KindForbidden && v.Value == 0 || sc.Kind != scorers.KindForbidden && v.Value == 1)
			cands[i].Filtered = cands[i].Filtered || !pass
		}
	}
	pick := choose(cands, r)
	if pick < 0 {
		return Response{}, &errs.Conflict{Message: "No candidate could be scored: " + cands[0].Invalid}
	}
	out.Selected, out.Response, out.RewardScore = pick, cands[pick].Text, cands[pick].Score
	out.CandidatesCount, out.Scores = len(cands), cands
	candJSON, err := json.Marshal(cands)
	if err != nil {
		return Response{}, err
	}
	scorerJSON, err := json.Marshal(r.Scorer)
	if err != nil {
		return Response{}, err
	}
	ctxJSON := []byte(r.Context)
	if len(ctxJSON) == 0 || string(ctxJSON) == "null" {
		ctxJSON = []byte("{}")
	}
	// A call that sampled a version records it: a shadow of the alias
	// the version serves mirrors the call.
	var version uuid.NullUUID
	if r.ModelVersionID != nil {
		version = uuid.NullUUID{UUID: *r.ModelVersionID, Valid: true}
	}
	row, err := db.New(s.Pool).SelectionInsert(ctx, db.SelectionInsertParams{OrgID: orgID, Query: r.Query, Context: ctxJSON,
		Scorer: scorerJSON, Selection: r.Selection, GenerationMethod: out.GenerationMethod, Candidates: candJSON,
		Selected: int32(pick), RewardScore: out.RewardScore, CreatedByLabel: actor.Label, ModelVersionID: version})
	if err != nil {
		return Response{}, err
	}
	out.ResponseID = row.ID
	return out, nil
}

// sample asks the version for N answers, the sampling settings in turn.
func (s *Service) sample(ctx context.Context, orgID uuid.UUID, r Request) ([]string, error) {
	target, err := s.Models.Chat(ctx, orgID, *r.ModelVersionID)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return nil, errs.InvalidField("model_version_id", "is not a model version of this organisation")
	case errors.Is(err, models.ErrNotServed):
		if v, gerr := s.Models.Get(ctx, orgID, *r.ModelVersionID); gerr == nil && v.Kind == models.KindReward {
			return nil, errs.InvalidField("model_version_id", "is a reward model: it scores answers and writes none; name it as the scorer instead")
		}
		return nil, errs.InvalidField("model_version_id", "is not deployed on a serving target Curate can call (a vLLM server or a provider)")
	case err != nil:
		return nil, err
	}
	samples := r.Samples
	if len(samples) == 0 {
		samples = DefaultSamples
	}
	client := s.Endpoints.ChatClient(target.BaseURL, target.APIKey)
	out := make([]string, r.N)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range r.N {
		sm := samples[i%len(samples)]
		g.Go(func() error {
			resp, err := client.Complete(gctx, chat.Request{Model: target.Model, Temperature: &sm.Temperature, TopP: &sm.TopP, MaxTokens: 1024,
				Messages: []chat.Message{{Role: "user", Content: r.Query}}})
			if err != nil {
				return &errs.Conflict{Message: "The model version could not answer: " + outbound.Describe(err)}
			}
			out[i] = resp.Content
			return nil
		})
	}
	return out, g.Wait()
}

// scoreByRewardModel scores every candidate with the reward model the
// request names, in one batch, and answers the version that scored. A
// reward model that cannot score is refused on the field that named it.
func (s *Service) scoreByRewardModel(ctx context.Context, orgID uuid.UUID, r Request, cands []Candidate) (uuid.UUID, error) {
	ref, field := rewardmodel.Ref{Name: r.Scorer.RewardModel, Alias: r.Scorer.Alias}, "scorer.reward_model"
	if id := r.Scorer.RewardModelVersionID; id != nil {
		ref, field = rewardmodel.Ref{VersionID: *id}, "scorer.reward_model_version_id"
	}
	m, err := s.RewardModels.Resolve(ctx, orgID, ref)
	var refused *rewardmodel.Refused
	if errors.As(err, &refused) {
		return uuid.Nil, errs.InvalidField(field, "%s", refused.Reason)
	}
	if err != nil {
		return uuid.Nil, err
	}
	ctxDocs := documents(r.Context)
	ins := make([]scorers.Input, len(cands))
	for i, c := range cands {
		ins[i] = scorers.Input{Query: r.Query, Context: ctxDocs, Answer: c.Text}
	}
	scores, err := s.RewardModels.Score(ctx, orgID, m, rewardmodel.Live, ins)
	if err != nil {
		return uuid.Nil, err
	}
	for i, sc := range scores {
		v := sc.AsScore(m)
		cands[i].Score, cands[i].Explanation, cands[i].Invalid = v.Value, v.Explanation, v.Invalid
	}
	return m.VersionID, nil
}

// documents are the documents of a request's context object (its
// "documents" list).
func documents(raw json.RawMessage) []string {
	var c struct {
		Documents json.RawMessage `json:"documents"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return nil
	}
	return scorers.Documents(c.Documents)
}

// score scores one candidate, recording why when it cannot.
func (s *Service) score(ctx context.Context, orgID uuid.UUID, r Request, rules scorers.Set, c *Candidate) error {
	in := scorers.Input{Query: r.Query, Answer: c.Text}
	if r.Scorer.Judge != "" {
		j, err := s.Judge.Judge(ctx, orgID, judge.Request{Endpoint: r.Scorer.Judge, Template: r.Scorer.Template, Input: in, Purpose: "best-of-n"})
		var budget *judge.BudgetError
		switch {
		case errors.Is(err, endpoints.ErrUnknown):
			return errs.InvalidField("scorer.judge", "no endpoint is named %q", r.Scorer.Judge)
		case errors.As(err, &budget):
			return &errs.Conflict{Message: budget.Describe()}
		case err != nil:
			c.Invalid = judge.Describe(err)
			return nil
		}
		c.Score, c.Explanation, c.Invalid = j.Score, j.Critique, j.Invalid
		return nil
	}
	// Rules: the mean of their values, a forbidden rule counting as one
	// minus its value (a risk lowers the score).
	var sum float64
	var parts []string
	for _, sc := range rules.Rules {
		v := sc.Score(in)
		if !v.Valid() {
			c.Invalid = sc.Name + ": " + v.Invalid
			return nil
		}
		x := v.Value
		if sc.Kind == scorers.KindForbidden {
			x = 1 - x
		}
		sum += x
		parts = append(parts, fmt.Sprintf("%s %.2f", sc.Name, x))
	}
	c.Score, c.Explanation = sum/float64(len(rules.Rules)), strings.Join(parts, ", ")
	return nil
}

// choose picks a candidate by the request's selection, or -1 when none
// has a score.
func choose(cands []Candidate, r Request) int {
	best := -1
	for i, c := range cands {
		if c.Invalid == "" && (best < 0 || c.Score > cands[best].Score) {
			best = i
		}
	}
	switch r.Selection {
	case SelectWeighted:
		var total float64
		for _, c := range cands {
			if c.Invalid == "" && !c.Filtered {
				total += c.Score
			}
		}
		if total > 0 {
			x := rand.Float64() * total
			for i, c := range cands {
				if c.Invalid != "" || c.Filtered {
					continue
				}
				if x -= c.Score; x < 0 {
					return i
				}
			}
		}
	case SelectThreshold:
		th := 0.5
		if r.Threshold != nil {
			th = *r.Threshold
		}
		for i, c := range cands {
			if c.Invalid == "" && !c.Filtered && c.Score >= th {
				return i
			}
		}
	default:
		best = -1
		for i, c := range cands {
			if c.Invalid == "" && !c.Filtered && (best < 0 || c.Score > cands[best].Score) {
				best = i
			}
		}
		if best >= 0 {
			return best
		}
		// Every scored candidate was filtered out: the best scored one.
		for i, c := range cands {
			if c.Invalid == "" && (best < 0 || c.Score > cands[best].Score) {
				best = i
			}
		}
	}
	return best
}

// Logged is a logged best-of-N answer with the feedback that later named
// it by trace_id.
type Logged struct {
	ResponseID       uuid.UUID       `json:"response_id"`
	Query            string          `json:"query"`
	Context          json.RawMessage `json:"context"`
	Scorer           json.RawMessage `json:"scorer"`
	Selection        string          `json:"selection"`
	GenerationMethod string          `json:"generation_method"`
	Selected         int             `json:"selected"`
	RewardScore      float64         `json:"reward_score"`
	Candidates       []Candidate     `json:"candidates"`
	FeedbackIDs      []uuid.UUID     `json:"feedback_ids"`
}

// Get reads one logged answer of the organisation.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Logged, error) {
	q := db.New(s.Pool)
	row, err := q.SelectionGet(ctx, db.SelectionGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Logged{}, errs.NotFound(err)
	}
	out := Logged{ResponseID: row.ID, Query: row.Query, Context: row.Context, Scorer: row.Scorer, Selection: row.Selection,
		GenerationMethod: row.GenerationMethod, Selected: int(row.Selected), RewardScore: row.RewardScore}
	if err := json.Unmarshal(row.Candidates, &out.Candidates); err != nil {
		return Logged{}, err
	}
	if out.FeedbackIDs, err = q.FeedbackListIDsByTraceID(ctx, db.FeedbackListIDsByTraceIDParams{OrgID: orgID, TraceID: id.String()}); err != nil {
		return Logged{}, err
	}
	return out, nil
}
