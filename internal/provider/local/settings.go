package local

import (
	"fmt"
	"math"
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
var defaultLearningRate = map[string]float64{"sft": 2e-4, "dpo": 5e-5, "reward": 1e-4, "irs": 2e-5}

// trainerMethod is the trainer's name for each method.
var trainerMethod = map[provider.Method]string{
	provider.Supervised: "sft",
	provider.DPO:        "dpo",
	Reward:              "reward",
	IRS:                 "irs",
}

var (
	dtypes     = []string{"auto", "float32", "bfloat16", "float16"}
	scoreTerms = []string{"rel", "faith", "conc", "rm"}
)

// check validates the settings against the trainer's ranges
// (trainer/curate_trainer/config.py).
func (s Settings) check() []provider.FieldError {
	var errs []provider.FieldError
	add := func(fe *provider.FieldError) {
		if fe != nil {
			errs = append(errs, *fe)
		}
	}
	whole := func(field string, v, lo, hi int) {
		if v != 0 {
			add(provider.Range{Min: float64(lo), Max: float64(hi), Integer: true}.Check(field, provider.Num(float64(v))))
		}
	}
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
	return append(errs, s.IRS.check()...)
}

func (s IRSSettings) check() []provider.FieldError {
	var errs []provider.FieldError
	add := func(fe *provider.FieldError) {
		if fe != nil {
			errs = append(errs, *fe)
		}
	}
	whole := func(field string, v, lo, hi int) {
		if v != 0 {
			add(provider.Range{Min: float64(lo), Max: float64(hi), Integer: true}.Check(field, provider.Num(float64(v))))
		}
	}
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
	return c
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
