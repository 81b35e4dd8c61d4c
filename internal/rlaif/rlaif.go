// Package rlaif is the reward of a GRPO or PPO run trained on what the
// experts and the judge value (seed 002's RLAIF design): each sampled
// completion is scored by Curate's own scorers, as an evaluation's answers
// are: the organisation's reward formula
//
//	R = 0.35·chain + 0.25·emergency − 0.15·risk + 0.25·judge
//
// over its rule scorers, the judge as the teacher (a template through a
// registered endpoint: cached, retried, its cost reserved against the
// judge budget before each call and logged) and any reward model. Every
// sample is kept with its components, its reward and the teacher's cost,
// per run and step, so the run's page shows each component by step and
// what the teacher cost; a sample whose teacher and rules disagree by
// more than the run's threshold goes to the judge-conflicts queue for
// experts.
package rlaif

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
)

// Teacher is the scorer name the judge's score goes by in a formula.
const Teacher = "judge"

// Defaults.
const (
	DefaultConflictThreshold = 0.5
	MaxBatch                 = 256 // samples scored in one call
	MaxText                  = 32 << 10
)

// Config is a run's reward as its settings give it.
type Config struct {
	// Judge is the teacher; required when the formula weighs "judge".
	Judge *JudgeConfig `json:"judge,omitempty"`
	// Scorers default to the formula's presets.
	Scorers []scorers.Config `json:"scorers,omitempty"`
	// RewardFormula defaults to the organisation's newest "default".
	RewardFormula json.RawMessage `json:"reward_formula,omitempty"`
	// ConflictThreshold: a teacher's and the rules' scores (0–1) further
	// apart than it are a conflict (DefaultConflictThreshold when 0).
	ConflictThreshold float64 `json:"conflict_threshold,omitempty"`
}

// JudgeConfig names the teacher: an endpoint and a judge template.
type JudgeConfig struct {
	Endpoint string `json:"endpoint"`
	Template string `json:"template,omitempty"`
}

// Plan is a checked configuration, ready to score.
type Plan struct {
	Formula   reward.Formula
	Set       scorers.Set
	Judge     *JudgeConfig
	Threshold float64
}

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool         *pgxpool.Pool
	Judge        *judge.Service
	Endpoints    *endpoints.Service
	Reward       *reward.Service
	RewardModels *rewardmodel.Service
	// RedTeam gives a run's red-team prompts (fine-tuning's dataset
	// versions), which mark the samples a trainer sends; nil marks none.
	RedTeam RedTeamSource
}

// RedTeamSource gives the red-team prompts of a run launched with RLAIF
// (internal/finetune.Service): each prompt's question, trimmed.
type RedTeamSource interface {
	RedTeamPrompts(ctx context.Context, orgID, jobID uuid.UUID) (map[string]bool, error)
}

// New builds the RLAIF reward on the judge, the reward formulas and the
// served reward models.
func New(pool *pgxpool.Pool, judge *judge.Service, endpoints *endpoints.Service, reward *reward.Service, rewardModels *rewardmodel.Service) *Service {
	return &Service{Pool: pool, Judge: judge, Endpoints: endpoints, Reward: reward, RewardModels: rewardModels}
}

// Check refuses what cannot score, each problem on its field under field
// ("grpo_config.rlaif.judge.endpoint"), and resolves the formula.
func (s *Service) Check(ctx context.Context, orgID uuid.UUID, field string, cfg Config) (Plan, error) {
	v := &errs.Invalid{}
	var f reward.Formula
	if len(cfg.RewardFormula) > 0 {
		var err error
		if f, err = reward.Parse(field+".reward_formula", cfg.RewardFormula, nil); err != nil {
			return Plan{}, err
		}
	} else {
		ver, err := s.Reward.Latest(ctx, orgID, reward.DefaultName)
		if err != nil {
			return Plan{}, err
		}
		f = ver.Weights
	}
	if len(cfg.Scorers) == 0 {
		for _, name := range f.Scorers() {
			cfg.Scorers = append(cfg.Scorers, scorers.Config{Preset: name})
		}
	}
	set, err := scorers.Parse(field+".scorers", cfg.Scorers)
	if err != nil {
		return Plan{}, err
	}
	if err := f.Require(field+".reward_formula", set.Names()); err != nil {
		return Plan{}, err
	}
	for _, rm := range set.RewardModels {
		_, err := s.RewardModels.Resolve(ctx, orgID, rewardmodel.Ref{VersionID: rm.VersionID})
		var refused *rewardmodel.Refused
		switch {
		case errors.As(err, &refused):
			v.Add(field+"."+rm.Field+".model_version_id", "%s", refused.Reason)
		case err != nil:
			return Plan{}, err
		}
	}
	if slices.Contains(set.External, Teacher) {
		switch {
		case cfg.Judge == nil || cfg.Judge.Endpoint == "":
			v.Add(field+".judge.endpoint", "is required when the teacher scores: the name of a registered endpoint")
		default:
			if _, _, err := s.Endpoints.Client(ctx, orgID, cfg.Judge.Endpoint); errors.Is(err, endpoints.ErrUnknown) {
				v.Add(field+".judge.endpoint", "no endpoint is named %q", cfg.Judge.Endpoint)
			} else if err != nil {
				return Plan{}, err
			}
			if _, err := s.Judge.Template(ctx, orgID, cfg.Judge.Template); err != nil {
				var inv *errs.Invalid
				if !errors.As(err, &inv) {
					return Plan{}, err
				}
				v.Add(field+".judge.template", "no judge template is named %q", cfg.Judge.Template)
			}
		}
	}
	th := cmp.Or(cfg.ConflictThreshold, DefaultConflictThreshold)
	if !(th > 0 && th <= 1) {
		v.Add(field+".conflict_threshold", "must lie above 0 and at most 1")
	}
	if err := v.Err(); err != nil {
		return Plan{}, err
	}
	return Plan{Formula: f, Set: set, Judge: cfg.Judge, Threshold: th}, nil
}

// Sample is one completion to score: the prompt it answers (with the
// documents it may draw on and a reference answer, where the prompt set
// has them), and whether the prompt is a red-team one.
type Sample struct {
	Prompt     string   `json:"prompt"`
	Context    []string `json:"context,omitempty"`
	Reference  string   `json:"reference,omitempty"`
	Completion string   `json:"completion"`
	RedTeam    bool     `json:"red_team,omitempty"`
}

// Scored is one sample's reward: its value (nil with the reason when a
// component could not be scored), each component by name, and what the
// teacher said and cost.
type Scored struct {
	Reward      *float64                 `json:"reward"`
	Explanation string                   `json:"explanation,omitempty"`
	Invalid     string                   `json:"invalid,omitempty"`
	Components  map[string]scorers.Score `json:"components"`
	Teacher     *float64                 `json:"teacher,omitempty"`
	Rules       *float64                 `json:"rules,omitempty"` // the rules' combined score in 0–1
	Conflict    bool                     `json:"conflict"`
	TeacherCost pricing.Micros           `json:"teacher_cost_micros"`
}

// Score scores one step's samples of a run with its plan, keeps each
// sample and queues its conflict, if it has one. The teacher's budget
// being spent leaves the rest of the batch without a teacher score (and so
// without a reward), with the reason; a teacher that cannot be reached
// leaves that sample so. Only Curate's own failures are errors.
func (s *Service) Score(ctx context.Context, orgID, jobID uuid.UUID, p Plan, step int, samples []Sample) ([]Scored, error) {
	if err := checkBatch(step, samples); err != nil {
		return nil, err
	}
	out := make([]Scored, len(samples))
	var spent *judge.BudgetError
	for i, sm := range samples {
		in := scorers.Input{Query: sm.Prompt, Context: sm.Context, Answer: sm.Completion, Reference: sm.Reference}
		sc := Scored{Components: p.Set.Score(in)}
		var j judge.Judgement
		if slices.Contains(p.Set.External, Teacher) {
			switch {
			case spent != nil:
				sc.Components[Teacher] = scorers.Invalidf("%s", spent.Describe())
			default:
				var err error
				j, err = s.Judge.Judge(ctx, orgID, judge.Request{Endpoint: p.Judge.Endpoint, Template: p.Judge.Template, Input: in,
					Purpose: "training run " + jobID.String()})
				sc.TeacherCost = j.Cost
				switch {
				case errors.As(err, &spent):
					sc.Components[Teacher] = scorers.Invalidf("%s", spent.Describe())
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case err != nil:
					sc.Components[Teacher] = scorers.Invalidf("%s", judge.Describe(err))
				default:
					sc.Components[Teacher] = j.AsScore()
				}
			}
		}
		for _, rm := range p.Set.RewardModels {
			got, err := s.rewardModel(ctx, orgID, rm, in)
			if err != nil {
				return nil, err
			}
			sc.Components[rm.Name] = got
		}
		res := p.Formula.Compute(sc.Components)
		if res.Valid() {
			sc.Reward, sc.Explanation = &res.Value, res.Explanation
		} else {
			sc.Invalid = res.Invalid
		}
		if t, ok := sc.Components[Teacher]; ok && t.Valid() {
			sc.Teacher = &t.Value
		}
		sc.Rules = RulesScore(p.Formula, p.Set, sc.Components)
		sc.Conflict = sc.Teacher != nil && sc.Rules != nil && math.Abs(*sc.Teacher-*sc.Rules) > p.Threshold
		if err := s.keep(ctx, orgID, jobID, step, sm, sc, j); err != nil {
			return nil, err
		}
		out[i] = sc
	}
	return out, nil
}

// keep stores one sample and, when it is one, its conflict, together.
func (s *Service) keep(ctx context.Context, orgID, jobID uuid.UUID, step int, sm Sample, sc Scored, j judge.Judgement) error {
	comps, err := json.Marshal(sc.Components)
	if err != nil {
		return err
	}
	opt := func(f *float64) pgtype.Float8 {
		if f == nil {
			return pgtype.Float8{}
		}
		return pgtype.Float8{Float64: *f, Valid: true}
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		id, err := q.RlaifSampleInsert(ctx, db.RlaifSampleInsertParams{OrgID: orgID, JobID: jobID, Step: int32(step), Prompt: sm.Prompt,
			Completion: sm.Completion, RedTeam: sm.RedTeam, Components: comps, Reward: opt(sc.Reward), Invalid: sc.Invalid,
			TeacherScore: opt(sc.Teacher), RulesScore: opt(sc.Rules), Conflict: sc.Conflict, TeacherCalls: int32(j.Calls),
			TeacherCostMicros: int64(sc.TeacherCost)})
		if err != nil || !sc.Conflict {
			return err
		}
		return q.RlaifConflictInsert(ctx, db.RlaifConflictInsertParams{OrgID: orgID, RlaifSampleID: id,
			RulesScore: *sc.Rules, TeacherScore: *sc.Teacher, TeacherSafetyFlag: j.Safety, Critique: j.Critique})
	})
}

func (s *Service) rewardModel(ctx context.Context, orgID uuid.UUID, rm scorers.RewardModel, in scorers.Input) (scorers.Score, error) {
	m, err := s.RewardModels.Resolve(ctx, orgID, rewardmodel.Ref{VersionID: rm.VersionID})
	var refused *rewardmodel.Refused
	if errors.As(err, &refused) {
		return scorers.Invalidf("The reward model cannot score: %s", refused.Reason), nil
	}
	if err != nil {
		return scorers.Score{}, err
	}
	got, err := s.RewardModels.Score(ctx, orgID, m, rewardmodel.Training, []scorers.Input{in})
	if err != nil {
		return scorers.Score{}, err
	}
	return got[0].AsScore(m), nil
}

// RulesScore is what the formula's rule scorers say together, in 0–1:
// their scores weighted by the size of their weights, a rule with a
// negative weight (a risk) counting as one less its score. nil when the
// formula weighs no rule or one could not score.
func RulesScore(f reward.Formula, set scorers.Set, comps map[string]scorers.Score) *float64 {
	rules := map[string]bool{}
	for _, r := range set.Rules {
		rules[r.Name] = true
	}
	var sum, weight float64
	for _, t := range f.Terms {
		if !rules[t.Scorer] || t.Weight == 0 {
			continue
		}
		s, ok := comps[t.Scorer]
		if !ok || !s.Valid() {
			return nil
		}
		v := s.Value
		if t.Weight < 0 {
			v = 1 - v
		}
		sum += math.Abs(t.Weight) * v
		weight += math.Abs(t.Weight)
	}
	if weight == 0 {
		return nil
	}
	r := sum / weight
	return &r
}

func checkBatch(step int, samples []Sample) error {
	v := &errs.Invalid{}
	if step < 0 {
		v.Add("step", "must be 0 or more")
	}
	switch {
	case len(samples) == 0:
		v.Add("samples", "must hold at least one sample")
	case len(samples) > MaxBatch:
		v.Add("samples", "at most %d in one call", MaxBatch)
	}
	for i, sm := range samples {
		if sm.Prompt == "" {
			v.Add(fmt.Sprintf("samples[%d].prompt", i), "is required")
		}
		if len(sm.Prompt) > MaxText || len(sm.Completion) > MaxText || len(sm.Reference) > MaxText {
			v.Add(fmt.Sprintf("samples[%d]", i), "a prompt, completion or reference is at most %d bytes", MaxText)
		}
	}
	return v.Err()
}

// Step is one step's samples: how many, how many had a reward, the mean
// reward and each component's mean, and the conflicts.
type Step struct {
	Step       int
	Samples    int
	Rewarded   int
	MeanReward *float64
	Components map[string]float64
	Conflicts  int
}

// Spend is what a run's teacher cost and how its samples went.
type Spend struct {
	Samples, TeacherCalls, Conflicts, RedTeam int
	TeacherCost                               pricing.Micros
}

// Steps reads a run's samples by step, and what its teacher cost.
func (s *Service) Steps(ctx context.Context, orgID, jobID uuid.UUID) ([]Step, Spend, error) {
	q := db.New(s.Pool)
	rows, err := q.RlaifStepList(ctx, db.RlaifStepListParams{OrgID: orgID, JobID: jobID})
	if err != nil {
		return nil, Spend{}, err
	}
	out := make([]Step, 0, len(rows))
	for _, r := range rows {
		st := Step{Step: int(r.Step), Samples: int(r.Samples), Rewarded: int(r.Rewarded), Conflicts: int(r.Conflicts)}
		if r.Rewarded > 0 {
			st.MeanReward = &r.MeanReward
		}
		if err := json.Unmarshal(r.Components, &st.Components); err != nil {
			return nil, Spend{}, err
		}
		out = append(out, st)
	}
	sp, err := q.RlaifSpendGet(ctx, db.RlaifSpendGetParams{OrgID: orgID, JobID: jobID})
	if err != nil {
		return nil, Spend{}, err
	}
	return out, Spend{Samples: int(sp.Samples), TeacherCalls: int(sp.TeacherCalls), Conflicts: int(sp.Conflicts), RedTeam: int(sp.RedTeam),
		TeacherCost: pricing.Micros(sp.TeacherCostMicros)}, nil
}

// Request is one step's samples of a run to score, with the run's reward
// configuration (the run's own, from its launch's grpo_config.rlaif, when
// it has one).
type Request struct {
	Step    int      `json:"step"`
	Samples []Sample `json:"samples"`
	Config  Config   `json:"rlaif"`
}

// ConfigOf is the reward configuration of a local run's RLAIF settings;
// field names them in errors.
func ConfigOf(r local.RLAIFSettings, field string) (Config, error) {
	cfg := Config{RewardFormula: r.RewardFormula, ConflictThreshold: r.ConflictThreshold}
	if r.Judge != nil {
		cfg.Judge = &JudgeConfig{Endpoint: r.Judge.Endpoint, Template: r.Judge.Template}
	}
	if len(r.Scorers) > 0 {
		if err := json.Unmarshal(r.Scorers, &cfg.Scorers); err != nil {
			return cfg, errs.InvalidField(field+".scorers", "must be a list of scorers")
		}
	}
	return cfg, nil
}

// runConfig is the reward a job was launched with, if it names one.
func runConfig(j db.FineTuningJob) (Config, bool, error) {
	var s local.Settings
	if len(j.LocalSettings) == 0 {
		return Config{}, false, nil
	}
	if err := json.Unmarshal(j.LocalSettings, &s); err != nil {
		return Config{}, false, err
	}
	if s.Policy.RLAIF == nil {
		return Config{}, false, nil
	}
	cfg, err := ConfigOf(*s.Policy.RLAIF, "rlaif")
	return cfg, true, err
}

// ScoreRun scores one step of a GRPO or PPO job of the organisation: a
// job of another organisation, or none, is errs.ErrNotFound; one of
// another method, or ended, is refused on "job".
func (s *Service) ScoreRun(ctx context.Context, orgID, jobID uuid.UUID, r Request) ([]Scored, error) {
	j, err := db.New(s.Pool).FineTuneJobGet(ctx, db.FineTuneJobGetParams{OrgID: orgID, ID: jobID})
	if err != nil {
		return nil, errs.NotFound(err)
	}
	switch {
	case j.Method != "grpo" && j.Method != "ppo":
		return nil, errs.InvalidField("job", "is a %s job; only GRPO and PPO runs take their reward from Curate", j.Method)
	case j.Status == db.FinetuneStatusSucceeded || j.Status == db.FinetuneStatusFailed || j.Status == db.FinetuneStatusCancelled:
		return nil, errs.InvalidField("job", "has ended (%s): it scores nothing more", j.Status)
	}
	if err := checkBatch(r.Step, r.Samples); err != nil {
		return nil, err
	}
	// A run launched with its reward scores with it, whatever a caller sends.
	if own, ok, err := runConfig(j); err != nil {
		return nil, err
	} else if ok {
		r.Config = own
		// Its prompt set says which prompts are red-team ones.
		if s.RedTeam != nil {
			red, err := s.RedTeam.RedTeamPrompts(ctx, orgID, jobID)
			if err != nil {
				return nil, err
			}
			for i := range r.Samples {
				r.Samples[i].RedTeam = r.Samples[i].RedTeam || red[strings.TrimSpace(r.Samples[i].Prompt)]
			}
		}
	}
	p, err := s.Check(ctx, orgID, "rlaif", r.Config)
	if err != nil {
		return nil, err
	}
	return s.Score(ctx, orgID, jobID, p, r.Step, r.Samples)
}
