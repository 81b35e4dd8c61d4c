package bedrock

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/curate/curate/internal/provider"
)

// Spelling is how Bedrock's API names the hyperparameters it takes.
var Spelling = provider.Spelling{
	provider.FieldEpochs:                 "epochCount",
	provider.FieldBatchSize:              "batchSize",
	provider.FieldLearningRateMultiplier: "learningRateMultiplier",
	provider.FieldEarlyStoppingThreshold: "earlyStoppingThreshold",
	provider.FieldEarlyStoppingPatience:  "earlyStoppingPatience",
}

// model is a base model Bedrock fine-tunes: the methods it takes and the
// range it documents for each hyperparameter it accepts, keyed by Curate's
// field name.
type model struct {
	methods []provider.Method
	params  map[string]provider.Range
}

// models lists the base models Curate fine-tunes at Bedrock, with the
// ranges from "Anthropic Claude 3 model customization hyperparameters" in
// the Bedrock user guide. Bedrock's FINE_TUNING customisation is supervised
// only; it offers no preference (DPO) training.
var models = map[string]model{
	"anthropic.claude-3-haiku-20240307-v1:0:200k": {
		methods: []provider.Method{provider.Supervised},
		params: map[string]provider.Range{
			provider.FieldEpochs:                 {Min: 1, Max: 10, Integer: true},
			provider.FieldBatchSize:              {Min: 4, Max: 256, Integer: true},
			provider.FieldLearningRateMultiplier: {Min: 0.1, Max: 2},
			provider.FieldEarlyStoppingThreshold: {Min: 0, Max: 0.1},
			provider.FieldEarlyStoppingPatience:  {Min: 1, Max: 10, Integer: true},
		},
	},
}

// modelID accepts a model id or its foundation-model ARN
// ("arn:aws:bedrock:us-east-1::foundation-model/<id>").
func modelID(baseModel string) string {
	if _, id, ok := strings.Cut(baseModel, ":foundation-model/"); ok {
		return id
	}
	return baseModel
}

// Validate checks the method against the base model and each
// hyperparameter against the model's documented range.
func (p *Provider) Validate(method provider.Method, baseModel string, h provider.Hyperparameters) error {
	return provider.Invalid(validate(method, baseModel, h))
}

func validate(method provider.Method, baseModel string, h provider.Hyperparameters) []provider.FieldError {
	var errs []provider.FieldError
	if method != provider.Supervised && method != provider.DPO {
		errs = append(errs, provider.FieldError{Field: "method", Message: `must be "supervised" or "dpo"`})
	}
	m, known := models[modelID(baseModel)]
	switch {
	case baseModel == "":
		return append(errs, provider.FieldError{Field: "base_model", Message: "is required"})
	case !known:
		return append(errs, provider.FieldError{Field: "base_model", Message: fmt.Sprintf("%s cannot be fine-tuned through Curate at Bedrock; use one of %s", baseModel, strings.Join(modelNames(), ", "))})
	case (method == provider.Supervised || method == provider.DPO) && !slices.Contains(m.methods, method):
		errs = append(errs, provider.FieldError{Field: "method", Message: fmt.Sprintf("Bedrock offers no %s training for %s", method, baseModel)})
	}
	for _, nv := range h.Each() {
		if rng, ok := m.params[nv.Field]; ok {
			if fe := rng.Check(nv.Field, nv.Value); fe != nil {
				errs = append(errs, *fe)
			}
		} else if !nv.Value.IsAuto() {
			errs = append(errs, provider.FieldError{Field: nv.Field, Message: fmt.Sprintf("%s at Bedrock has no such setting; leave it auto", modelID(baseModel))})
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

// hyperParameters renders the settings that are not auto under Bedrock's
// names, as the strings the API takes.
func hyperParameters(baseModel string, h provider.Hyperparameters) map[string]string {
	m := models[modelID(baseModel)]
	out := map[string]string{}
	for _, nv := range h.Each() {
		n, ok := nv.Value.Number()
		_, known := m.params[nv.Field]
		if !ok || !known {
			continue
		}
		// Plain decimals: no exponent for the service to misread.
		out[Spelling.Name(nv.Field)] = strconv.FormatFloat(n, 'f', -1, 64)
	}
	return out
}

// namePart is a suffix usable in a custom model name, whose pattern is
// ([0-9a-zA-Z][_-]?)+.
var namePart = regexp.MustCompile(`^[0-9A-Za-z]+([_-][0-9A-Za-z]+)*$`)

// maxNameLen is Bedrock's limit on job and custom model names.
const maxNameLen = 63

// checkCreate adds to Validate's checks those of the job's other fields.
func checkCreate(req provider.CreateRequest) error {
	errs := req.CheckCommon()
	errs = append(errs, validate(req.Method, req.BaseModel, req.Hyper)...)
	if req.Suffix != "" {
		switch {
		case !namePart.MatchString(req.Suffix):
			errs = append(errs, provider.FieldError{Field: "suffix", Message: "may hold only letters and digits joined by single hyphens or underscores"})
		case len(modelName(req)) > maxNameLen:
			errs = append(errs, provider.FieldError{Field: "suffix", Message: fmt.Sprintf("must be at most %d characters with this job id", maxNameLen-1-len(req.CurateJobID))})
		}
	}
	if req.Seed != nil {
		errs = append(errs, provider.FieldError{Field: "seed", Message: "Bedrock takes no seed; leave it empty"})
	}
	return provider.Invalid(errs)
}
