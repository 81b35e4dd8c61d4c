package local

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/curate/curate/internal/provider"
)

// Settings are the trainer settings that Curate's shared hyperparameters
// do not name. Zero fields leave the trainer's defaults (trainer/README.md);
// the field names in errors are config.json's.
type Settings struct {
	LoRAR                     int         `json:"lora_r,omitempty"`       // 1 … 256; trainer default 8
	LoRAAlpha                 int         `json:"lora_alpha,omitempty"`   // 1 … 1024; default 16
	LoRADropout               *float64    `json:"lora_dropout,omitempty"` // [0, 1); default 0.05
	TargetModules             []string    `json:"target_modules,omitempty"`
	LearningRate              float64     `json:"learning_rate,omitempty"` // (0, 1); default by method, scaled by the multiplier
	MaxLength                 int         `json:"max_length,omitempty"`    // 16 … 32768 tokens; default 1024
	GradientAccumulationSteps int         `json:"gradient_accumulation_steps,omitempty"`
	WarmupSteps               int         `json:"warmup_steps,omitempty"`
	SaveSteps                 int         `json:"save_steps,omitempty"`
	Dtype                     string      `json:"dtype,omitempty"` // auto, float32, bfloat16, float16
	IRS                       IRSSettings `json:"irs,omitzero"`
	// Policy configures the grpo and ppo methods.
	Policy PolicySettings `json:"policy,omitzero"`
	// RewardAPI is where a run with Policy.RLAIF gets its reward, given
	// by Curate when it starts the job; never stored.
	RewardAPI *RewardAPI `json:"-"`
}

// RewardAPI is Curate's reward API for one run: the URL of its POST
// /api/train/:id/rewards, written into config.json, and the key only that
// run holds, put in the trainer's environment as CURATE_REWARD_TOKEN.
type RewardAPI struct {
	URL   string
	Token string
}

// RLAIFSettings make a grpo or ppo run's reward the organisation's
// reward formula scored by Curate (internal/rlaif, seed 002's RLAIF): the
// fields of rlaif.Config, which Curate checks at launch, and the share of
// red-team prompts the prompt set must hold.
type RLAIFSettings struct {
	Judge             *RLAIFJudge     `json:"judge,omitempty"`
	Scorers           json.RawMessage `json:"scorers,omitempty"`
	RewardFormula     json.RawMessage `json:"reward_formula,omitempty"`
	ConflictThreshold float64         `json:"conflict_threshold,omitempty"`
	// RedTeamShare is the least share of the training prompts that carry
	// RedTeamTag (DefaultRedTeamShare when nil; 0 requires none).
	RedTeamShare *float64 `json:"red_team_share,omitempty"`
	RedTeamTag   string   `json:"red_team_tag,omitempty"` // DefaultRedTeamTag when empty
}

// RLAIFJudge names the teacher: a registered endpoint and a judge template.
type RLAIFJudge struct {
	Endpoint string `json:"endpoint"`
	Template string `json:"template,omitempty"`
}

// The RLAIF prompt set's defaults (seed 002): at least 40% red-team
// prompts, those tagged red_team.
const (
	DefaultRedTeamShare = 0.4
	DefaultRedTeamTag   = "red_team"
)

// Share is the red-team share required.
func (r RLAIFSettings) Share() float64 {
	if r.RedTeamShare == nil {
		return DefaultRedTeamShare
	}
	return *r.RedTeamShare
}

// Tag is the tag of the red-team prompts.
func (r RLAIFSettings) Tag() string {
	if r.RedTeamTag == "" {
		return DefaultRedTeamTag
	}
	return r.RedTeamTag
}

var tagPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// PolicySettings configure policy optimisation (methods "grpo" and
// "ppo"); zero fields leave the trainer's defaults (DefaultPolicy). The
// reward is Weights over the design's heuristic scores (rel, faith, conc)
// and, with RewardModel, the reward model's score (rm).
type PolicySettings struct {
	GroupSize       int                `json:"group_size,omitempty"`     // replies per prompt: grpo 2 … 64, ppo 1 … 64
	MaxNewTokens    int                `json:"max_new_tokens,omitempty"` // 1 … 8192
	ClipEpsilon     float64            `json:"clip_epsilon,omitempty"`   // (0, 1)
	KLCoef          *float64           `json:"kl_coef,omitempty"`        // [0, 10]; 0 turns the penalty off
	KLMax           float64            `json:"kl_max,omitempty"`         // (0, 100]: the KL that stops a run
	UpdatesPerBatch int                `json:"updates_per_batch,omitempty"`
	HoldoutEvery    int                `json:"holdout_every,omitempty"` // steps between held-out checks
	RewardModel     string             `json:"reward_model,omitempty"`  // a name in the models directory
	Weights         map[string]float64 `json:"weights,omitempty"`
	HoldoutWeights  map[string]float64 `json:"holdout_weights,omitempty"`
	// RLAIF, when set, makes the reward Curate's (the organisation's
	// reward formula); Weights must then be left out.
	RLAIF *RLAIFSettings `json:"rlaif,omitempty"`
}

// DefaultPolicy returns the trainer's policy defaults (trainer/README.md):
// 4 replies per prompt, 128 new tokens, clip 0.2, KL coefficient 0.04, a KL
// bound of 0.5, 2 updates per batch, a held-out check every 10 steps.
func DefaultPolicy() PolicySettings {
	kl := 0.04
	return PolicySettings{GroupSize: 4, MaxNewTokens: 128, ClipEpsilon: 0.2, KLCoef: &kl, KLMax: 0.5, UpdatesPerBatch: 2, HoldoutEvery: 10}
}

// IRSSettings configure iterative rejection sampling (method "irs"); zero
// fields take DefaultIRS's values.
type IRSSettings struct {
	NIterations  int        `json:"n_iterations"`
	NCandidates  int        `json:"n_candidates"`
	BatchSize    int        `json:"batch_size"`
	LearningRate float64    `json:"learning_rate"`
	MaxNewTokens int        `json:"max_new_tokens"`
	NQuestions   int        `json:"n_questions,omitempty"`  // 0: every prompt
	RewardModel  string     `json:"reward_model,omitempty"` // a name in the models directory (where a reward run's final/ is put)
	DW           DWSettings `json:"dw_config,omitzero"`
}

// DWSettings configure the dynamic weighting of IRS's scores.
type DWSettings struct {
	HistoryWindow  int                `json:"history_window"`
	Temperature    float64            `json:"temperature"`
	InitialWeights map[string]float64 `json:"initial_weights"`
}

// DefaultIRS returns the IRS settings of Curate's IRS design (three
// iterations of four candidates, batch 2, learning rate 2e-5, 256 new
// tokens, a history window of 5 at temperature 2.0, weights rel 1.0,
// faith 1.0, conc 0.5).
func DefaultIRS() IRSSettings {
	return IRSSettings{
		NIterations: 3, NCandidates: 4, BatchSize: 2, LearningRate: 2e-5, MaxNewTokens: 256,
		DW: DWSettings{HistoryWindow: 5, Temperature: 2.0, InitialWeights: map[string]float64{"rel": 1.0, "faith": 1.0, "conc": 0.5}},
	}
}

// defaultLearningRate is the trainer's learning rate for each method, which
// hyperparameters.learning_rate_multiplier scales.
var defaultLearningRate = map[string]float64{"sft": 2e-4, "dpo": 5e-5, "reward": 2e-5, "irs": 2e-5, "grpo": 1e-5, "ppo": 1e-5}

// defaultEpochs is the trainer's epochs for each method when none is given:
// the reward model's recipe runs 5 (and stops early when validation loss
// stalls), the others 1.
var defaultEpochs = map[string]int{"reward": 5}

// DefaultEpochs is how many epochs the trainer runs for a method when the
// job leaves epochs "auto".
func DefaultEpochs(m provider.Method) int {
	if n, ok := defaultEpochs[trainerMethod[m]]; ok {
		return n
	}
	return 1
}

// trainerMethod is the trainer's name for each method.
var trainerMethod = map[provider.Method]string{
	provider.Supervised: "sft",
	provider.DPO:        "dpo",
	Reward:              "reward",
	IRS:                 "irs",
	GRPO:                "grpo",
	PPO:                 "ppo",
}

// policyMethods sample from the policy and update it against a reward.
var policyMethods = map[string]bool{"grpo": true, "ppo": true}

var (
	dtypes     = []string{"auto", "float32", "bfloat16", "float16"}
	scoreTerms = []string{"rel", "faith", "conc", "rm"}
)

// check validates the settings against the trainer's ranges
// (trainer/curate_trainer/config.py).
func (s Settings) check() []provider.FieldError {
	var errs provider.FieldErrors
	add := errs.Add
	whole := errs.Whole
	h := "hyperparameters."
	whole(h+"lora_r", s.LoRAR, 1, 256)
	whole(h+"lora_alpha", s.LoRAAlpha, 1, 1024)
	whole(h+"max_length", s.MaxLength, 16, 32768)
	whole(h+"gradient_accumulation_steps", s.GradientAccumulationSteps, 1, 1024)
	whole(h+"warmup_steps", s.WarmupSteps, 0, 1_000_000)
	whole(h+"save_steps", s.SaveSteps, 0, 10_000_000)
	if d := s.LoRADropout; d != nil && (*d < 0 || *d >= 1 || math.IsNaN(*d)) {
		add(&provider.FieldError{Field: h + "lora_dropout", Message: "must be at least 0 and below 1"})
	}
	if lr := s.LearningRate; lr != 0 && (lr <= 0 || lr >= 1 || math.IsNaN(lr)) {
		add(&provider.FieldError{Field: h + "learning_rate", Message: "must be greater than 0 and below 1"})
	}
	if len(s.TargetModules) > 64 || slices.Contains(s.TargetModules, "") {
		add(&provider.FieldError{Field: h + "target_modules", Message: "must be 1 to 64 non-empty module names"})
	}
	if s.Dtype != "" && !slices.Contains(dtypes, s.Dtype) {
		add(&provider.FieldError{Field: h + "dtype", Message: "must be one of auto, float32, bfloat16, float16"})
	}
	errs = append(errs, s.IRS.check()...)
	return append(errs, s.Policy.check()...)
}

func (s PolicySettings) check() []provider.FieldError {
	var errs provider.FieldErrors
	add := errs.Add
	whole := errs.Whole
	p := "policy."
	whole(p+"group_size", s.GroupSize, 1, 64)
	whole(p+"max_new_tokens", s.MaxNewTokens, 1, 8192)
	whole(p+"updates_per_batch", s.UpdatesPerBatch, 1, 16)
	whole(p+"holdout_every", s.HoldoutEvery, 1, 1_000_000)
	if e := s.ClipEpsilon; e != 0 && (e <= 0 || e >= 1 || math.IsNaN(e)) {
		add(&provider.FieldError{Field: p + "clip_epsilon", Message: "must be greater than 0 and below 1"})
	}
	if k := s.KLCoef; k != nil && (*k < 0 || *k > 10 || math.IsNaN(*k)) {
		add(&provider.FieldError{Field: p + "kl_coef", Message: "must be from 0 to 10"})
	}
	if k := s.KLMax; k != 0 && (k <= 0 || k > 100 || math.IsNaN(k)) {
		add(&provider.FieldError{Field: p + "kl_max", Message: "must be greater than 0 and at most 100"})
	}
	for _, set := range []struct {
		name    string
		weights map[string]float64
	}{{"weights", s.Weights}, {"holdout_weights", s.HoldoutWeights}} {
		for k, w := range set.weights {
			field := p + set.name + "." + k
			switch {
			case !slices.Contains(scoreTerms, k):
				add(&provider.FieldError{Field: field, Message: "is not a score; use rel, faith, conc or rm"})
			case w < -100 || w > 100 || math.IsNaN(w):
				add(&provider.FieldError{Field: field, Message: "must be from -100 to 100"})
			case k == "rm" && s.RewardModel == "":
				add(&provider.FieldError{Field: field, Message: "needs policy.reward_model"})
			}
		}
	}
	if r := s.RLAIF; r != nil {
		if len(s.Weights) > 0 {
			add(&provider.FieldError{Field: p + "weights", Message: "leave it out with policy.rlaif: the reward is the organisation's reward formula, scored by Curate"})
		}
		if sh := r.RedTeamShare; sh != nil && (*sh < 0 || *sh > 1 || math.IsNaN(*sh)) {
			add(&provider.FieldError{Field: p + "rlaif.red_team_share", Message: "must be from 0 to 1"})
		}
		if r.RedTeamTag != "" && !tagPattern.MatchString(r.RedTeamTag) {
			add(&provider.FieldError{Field: p + "rlaif.red_team_tag", Message: "must be a tag: lower-case letters, digits, '_' or '-'"})
		}
	}
	return errs
}

func (s IRSSettings) check() []provider.FieldError {
	var errs provider.FieldErrors
	add := errs.Add
	whole := errs.Whole
	whole("irs.n_iterations", s.NIterations, 1, 50)
	whole("irs.n_candidates", s.NCandidates, 2, 16)
	whole("irs.batch_size", s.BatchSize, 1, 1024)
	whole("irs.max_new_tokens", s.MaxNewTokens, 1, 8192)
	whole("irs.n_questions", s.NQuestions, 1, 1_000_000)
	whole("irs.dw_config.history_window", s.DW.HistoryWindow, 2, 1000)
	if lr := s.LearningRate; lr != 0 && (lr <= 0 || lr >= 1 || math.IsNaN(lr)) {
		add(&provider.FieldError{Field: "irs.learning_rate", Message: "must be greater than 0 and below 1"})
	}
	if t := s.DW.Temperature; t != 0 && (t <= 0 || t > 1000 || math.IsNaN(t)) {
		add(&provider.FieldError{Field: "irs.dw_config.temperature", Message: "must be greater than 0 and at most 1000"})
	}
	for k, w := range s.DW.InitialWeights {
		field := "irs.dw_config.initial_weights." + k
		switch {
		case !slices.Contains(scoreTerms, k):
			add(&provider.FieldError{Field: field, Message: "is not a score; use rel, faith, conc or rm"})
		case w < -100 || w > 100 || math.IsNaN(w):
			add(&provider.FieldError{Field: field, Message: "must be from -100 to 100"})
		case k == "rm" && s.RewardModel == "":
			add(&provider.FieldError{Field: field, Message: "needs irs.reward_model"})
		}
	}
	return errs
}

// trainerConfig is config.json as the trainer reads it.
type trainerConfig struct {
	Method          string         `json:"method"`
	BaseModel       string         `json:"base_model"`
	TrainFile       string         `json:"train_file"`
	EvalFile        *string        `json:"eval_file"` // null: no evaluation
	Device          string         `json:"device"`
	RequireGPU      bool           `json:"require_gpu"`
	Seed            *int64         `json:"seed,omitempty"`
	JobID           string         `json:"job_id"`
	Hyperparameters map[string]any `json:"hyperparameters"`
	IRS             map[string]any `json:"irs,omitempty"`
	Policy          map[string]any `json:"policy,omitempty"`
}

// buildConfig maps a checked request and settings to config.json.
func (p *Provider) buildConfig(req provider.CreateRequest, s Settings, baseModel string) trainerConfig {
	method := trainerMethod[req.Method]
	c := trainerConfig{
		Method: method, BaseModel: baseModel, TrainFile: req.TrainFileID,
		Device: p.cfg.Device, RequireGPU: p.cfg.RequireGPU, Seed: req.Seed, JobID: req.CurateJobID,
		Hyperparameters: map[string]any{},
	}
	if req.ValidFileID != "" {
		c.EvalFile = &req.ValidFileID
	}
	hp := c.Hyperparameters
	if n, ok := req.Hyper.Epochs.Number(); ok {
		hp["epochs"] = int(n)
	}
	if n, ok := req.Hyper.BatchSize.Number(); ok {
		hp["batch_size"] = int(n)
	}
	if lr, set := learningRate(method, s, req.Hyper); set {
		hp["learning_rate"] = lr
	}
	if n, ok := req.Hyper.Beta.Number(); ok {
		hp["beta"] = n
	}
	if n, ok := req.Hyper.EarlyStoppingPatience.Number(); ok {
		hp["early_stopping_patience"] = int(n)
	}
	if n, ok := req.Hyper.EarlyStoppingThreshold.Number(); ok {
		hp["early_stopping_threshold"] = n
	}
	for key, v := range map[string]int{
		"lora_r": s.LoRAR, "lora_alpha": s.LoRAAlpha, "max_length": s.MaxLength,
		"gradient_accumulation_steps": s.GradientAccumulationSteps, "warmup_steps": s.WarmupSteps, "save_steps": s.SaveSteps,
	} {
		if v != 0 {
			hp[key] = v
		}
	}
	if s.LoRADropout != nil {
		hp["lora_dropout"] = *s.LoRADropout
	}
	if len(s.TargetModules) > 0 {
		hp["target_modules"] = s.TargetModules
	}
	if s.Dtype != "" {
		hp["dtype"] = s.Dtype
	}
	if method == "irs" {
		c.IRS = irsConfig(s.IRS)
	}
	if policyMethods[method] {
		c.Policy = policyConfig(s.Policy)
		if s.Policy.RLAIF != nil && s.RewardAPI != nil {
			c.Policy["rlaif"] = map[string]any{"url": s.RewardAPI.URL}
		}
	}
	return c
}

// policyConfig writes the policy settings that are set; the trainer fills
// the rest (its defaults are DefaultPolicy's).
func policyConfig(s PolicySettings) map[string]any {
	out := map[string]any{}
	for key, v := range map[string]int{"group_size": s.GroupSize, "max_new_tokens": s.MaxNewTokens,
		"updates_per_batch": s.UpdatesPerBatch, "holdout_every": s.HoldoutEvery} {
		if v != 0 {
			out[key] = v
		}
	}
	for key, v := range map[string]float64{"clip_epsilon": s.ClipEpsilon, "kl_max": s.KLMax} {
		if v != 0 {
			out[key] = v
		}
	}
	if s.KLCoef != nil {
		out["kl_coef"] = *s.KLCoef
	}
	if s.RewardModel != "" {
		out["reward_model"] = s.RewardModel
	}
	if len(s.Weights) > 0 {
		out["weights"] = s.Weights
	}
	if len(s.HoldoutWeights) > 0 {
		out["holdout_weights"] = s.HoldoutWeights
	}
	return out
}

// learningRate is the settings' learning rate (or the method's default)
// times the multiplier; set is false when both are left to the trainer.
func learningRate(method string, s Settings, h provider.Hyperparameters) (lr float64, set bool) {
	mult, multSet := h.LearningRateMultiplier.Number()
	switch {
	case s.LearningRate != 0 && multSet:
		return s.LearningRate * mult, true
	case s.LearningRate != 0:
		return s.LearningRate, true
	case multSet:
		return defaultLearningRate[method] * mult, true
	}
	return 0, false
}

// irsConfig writes every IRS setting, filling zero fields from DefaultIRS.
func irsConfig(s IRSSettings) map[string]any {
	d := DefaultIRS()
	pick := func(v, def int) int {
		if v != 0 {
			return v
		}
		return def
	}
	pickF := func(v, def float64) float64 {
		if v != 0 {
			return v
		}
		return def
	}
	weights := s.DW.InitialWeights
	if len(weights) == 0 {
		weights = d.DW.InitialWeights
	}
	out := map[string]any{
		"n_iterations":   pick(s.NIterations, d.NIterations),
		"n_candidates":   pick(s.NCandidates, d.NCandidates),
		"batch_size":     pick(s.BatchSize, d.BatchSize),
		"learning_rate":  pickF(s.LearningRate, d.LearningRate),
		"max_new_tokens": pick(s.MaxNewTokens, d.MaxNewTokens),
		"dw_config": map[string]any{
			"history_window":  pick(s.DW.HistoryWindow, d.DW.HistoryWindow),
			"temperature":     pickF(s.DW.Temperature, d.DW.Temperature),
			"initial_weights": weights,
		},
	}
	if s.NQuestions != 0 {
		out["n_questions"] = s.NQuestions
	}
	if s.RewardModel != "" {
		out["reward_model"] = s.RewardModel
	}
	return out
}

// describeLR is a learning rate as an error message shows it.
func describeLR(lr float64) string { return fmt.Sprintf("%g", lr) }
