// Package loops runs the loop by itself: a policy per registered model
// says when to train again on new curated data (a number of new items a
// queue filter matches, a schedule, or both), how (the dataset recipe,
// the training and its cost cap), how the new version is judged (the
// evaluation and the organisation's gate), where it is staged, how it
// reaches production (promoted, or rolled out through an A/B experiment)
// and where a person must approve.
//
// A run is a chain of River jobs, one per step (collect → dataset →
// freeze → train → register → stage → evaluate → gate → rollout or
// promote). Each step calls the service that owns the work (datasets,
// pairs, fine-tuning, the registry, evaluation, experiments), records
// what it made before the next step starts, and finds what an earlier
// attempt of it made instead of making it again, so a worker killed at
// any step resumes it and nothing is trained, deployed or evaluated twice.
package loops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/shadow"
)

// Where a person must approve.
const (
	ApproveNone          = "none"
	ApproveBeforeDeploy  = "before_deploy"
	ApproveBeforeRollout = "before_rollout"
)

// Approvals lists the approval points.
var Approvals = []string{ApproveNone, ApproveBeforeDeploy, ApproveBeforeRollout}

// Schedules a trigger may run on.
var Schedules = []string{"hourly", "daily", "weekly"}

// schedulePeriod is how long a schedule waits between runs.
func schedulePeriod(s string) time.Duration {
	switch s {
	case "hourly":
		return time.Hour
	case "daily":
		return 24 * time.Hour
	case "weekly":
		return 7 * 24 * time.Hour
	}
	return 0
}

// Statuses of a policy.
const (
	StatusActive = "active"
	StatusPaused = "paused"
)

// DefaultMinNewItems is seed 001's minimum: a run waits for 1,000 new
// items.
const DefaultMinNewItems = 1000

// Limits on input.
const (
	MaxMinNewItems = 10_000_000
	MaxMethods     = 8
	MaxCostUSD     = 100_000
)

// Spec is a loop policy as the API takes and answers it.
type Spec struct {
	Name            string       `json:"name"`
	RegisteredModel string       `json:"registered_model"`
	Trigger         Trigger      `json:"trigger"`
	Dataset         DatasetSpec  `json:"dataset"`
	Training        Training     `json:"training"`
	Evaluation      Evaluation   `json:"evaluation"`
	Deploy          Deploy       `json:"deploy"`
	PromoteAlias    string       `json:"promote_alias"`
	Rollout         *RolloutSpec `json:"rollout,omitempty"`
	Approval        string       `json:"approval"`
}

// Trigger says when a run starts: once MinNewItems items matching Filter
// are new since the last run (created or reviewed since it collected), on
// Schedule, or both (on schedule, once enough are new).
type Trigger struct {
	MinNewItems *int   `json:"min_new_items"`
	Filter      Filter `json:"filter"`
	Schedule    string `json:"schedule,omitempty"`
}

// Filter is the queue's filter as a JSON object of its query parameters
// ({"status": "approved", "tag": "billing", "rating_min": 4}).
type Filter map[string]string

// UnmarshalJSON takes strings, numbers and true (false leaves a
// parameter out).
func (f *Filter) UnmarshalJSON(b []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := Filter{}
	for k, v := range raw {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			if x {
				out[k] = map[string]string{"duplicates": "show"}[k]
				if out[k] == "" {
					out[k] = "1"
				}
			}
		case nil:
		default:
			return fmt.Errorf("filter.%s must be a string, a number or true", k)
		}
	}
	*f = out
	return nil
}

// Values is the filter as query parameters.
func (f Filter) Values() url.Values {
	q := url.Values{}
	for k, v := range f {
		q.Set(k, v)
	}
	return q
}

// DatasetSpec is the dataset a run appends to and its recipe: generate
// is a list of pair-generation methods, or a whole recipe.
type DatasetSpec struct {
	Name     string `json:"name"`
	Generate Recipe `json:"generate"`
}

// Recipe says what a run puts in its dataset. A preference dataset (for
// DPO and other preference methods) takes the pairs its methods generate
// from feedback that may be training data and that Filter matches (by
// default the trigger's filter without its status: pairs compare answers
// whatever their review), at least MinStrength strong and tagged Tag when
// one is named; an instruction dataset (supervised training) takes the
// approved and corrected items the trigger's filter matches. The split
// settings are the dataset's, used by every freeze.
type Recipe struct {
	Methods           []pairs.Generation `json:"methods"`
	Type              string             `json:"type,omitempty"`
	Filter            *Filter            `json:"filter,omitempty"`
	MinStrength       float64            `json:"min_strength,omitempty"`
	Tag               string             `json:"tag,omitempty"`
	SplitStrategy     string             `json:"split_strategy,omitempty"`
	ValidationPercent *int               `json:"validation_percent,omitempty"`
	SystemPrompt      string             `json:"system_prompt,omitempty"`
}

// UnmarshalJSON takes a list of methods (names or generation objects) or
// a recipe object.
func (r *Recipe) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var methods []json.RawMessage
		if err := json.Unmarshal(b, &methods); err != nil {
			return err
		}
		out, err := parseMethods(methods)
		*r = Recipe{Methods: out}
		return err
	}
	type plain Recipe
	var in struct {
		plain
		Methods []json.RawMessage `json:"methods"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	*r = Recipe(in.plain)
	var err error
	r.Methods, err = parseMethods(in.Methods)
	return err
}

func parseMethods(raw []json.RawMessage) ([]pairs.Generation, error) {
	out := make([]pairs.Generation, 0, len(raw))
	for _, m := range raw {
		var name string
		if json.Unmarshal(m, &name) == nil {
			out = append(out, pairs.Generation{Method: name})
			continue
		}
		var g pairs.Generation
		dec := json.NewDecoder(bytes.NewReader(m))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// Training is how a run trains: the launch's provider, method, base model
// and hyperparameters, and the most its estimate may cost.
type Training struct {
	Provider        string                     `json:"provider"`
	Method          string                     `json:"method"`
	BaseModel       string                     `json:"base_model,omitempty"`
	Hyperparameters map[string]json.RawMessage `json:"hyperparameters,omitempty"`
	MaxCostUSD      float64                    `json:"max_cost_usd"`
	Suffix          string                     `json:"suffix,omitempty"`
}

// Evaluation is how a new version is evaluated: a golden set (the
// organisation's gate's when none is named), the judge and the reward.
type Evaluation struct {
	GoldenSetVersionID uuid.UUID         `json:"golden_set_version_id"`
	Judge              *eval.JudgeConfig `json:"judge,omitempty"`
	Scorers            []scorers.Config  `json:"scorers,omitempty"`
	RewardFormula      json.RawMessage   `json:"reward_formula,omitempty"`
	// Shadow, when set, makes a shadow of the version evidence for the
	// gate step: it waits until a shadow of the version has scored
	// MinQueries queries, and fails the version when its paired
	// difference (the version less what the alias served) is below
	// −MaxDrop.
	Shadow *ShadowGate `json:"shadow,omitempty"`
}

// ShadowGate is what the gate step asks of a version's shadow.
type ShadowGate struct {
	MinQueries int     `json:"min_queries"`
	MaxDrop    float64 `json:"max_drop"`
}

// ShadowEvidence answers the paired result of a version's newest shadow
// with scored queries (internal/shadow); false when it has none.
type ShadowEvidence interface {
	Evidence(ctx context.Context, orgID, versionID uuid.UUID) (shadow.Evidence, bool, error)
}

// Limits of a shadow gate.
const MaxShadowQueries = 1_000_000

// ShadowVerdict is what a shadow gate makes of a version's shadow
// evidence (ok false: none): wait for more queries, fail with the
// reason, or pass, each with the words the run shows.
func ShadowVerdict(g ShadowGate, ev shadow.Evidence, ok bool) (wait bool, fail, detail string) {
	n := 0
	if ok {
		n = ev.Difference.N
	}
	if n < g.MinQueries || ev.Difference.Mean == nil {
		return true, "", fmt.Sprintf("Waiting for the version's shadow: %d of %d queries scored in both answers. Shadow it under the alias it would replace (POST /api/models/:id/shadow).", n, g.MinQueries)
	}
	diff := fmt.Sprintf("%+.3f", *ev.Difference.Mean)
	if len(ev.Difference.CI) == 2 {
		diff += fmt.Sprintf(" (95%% interval %+.3f to %+.3f)", ev.Difference.CI[0], ev.Difference.CI[1])
	}
	if *ev.Difference.Mean < -g.MaxDrop {
		return false, fmt.Sprintf("Its shadow under %s on %d queries scores %s against what the alias served, more than %.3f below.", ev.Alias, n, diff, g.MaxDrop), ""
	}
	return false, "", fmt.Sprintf("Its shadow under %s on %d queries scores %s against what the alias served.", ev.Alias, n, diff)
}

// Deploy is where a new version is staged to be evaluated: the target and
// the alias (default candidate). Promotion goes to PromoteTarget, the same
// target unless it names another.
type Deploy struct {
	Target        string `json:"target"`
	Alias         string `json:"alias"`
	PromoteTarget string `json:"promote_target,omitempty"`
}

// RolloutSpec is the A/B rollout a run takes to production instead of
// promoting at once, as POST /api/models/ab-test takes it: the treatment's
// shares, how long each is held and on how many units, and the metrics
// and guardrails that roll it back.
type RolloutSpec struct {
	experiments.Rollout
	Metrics    []string `json:"metrics,omitempty"`
	Guardrails []string `json:"guardrails,omitempty"`
}

// Services are what a policy's check and a run's steps call.
type Services struct {
	Datasets    *datasets.Service
	Pairs       *pairs.Service
	FineTune    *finetune.Service
	Models      *models.Service
	Eval        *eval.Service
	Experiments *experiments.Service
	// Review says whether the organisation reviews with overlap, when
	// datasets take agreed items only; nil counts every item as agreed.
	Review *review.Service
	// Shadows answer a version's shadow evidence for a policy whose gate
	// asks for it; nil refuses such a policy.
	Shadows ShadowEvidence
}

// check validates a policy and fills in its defaults. Each part is
// checked by the service that will carry it out, so a policy that passes
// here is one its steps can run.
func (s *Service) check(ctx context.Context, orgID uuid.UUID, sp *Spec) error {
	v := &errs.Invalid{}
	sp.Name = strings.TrimSpace(sp.Name)
	if sp.Name == "" {
		v.Add("name", "is required")
	} else if !models.ValidName(sp.Name) {
		v.Add("name", "%s", models.NameRule)
	}
	if sp.RegisteredModel == "" {
		v.Add("registered_model", "is required: the registered model the new versions join")
	} else if !models.ValidName(sp.RegisteredModel) {
		v.Add("registered_model", "%s", models.NameRule)
	}

	// Trigger.
	if sp.Trigger.MinNewItems == nil {
		n := DefaultMinNewItems
		sp.Trigger.MinNewItems = &n
	}
	switch n := *sp.Trigger.MinNewItems; {
	case n < 0 || n > MaxMinNewItems:
		v.Add("trigger.min_new_items", "must be 0 to %d", MaxMinNewItems)
	case n == 0 && sp.Trigger.Schedule == "":
		v.Add("trigger.min_new_items", "must be at least 1 unless a schedule starts the runs")
	}
	if sp.Trigger.Schedule != "" && !slices.Contains(Schedules, sp.Trigger.Schedule) {
		v.Add("trigger.schedule", "must be hourly, daily or weekly")
	}
	filter, err := feedback.ParseFilter(sp.Trigger.Filter.Values())
	if err != nil {
		var bad *errs.Invalid
		if !errors.As(err, &bad) {
			return err
		}
		for _, e := range bad.Errors {
			v.Add("trigger.filter."+e.Field, "%s", e.Message)
		}
	}
	for k := range sp.Trigger.Filter {
		if !slices.Contains(feedback.FilterParams, k) {
			v.Add("trigger.filter."+k, "is not a filter of the queue (%s)", strings.Join(feedback.FilterParams, ", "))
		}
	}
	canonical := Filter{}
	for k, vals := range filter.Values() {
		canonical[k] = vals[0]
	}
	sp.Trigger.Filter = canonical

	// Training, checked as a launch would be (a launch names a frozen
	// version, which a run makes: that refusal is expected here).
	method := provider.Method(sp.Training.Method)
	if math.IsNaN(sp.Training.MaxCostUSD) || sp.Training.MaxCostUSD <= 0 || sp.Training.MaxCostUSD > MaxCostUSD {
		v.Add("training.max_cost_usd", "must be above 0 and at most %d: the most a run's estimate may cost", MaxCostUSD)
	}
	if s.FineTune != nil {
		hyper, sentAs, hyperErrs := s.hyperparameters(sp.Training)
		for _, fe := range hyperErrs {
			v.Add("training."+fe.Field, "%s", fe.Message)
		}
		_, err := s.FineTune.Estimate(ctx, orgID, finetune.Request{Provider: sp.Training.Provider, BaseModel: sp.Training.BaseModel,
			Method: method, Hyper: hyper, Suffix: sp.Training.Suffix, RegisteredModel: sp.RegisteredModel})
		var bad *errs.Invalid
		if err != nil && !errors.As(err, &bad) {
			return err
		}
		if bad != nil {
			for _, e := range bad.Errors {
				if name, ok := sentAs[e.Field]; ok {
					e.Field = "hyperparameters." + name
				}
				if e.Field != "dataset_version_id" && e.Field != "registered_model" {
					v.Add("training."+e.Field, "%s", e.Message)
				}
			}
		}
	}

	// Dataset recipe.
	d := &sp.Dataset
	d.Name = strings.TrimSpace(d.Name)
	v.Text("dataset.name", d.Name, datasets.MaxName, true)
	r := &d.Generate
	if r.Type == "" {
		r.Type = datasets.TypeDPO
		if method == provider.Supervised {
			r.Type = datasets.TypeInstructionTuning
		}
	}
	switch {
	case !slices.Contains(datasets.Types, r.Type):
		v.Add("dataset.generate.type", "must be one of %s", strings.Join(datasets.Types, ", "))
	case method == provider.Supervised && r.Type != datasets.TypeInstructionTuning:
		v.Add("dataset.generate.type", "supervised training takes an instruction_tuning dataset")
	case method != provider.Supervised && sp.Training.Method != "" && r.Type == datasets.TypeInstructionTuning:
		v.Add("dataset.generate.type", "%s trains on preference pairs: choose dpo or preference_pairs", sp.Training.Method)
	}
	if r.Type == datasets.TypeInstructionTuning {
		if len(r.Methods) > 0 {
			v.Add("dataset.generate", "an instruction dataset takes the items the trigger's filter matches: name no pair methods")
		}
		if st := filter.Status; st != "" && st != "approved" && st != "corrected" {
			v.Add("trigger.filter.status", "an instruction dataset takes approved or corrected items only")
		}
	} else if len(r.Methods) == 0 || len(r.Methods) > MaxMethods {
		v.Add("dataset.generate", "name 1 to %d pair-generation methods (%s)", MaxMethods, strings.Join(pairs.GenerateMethods, ", "))
	}
	seen := map[string]bool{}
	for i := range r.Methods {
		g := &r.Methods[i]
		if err := g.Validate(); err != nil {
			var bad *errs.Invalid
			if !errors.As(err, &bad) {
				return err
			}
			for _, e := range bad.Errors {
				v.Add(fmt.Sprintf("dataset.generate[%d].%s", i, e.Field), "%s", e.Message)
			}
		}
		if seen[g.Method] {
			v.Add(fmt.Sprintf("dataset.generate[%d]", i), "%s is named twice", g.Method)
		}
		seen[g.Method] = true
		g.DryRun = false
	}
	if r.Filter == nil {
		f := Filter{}
		for k, v := range sp.Trigger.Filter {
			if k != "status" {
				f[k] = v
			}
		}
		r.Filter = &f
	}
	if pf, err := feedback.ParseFilter(r.Filter.Values()); err != nil {
		var bad *errs.Invalid
		if !errors.As(err, &bad) {
			return err
		}
		for _, e := range bad.Errors {
			v.Add("dataset.generate.filter."+e.Field, "%s", e.Message)
		}
	} else {
		canonical := Filter{}
		for k, vals := range pf.Values() {
			canonical[k] = vals[0]
		}
		*r.Filter = canonical
	}
	for k := range *r.Filter {
		if !slices.Contains(feedback.FilterParams, k) {
			v.Add("dataset.generate.filter."+k, "is not a filter of the queue (%s)", strings.Join(feedback.FilterParams, ", "))
		}
	}
	if math.IsNaN(r.MinStrength) || r.MinStrength < 0 || r.MinStrength > 1 {
		v.Add("dataset.generate.min_strength", "must be from 0 to 1")
	}
	if tags, msg := feedback.NormalizeTags([]string{r.Tag}); r.Tag != "" {
		if msg != "" {
			v.Add("dataset.generate.tag", "%s", msg)
		} else {
			r.Tag = tags[0]
		}
	}
	if r.SplitStrategy == "" {
		r.SplitStrategy = datasets.SplitRandom
	}
	if !slices.Contains(datasets.SplitStrategies, r.SplitStrategy) {
		v.Add("dataset.generate.split_strategy", "must be one of %s", strings.Join(datasets.SplitStrategies, ", "))
	}
	if r.ValidationPercent == nil {
		p := 20
		r.ValidationPercent = &p
	} else if *r.ValidationPercent < 0 || *r.ValidationPercent > 50 {
		v.Add("dataset.generate.validation_percent", "must be 0 to 50")
	}
	v.Text("dataset.generate.system_prompt", r.SystemPrompt, datasets.MaxSystemPrompt, false)

	// Evaluation, checked as a run's start would be (its candidate is the
	// version a run makes). The organisation's gate judges production on
	// its own golden set: a policy naming another could never pass it.
	gate, gated, err := s.gate(ctx, orgID)
	if err != nil {
		return err
	}
	e := &sp.Evaluation
	switch {
	case e.GoldenSetVersionID == uuid.Nil && gated:
		e.GoldenSetVersionID = gate.GoldenSetVersionID
	case e.GoldenSetVersionID == uuid.Nil:
		v.Add("evaluation.golden_set_version_id", "is required: the organisation has no evaluation gate to take its golden set from")
	case gated && e.GoldenSetVersionID != gate.GoldenSetVersionID:
		v.Add("evaluation.golden_set_version_id", "the organisation's gate judges production on %s: leave this out or name that golden set", gate.GoldenSet)
	}
	if s.Eval != nil && e.GoldenSetVersionID != uuid.Nil {
		// Any frozen version, as POST /api/evaluations takes: marking one
		// a golden set names it on the pages, and is not needed here.
		if frozen, err := s.Eval.IsFrozen(ctx, orgID, e.GoldenSetVersionID); err != nil {
			return err
		} else if !frozen {
			v.Add("evaluation.golden_set_version_id", "is not a frozen dataset version of this organisation")
		}
	}
	if s.Eval != nil && s.Eval.Runner != nil {
		cfg, err := s.Eval.Runner.Check(ctx, orgID, eval.Config{GoldenSetVersionID: e.GoldenSetVersionID, Judge: e.Judge,
			Scorers: e.Scorers, RewardFormula: e.RewardFormula})
		var bad *errs.Invalid
		switch {
		case errors.As(err, &bad):
			for _, fe := range bad.Errors {
				if !strings.HasPrefix(fe.Field, "candidate") {
					v.Add("evaluation."+fe.Field, "%s", fe.Message)
				}
			}
		case err != nil:
			return err
		default:
			// The formula and scorers as resolved: a run evaluates
			// with what the policy was saved with.
			e.Scorers, e.RewardFormula = cfg.Scorers, cfg.RewardFormula
		}
	}

	if g := e.Shadow; g != nil {
		if g.MinQueries < 1 || g.MinQueries > MaxShadowQueries {
			v.Add("evaluation.shadow.min_queries", "must be a whole number from 1 to %d: the queries a shadow of the version must have scored", MaxShadowQueries)
		}
		if math.IsNaN(g.MaxDrop) || g.MaxDrop < 0 || g.MaxDrop > 1 {
			v.Add("evaluation.shadow.max_drop", "must be a number from 0 to 1: how far below the alias's answers the version's may score")
		}
		if s.Shadows == nil {
			v.Add("evaluation.shadow", "shadow deployments are not available in this process")
		}
	}

	// Deployment.
	if sp.Deploy.Alias == "" {
		sp.Deploy.Alias = "candidate"
	}
	if sp.PromoteAlias == "" {
		sp.PromoteAlias = models.Production
	}
	for field, alias := range map[string]string{"deploy.alias": sp.Deploy.Alias, "promote_alias": sp.PromoteAlias} {
		if !models.ValidName(alias) {
			v.Add(field, "%s", models.NameRule)
		}
	}
	if sp.Deploy.Alias == sp.PromoteAlias {
		v.Add("deploy.alias", "must differ from promote_alias: the new version is staged and evaluated before it is promoted")
	}
	targets := map[string]string{"deploy.target": sp.Deploy.Target}
	if sp.Deploy.PromoteTarget == "" {
		sp.Deploy.PromoteTarget = sp.Deploy.Target
	} else if sp.Deploy.PromoteTarget != sp.Deploy.Target {
		targets["deploy.promote_target"] = sp.Deploy.PromoteTarget
	}
	for field, name := range targets {
		if name == "" {
			v.Add(field, "is required: the serving target the new version is staged on")
			continue
		}
		if ok, err := s.targetExists(ctx, orgID, name); err != nil {
			return err
		} else if !ok {
			v.Add(field, "no serving target is named %q", name)
		}
	}

	// Rollout, checked as POST /api/models/ab-test would check it.
	if ro := sp.Rollout; ro != nil && s.Experiments != nil {
		_, err := s.Experiments.Create(ctx, audit.System, orgID, experiments.NewExperiment{Name: "policy check", Metrics: ro.Metrics,
			Guardrails: ro.Guardrails, Rollout: &ro.Rollout})
		var bad *errs.Invalid
		if !errors.As(err, &bad) {
			return fmt.Errorf("checking the rollout: %v", err)
		}
		for _, fe := range bad.Errors {
			switch {
			case strings.HasPrefix(fe.Field, "rollout."):
				v.Add(fe.Field, "%s", fe.Message)
			case strings.HasPrefix(fe.Field, "metrics"), strings.HasPrefix(fe.Field, "guardrails"):
				v.Add("rollout."+fe.Field, "%s", fe.Message)
			}
		}
	}

	if sp.Approval == "" {
		sp.Approval = ApproveNone
	}
	if !slices.Contains(Approvals, sp.Approval) {
		v.Add("approval", "must be none, before_deploy or before_rollout")
	}
	return v.Err()
}

// hyperparameters reads the training's settings, sent under Curate's
// names or the provider's own (n_epochs at OpenAI; epochCount at Bedrock,
// also when the policy names it anthropic).
func (s *Service) hyperparameters(t Training) (provider.Hyperparameters, map[string]string, []provider.FieldError) {
	return provider.ParseHyperparameters(t.Hyperparameters, s.FineTune.Providers[s.FineTune.Providers.Resolve(t.Provider)].Spelling)
}

// gate is the organisation's evaluation gate, if it set one.
func (s *Service) gate(ctx context.Context, orgID uuid.UUID) (eval.Gate, bool, error) {
	if s.Eval == nil {
		return eval.Gate{}, false, nil
	}
	return s.Eval.GetGate(ctx, orgID)
}

func (s *Service) targetExists(ctx context.Context, orgID uuid.UUID, name string) (bool, error) {
	if s.Models == nil || s.Models.Serving == nil {
		return true, nil
	}
	ts, err := s.Models.Serving.List(ctx, orgID)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Loop is a policy as the API shows it.
type Loop struct {
	ID uuid.UUID `json:"id"`
	Spec
	Status    string    `json:"status"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int32     `json:"version"`
	// LastRun is the newest run, if any.
	LastRun *RunSummary `json:"last_run"`
}

// RunSummary is a run as a list of loops shows it.
type RunSummary struct {
	ID        uuid.UUID `json:"id"`
	Number    int       `json:"number"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
}

func loopOf(p db.LoopPolicy) (Loop, error) {
	l := Loop{ID: p.ID, Status: p.Status, CreatedBy: p.CreatedByLabel, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: p.Version}
	if err := json.Unmarshal(p.Spec, &l.Spec); err != nil {
		return l, fmt.Errorf("loop %s: spec: %w", p.ID, err)
	}
	return l, nil
}

// Create stores a policy, active at once.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, sp Spec) (Loop, error) {
	if err := s.check(ctx, orgID, &sp); err != nil {
		return Loop{}, err
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Loop{}, err
	}
	var out Loop
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		p, err := q.LoopInsert(ctx, db.LoopInsertParams{OrgID: orgID, Name: sp.Name, RegisteredModel: sp.RegisteredModel, Spec: raw,
			MinNewItems: int32(*sp.Trigger.MinNewItems), Schedule: sp.Trigger.Schedule, CreatedByLabel: actor.Label})
		if errs.IsUnique(err, "loop_policies_org_id_name_key") {
			return errs.InvalidField("name", "a loop is already called %q", sp.Name)
		}
		if err != nil {
			return err
		}
		if out, err = loopOf(p); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.create", TargetType: "loop", TargetID: p.ID.String(),
			Details: map[string]any{"name": sp.Name, "registered_model": sp.RegisteredModel, "approval": sp.Approval}})
	})
	return out, err
}

// Update replaces a policy's settings; version is the version the caller
// saw (0: don't check). Runs under way go on with what they started with.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, version int32, sp Spec) (Loop, error) {
	if err := s.check(ctx, orgID, &sp); err != nil {
		return Loop{}, err
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Loop{}, err
	}
	var out Loop
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := q.LoopGetForUpdate(ctx, db.LoopGetForUpdateParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		if version != 0 && cur.Version != version {
			return &errs.Conflict{Message: "someone else changed this loop since you opened it: reload it and try again"}
		}
		p, err := q.LoopUpdate(ctx, db.LoopUpdateParams{OrgID: orgID, ID: id, Version: cur.Version, Name: sp.Name,
			RegisteredModel: sp.RegisteredModel, Spec: raw, MinNewItems: int32(*sp.Trigger.MinNewItems), Schedule: sp.Trigger.Schedule})
		if errs.IsUnique(err, "loop_policies_org_id_name_key") {
			return errs.InvalidField("name", "a loop is already called %q", sp.Name)
		}
		if err != nil {
			return err
		}
		if out, err = loopOf(p); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.update", TargetType: "loop", TargetID: id.String(),
			Details: map[string]any{"name": sp.Name, "version": p.Version}})
	})
	return out, err
}

// SetStatus pauses a loop (its trigger starts no run; a person still
// can) or makes it active again.
func (s *Service) SetStatus(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, status string) (Loop, error) {
	if status != StatusActive && status != StatusPaused {
		return Loop{}, errs.InvalidField("status", "must be active or paused")
	}
	var out Loop
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		p, err := q.LoopUpdateStatus(ctx, db.LoopUpdateStatusParams{OrgID: orgID, ID: id, Status: status})
		if err != nil {
			return errs.NotFound(err)
		}
		if out, err = loopOf(p); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.status", TargetType: "loop", TargetID: id.String(),
			Details: map[string]any{"status": status}})
	})
	return out, err
}

// Get returns a loop of the organisation.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Loop, error) {
	p, err := db.New(s.Pool).LoopGet(ctx, db.LoopGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Loop{}, errs.NotFound(err)
	}
	return loopOf(p)
}

// List returns the organisation's loops by name, each with its newest
// run.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Loop, error) {
	rows, err := db.New(s.Pool).LoopList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Loop, 0, len(rows))
	for _, r := range rows {
		l, err := loopOf(r.LoopPolicy)
		if err != nil {
			return nil, err
		}
		if r.LastRunID != uuid.Nil {
			l.LastRun = &RunSummary{ID: r.LastRunID, Number: int(r.LastNumber), Status: r.LastStatus, StartedAt: r.LastRunAt}
		}
		out = append(out, l)
	}
	return out, nil
}
