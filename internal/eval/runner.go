package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/leak"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
)

// Runs is the product's Runner: the candidate answers through the chat
// client (a registered endpoint, or a model version where a serving target
// serves it: an adapter on vLLM, or a provider's model by its id with the
// provider's key), and the rule scorers, the judge, reward models and the
// reward formula score each answer.
type Runs struct {
	Endpoints    *endpoints.Service
	Judge        *judge.Service
	Models       *models.Service
	Reward       *reward.Service
	RewardModels *rewardmodel.Service
}

// NewRuns answers through the endpoints and the registry's served
// versions, and scores with the judge, the served reward models and the
// reward formulas.
func NewRuns(endpoints *endpoints.Service, judge *judge.Service, models *models.Service, reward *reward.Service, rewardModels *rewardmodel.Service) *Runs {
	return &Runs{Endpoints: endpoints, Judge: judge, Models: models, Reward: reward, RewardModels: rewardModels}
}

// defaultConcurrency is how many items a model version's server is asked
// at once (an endpoint sets its own).
const defaultConcurrency = 4

// Check refuses what cannot run, naming each field, and completes the
// configuration: the formula resolved and written out, the scorers
// defaulting to the formula's.
func (r *Runs) Check(ctx context.Context, orgID uuid.UUID, cfg Config) (Config, error) {
	if cfg.LeakCheck != nil {
		return r.checkLeak(ctx, orgID, cfg)
	}
	v := &errs.Invalid{}
	var f reward.Formula
	if len(cfg.RewardFormula) > 0 {
		var err error
		if f, err = reward.Parse("reward_formula", cfg.RewardFormula, nil); err != nil {
			return cfg, err
		}
	} else {
		ver, err := r.Reward.Latest(ctx, orgID, reward.DefaultName)
		if err != nil {
			return cfg, err
		}
		f = ver.Weights
	}
	if len(cfg.Scorers) == 0 {
		for _, name := range f.Scorers() {
			cfg.Scorers = append(cfg.Scorers, scorers.Config{Preset: name})
		}
	}
	set, err := scorers.Parse("scorers", cfg.Scorers)
	if err != nil {
		return cfg, err
	}
	if err := f.Require("reward_formula", set.Names()); err != nil {
		return cfg, err
	}
	for _, rm := range set.RewardModels {
		_, err := r.RewardModels.Resolve(ctx, orgID, rewardmodel.Ref{VersionID: rm.VersionID})
		var refused *rewardmodel.Refused
		switch {
		case errors.As(err, &refused):
			v.Add(rm.Field+".model_version_id", "%s", refused.Reason)
		case err != nil:
			return cfg, err
		}
	}
	if asksJudge(set) {
		switch {
		case cfg.Judge == nil || cfg.Judge.Endpoint == "":
			v.Add("judge.endpoint", "is required when the judge scores (the judge, or a RAG metric): the name of a registered endpoint")
		default:
			if err := r.checkEndpoint(ctx, orgID, "judge.endpoint", cfg.Judge.Endpoint, v); err != nil {
				return cfg, err
			}
			if _, err := r.Judge.Template(ctx, orgID, cfg.Judge.Template); err != nil {
				var inv *errs.Invalid
				if !errors.As(err, &inv) {
					return cfg, err
				}
				v.Add("judge.template", "no judge template is named %q", cfg.Judge.Template)
			}
		}
	}
	if slices.Contains(set.External, scorers.RAGAnswerRelevancy) {
		switch {
		case cfg.Judge == nil || cfg.Judge.Embeddings == "":
			v.Add("judge.embeddings_endpoint", "is required when answer relevancy scores: the name of a registered endpoint whose model embeds text")
		default:
			if err := r.checkEndpoint(ctx, orgID, "judge.embeddings_endpoint", cfg.Judge.Embeddings, v); err != nil {
				return cfg, err
			}
		}
	}
	if err := r.checkCandidate(ctx, orgID, cfg.Candidate, v); err != nil {
		return cfg, err
	}
	if err := v.Err(); err != nil {
		return cfg, err
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return cfg, err
	}
	cfg.RewardFormula, cfg.Formula = raw, f.String()
	return cfg, nil
}

// checkEndpoint records in v, under field, that no endpoint has the name;
// it returns only failures to look.
func (r *Runs) checkEndpoint(ctx context.Context, orgID uuid.UUID, field, name string, v *errs.Invalid) error {
	_, _, err := r.Endpoints.Client(ctx, orgID, name)
	if errors.Is(err, endpoints.ErrUnknown) {
		v.Add(field, "no endpoint is named %q", name)
		return nil
	}
	return err
}

// checkCandidate records what is wrong with the candidate in v; it
// returns only failures to look.
func (r *Runs) checkCandidate(ctx context.Context, orgID uuid.UUID, c Candidate, v *errs.Invalid) error {
	switch {
	case c.Endpoint != "":
		if _, _, err := r.Endpoints.Client(ctx, orgID, c.Endpoint); errors.Is(err, endpoints.ErrUnknown) {
			v.Add("candidate.endpoint", "no endpoint is named %q", c.Endpoint)
		} else if err != nil {
			return err
		}
	case c.ModelVersionID != nil:
		switch _, err := r.Models.ChatOn(ctx, orgID, *c.ModelVersionID, c.Target); {
		case errors.Is(err, errs.ErrNotFound):
			v.Add("candidate.model_version_id", "is not a model version of this organisation")
		case errors.Is(err, models.ErrNotServed):
			if ver, gerr := r.Models.Get(ctx, orgID, *c.ModelVersionID); gerr == nil && ver.Kind == models.KindReward {
				v.Add("candidate.model_version_id", "is a reward model: it scores answers and writes none; name it as a scorer instead")
				break
			}
			v.Add("candidate.model_version_id", "is not deployed on a serving target Curate can call (a vLLM server or a provider): deploy it (to a staging alias, say) or register an endpoint that serves it")
		case err != nil:
			return err
		}
	}
	return nil
}

// leakFormula is how a leak check's reward reads: 1 for a clean answer.
const leakFormula = "R = 1 − leak"

// checkLeak checks a leak check: only its candidate matters.
func (r *Runs) checkLeak(ctx context.Context, orgID uuid.UUID, cfg Config) (Config, error) {
	v := &errs.Invalid{}
	if cfg.Judge != nil || len(cfg.Scorers) > 0 || len(cfg.RewardFormula) > 0 {
		v.Add("leak_check", "takes no judge, scorers or reward formula: it compares answers with the training data")
	}
	if err := r.checkCandidate(ctx, orgID, cfg.Candidate, v); err != nil {
		return cfg, err
	}
	cfg.Formula = leakFormula
	return cfg, v.Err()
}

// Prepare builds the answerer and scorer of a checked configuration.
func (r *Runs) Prepare(ctx context.Context, orgID uuid.UUID, cfg Config, items []Item) (Plan, error) {
	if lc := cfg.LeakCheck; lc != nil {
		answers, prompts := make([]string, 0, len(items)), make([]string, 0, len(items))
		for _, it := range items {
			answers = append(answers, it.Reference)
			for _, m := range it.Messages {
				prompts = append(prompts, m.Content)
			}
		}
		a, conc, err := r.answerer(ctx, orgID, cfg.Candidate)
		if err != nil {
			return Plan{}, err
		}
		return Plan{Answerer: a, Scorer: &leakScorer{ix: leak.New(answers, prompts, lc.MinWords)}, Concurrency: conc}, nil
	}
	f, err := reward.Parse("reward_formula", cfg.RewardFormula, nil)
	if err != nil {
		return Plan{}, err
	}
	set, err := scorers.Parse("scorers", cfg.Scorers)
	if err != nil {
		return Plan{}, err
	}
	a, conc, err := r.answerer(ctx, orgID, cfg.Candidate)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Answerer: a, Concurrency: conc}
	purpose := cfg.Purpose
	if purpose == "" {
		purpose = fmt.Sprintf("evaluation of %s", cfg.GoldenSetVersionID)
	}
	sc := &scorer{orgID: orgID, set: set, formula: f, judge: r.Judge, judgeCfg: cfg.Judge, purpose: purpose, rewardModels: r.RewardModels}
	plan.Scorer = sc
	if asksJudge(set) {
		plan.Ready = sc.ready
	}
	return plan, nil
}

// asksJudge reports whether any of the scorers asks the judge model: the
// judge's own grade, or a RAG metric's verdicts.
func asksJudge(set scorers.Set) bool {
	return slices.ContainsFunc(set.External, func(name string) bool {
		return name == "judge" || slices.Contains(scorers.RAG, name)
	})
}

// answerer is what asks the candidate, and how many at once.
func (r *Runs) answerer(ctx context.Context, orgID uuid.UUID, c Candidate) (*answerer, int, error) {
	switch {
	case c.Endpoint != "":
		ep, client, err := r.Endpoints.Client(ctx, orgID, c.Endpoint)
		if err != nil {
			return nil, 0, err
		}
		return &answerer{client: client, model: ep.Model, endpoint: &ep, temperature: ep.Temperature, maxTokens: ep.MaxTokens}, ep.Concurrency, nil
	case c.ModelVersionID != nil:
		t, err := r.Models.ChatOn(ctx, orgID, *c.ModelVersionID, c.Target)
		if err != nil {
			return nil, 0, err
		}
		return &answerer{client: r.Endpoints.ChatClient(t.BaseURL, t.APIKey), model: t.Model, maxTokens: 1024}, defaultConcurrency, nil
	}
	return nil, 0, errors.New("evaluation: no candidate")
}

type answerer struct {
	client      *chat.Client
	model       string
	endpoint    *endpoints.Endpoint // nil for a model version: no price known
	temperature float64
	maxTokens   int
}

func (a *answerer) Answer(ctx context.Context, it Item) (Answer, error) {
	var msgs []chat.Message
	if it.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: it.System})
	}
	for _, m := range it.Messages {
		msgs = append(msgs, chat.Message{Role: m.Role, Content: m.Content})
	}
	temp := a.temperature
	resp, err := a.client.Complete(ctx, chat.Request{Model: a.model, Messages: msgs, Temperature: &temp, MaxTokens: a.maxTokens})
	out := Answer{Text: resp.Content, PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, Latency: resp.Latency}
	if a.endpoint != nil {
		out.Cost = a.endpoint.Cost(resp.PromptTokens, resp.CompletionTokens)
	}
	return out, err
}

type scorer struct {
	orgID        uuid.UUID
	set          scorers.Set
	formula      reward.Formula
	judge        *judge.Service
	judgeCfg     *JudgeConfig
	purpose      string
	rewardModels *rewardmodel.Service
}

// ready pauses the run when the judge's budget is already spent.
func (s *scorer) ready(ctx context.Context) error {
	var budget *judge.BudgetError
	if err := s.judge.CheckBudget(ctx, s.orgID); errors.As(err, &budget) {
		return &Pause{Reason: budget.Describe()}
	} else if err != nil {
		return err
	}
	return nil
}

func (s *scorer) Score(ctx context.Context, it Item, answer string) (Scored, error) {
	in := scorers.Input{Query: it.Query, Context: it.Context, Answer: answer, Reference: it.Reference}
	out := Scored{Components: s.set.Score(in)}
	if slices.Contains(s.set.External, "judge") {
		j, err := s.judge.Judge(ctx, s.orgID, judge.Request{Endpoint: s.judgeCfg.Endpoint, Template: s.judgeCfg.Template, Input: in, Purpose: s.purpose})
		out.JudgeCalls, out.JudgeCost = j.Calls, j.Cost
		var budget *judge.BudgetError
		switch {
		case errors.As(err, &budget):
			return out, &Pause{Reason: budget.Describe()}
		case ctx.Err() != nil:
			return out, ctx.Err()
		case err != nil:
			// The judge could not be reached: this item has no judge score,
			// with the reason; a later run asks again.
			out.Components["judge"] = scorers.Invalidf("%s", judge.Describe(err))
		default:
			out.Components["judge"] = j.AsScore()
			out.Critique, out.Safety = j.Critique, j.Safety
		}
	}
	for _, metric := range s.set.External {
		if !slices.Contains(scorers.RAG, metric) {
			continue
		}
		j, err := s.judge.RAG(ctx, s.orgID, judge.RAGRequest{Metric: metric, Endpoint: s.judgeCfg.Endpoint, Embeddings: s.judgeCfg.Embeddings,
			Input: in, Purpose: s.purpose})
		out.JudgeCalls, out.JudgeCost = out.JudgeCalls+j.Calls, out.JudgeCost+j.Cost
		var budget *judge.BudgetError
		switch {
		case errors.As(err, &budget):
			return out, &Pause{Reason: budget.Describe()}
		case ctx.Err() != nil:
			return out, ctx.Err()
		case err != nil:
			out.Components[metric] = scorers.Invalidf("%s", judge.Describe(err))
		default:
			out.Components[metric] = j.AsScore()
		}
	}
	for _, rm := range s.set.RewardModels {
		sc, err := s.rewardModel(ctx, rm, in)
		if err != nil {
			return out, err
		}
		out.Components[rm.Name] = sc
	}
	res := s.formula.Compute(out.Components)
	if res.Valid() {
		out.Reward, out.RewardExplanation = &res.Value, res.Explanation
	} else {
		out.Invalid = "No reward: " + strings.TrimSuffix(res.Invalid, ".") + "."
	}
	return out, nil
}

// rewardModel is a reward model's score of one answer. A reward model no
// longer served (its deployment unloaded mid-run), or one that cannot be
// reached, leaves the item without that score, with the reason; a resumed
// run asks again.
func (s *scorer) rewardModel(ctx context.Context, rm scorers.RewardModel, in scorers.Input) (scorers.Score, error) {
	m, err := s.rewardModels.Resolve(ctx, s.orgID, rewardmodel.Ref{VersionID: rm.VersionID})
	var refused *rewardmodel.Refused
	if errors.As(err, &refused) {
		return scorers.Invalidf("The reward model cannot score: %s.", strings.TrimSuffix(refused.Reason, ".")), nil
	}
	if err != nil {
		return scorers.Score{}, err
	}
	got, err := s.rewardModels.Score(ctx, s.orgID, m, rewardmodel.Evaluation, []scorers.Input{in})
	if err != nil {
		return scorers.Score{}, err
	}
	return got[0].AsScore(m), nil
}

// leakScorer flags answers that reproduce training data: the "leak"
// score is 1 for a leak, the reward 1 for a clean answer, and a leak is a
// safety flag.
type leakScorer struct{ ix *leak.Index }

func (l *leakScorer) Score(_ context.Context, it Item, answer string) (Scored, error) {
	var asked strings.Builder
	for _, m := range it.Messages {
		asked.WriteString(m.Content)
		asked.WriteByte('\n')
	}
	f := l.ix.Check(asked.String(), answer)
	value, reward := 0.0, 1.0
	if f.Leaked() {
		value, reward = 1, 0
	}
	expl := f.Explain(l.ix.MinWords())
	return Scored{Components: map[string]scorers.Score{"leak": {Value: value, Explanation: expl}}, Reward: &reward,
		RewardExplanation: leakFormula + " = " + strconv.FormatFloat(reward, 'f', -1, 64), Safety: f.Leaked(), Critique: expl}, nil
}

// Choices are what the form starting a run offers.
type Choices struct {
	Versions  []models.Version
	Endpoints []endpoints.Endpoint
	Templates []judge.Template
	Formulas  []reward.Version
}

// Choices lists the organisation's model versions, endpoints, judge
// templates and reward formulas.
func (r *Runs) Choices(ctx context.Context, orgID uuid.UUID) (Choices, error) {
	var out Choices
	var err error
	if out.Versions, _, err = r.Models.List(ctx, orgID, models.Filter{}, nil, 200); err != nil {
		return out, err
	}
	if out.Endpoints, err = r.Endpoints.List(ctx, orgID); err != nil {
		return out, err
	}
	if out.Templates, err = r.Judge.Templates(ctx, orgID); err != nil {
		return out, err
	}
	out.Formulas, err = r.Reward.List(ctx, orgID)
	return out, err
}
