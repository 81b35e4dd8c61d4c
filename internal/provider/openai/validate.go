package openai

import (
	"fmt"
	"slices"
	"strings"

	"github.com/curate/curate/internal/provider"
)

// models lists the base models OpenAI fine-tunes and the methods each
// takes, from OpenAI's supervised fine-tuning and direct preference
// optimization guides.
var models = map[string][]provider.Method{
	"gpt-4.1-2025-04-14":      {provider.Supervised, provider.DPO},
	"gpt-4.1-mini-2025-04-14": {provider.Supervised, provider.DPO},
	"gpt-4.1-nano-2025-04-14": {provider.Supervised, provider.DPO},
	"gpt-4o-2024-08-06":       {provider.Supervised, provider.DPO},
	"gpt-4o-mini-2024-07-18":  {provider.Supervised, provider.DPO},
	"gpt-4o-mini":             {provider.Supervised},
	"gpt-3.5-turbo-0125":      {provider.Supervised},
	"gpt-3.5-turbo-1106":      {provider.Supervised},
	"gpt-3.5-turbo":           {provider.Supervised},
	"babbage-002":             {provider.Supervised},
	"davinci-002":             {provider.Supervised},
}

// The ranges in OpenAI's API reference (FineTuneSupervisedHyperparameters,
// FineTuneDPOHyperparameters).
var (
	epochsRange    = provider.Range{Min: 1, Max: 50, Integer: true}
	batchSizeRange = provider.Range{Min: 1, Max: 256, Integer: true}
	lrRange        = provider.Range{Min: 0, MinExclusive: true, NoMax: true}
	betaRange      = provider.Range{Min: 0, Max: 2, MinExclusive: true}
)

// Spelling is how OpenAI's API names the hyperparameters it takes.
var Spelling = provider.Spelling{
	provider.FieldEpochs:                 "n_epochs",
	provider.FieldBatchSize:              "batch_size",
	provider.FieldLearningRateMultiplier: "learning_rate_multiplier",
	provider.FieldBeta:                   "beta",
}

// Limits on the other job fields, from the same reference.
const (
	maxSuffixLen = 64
	maxSeed      = 2147483647
)

// baseOf returns the base model of a model name. A fine-tuned model
// ("ft:gpt-4o-mini-2024-07-18:org:suffix:id") can be tuned further and
// takes what its base takes.
func baseOf(model string) string {
	if rest, ok := strings.CutPrefix(model, "ft:"); ok {
		base, _, _ := strings.Cut(rest, ":")
		return base
	}
	return model
}

// Validate checks the method against the base model and each
// hyperparameter against OpenAI's documented range.
func (p *Provider) Validate(method provider.Method, baseModel string, h provider.Hyperparameters) error {
	return provider.Invalid(validate(method, baseModel, h))
}

func validate(method provider.Method, baseModel string, h provider.Hyperparameters) []provider.FieldError {
	var errs provider.FieldErrors
	add := errs.Add
	if method != provider.Supervised && method != provider.DPO {
		add(&provider.FieldError{Field: "method", Message: `must be "supervised" or "dpo"`})
	}
	switch methods, known := models[baseOf(baseModel)]; {
	case baseModel == "":
		add(&provider.FieldError{Field: "base_model", Message: "is required"})
	case !known:
		add(&provider.FieldError{Field: "base_model", Message: fmt.Sprintf("%s cannot be fine-tuned at OpenAI; use one of %s", baseModel, strings.Join(modelNames(), ", "))})
	case (method == provider.Supervised || method == provider.DPO) && !slices.Contains(methods, method):
		add(&provider.FieldError{Field: "method", Message: fmt.Sprintf("%s does not take %s training; models that do: %s", baseModel, method, strings.Join(modelsFor(method), ", "))})
	}

	add(epochsRange.Check(provider.FieldEpochs, h.Epochs))
	add(batchSizeRange.Check(provider.FieldBatchSize, h.BatchSize))
	add(lrRange.Check(provider.FieldLearningRateMultiplier, h.LearningRateMultiplier))
	if method == provider.DPO {
		add(betaRange.Check(provider.FieldBeta, h.Beta))
	} else if !h.Beta.IsAuto() {
		add(&provider.FieldError{Field: provider.FieldBeta, Message: "applies only to the dpo method; leave it auto"})
	}
	for _, nv := range []provider.NamedValue{
		{Field: provider.FieldEarlyStoppingThreshold, Value: h.EarlyStoppingThreshold},
		{Field: provider.FieldEarlyStoppingPatience, Value: h.EarlyStoppingPatience},
	} {
		if !nv.Value.IsAuto() {
			add(&provider.FieldError{Field: nv.Field, Message: "OpenAI has no early stopping setting; leave it auto"})
		}
	}
	return errs
}

func modelNames() []string {
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func modelsFor(m provider.Method) []string {
	var names []string
	for _, name := range modelNames() {
		if slices.Contains(models[name], m) {
			names = append(names, name)
		}
	}
	return names
}

// checkCreate adds to Validate's checks those of the job's other fields.
func checkCreate(req provider.CreateRequest) error {
	errs := req.CheckCommon()
	errs = append(errs, validate(req.Method, req.BaseModel, req.Hyper)...)
	if len(req.Suffix) > maxSuffixLen {
		errs = append(errs, provider.FieldError{Field: "suffix", Message: fmt.Sprintf("must be at most %d characters", maxSuffixLen)})
	}
	if req.Seed != nil && (*req.Seed < 0 || *req.Seed > maxSeed) {
		errs = append(errs, provider.FieldError{Field: "seed", Message: fmt.Sprintf("must be from 0 to %d", maxSeed)})
	}
	return provider.Invalid(errs)
}
