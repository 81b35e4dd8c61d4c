package local

import (
	"github.com/curate/curate/internal/provider"
)

// The ranges of trainer/curate_trainer/config.py.
var (
	epochsRange    = provider.Range{Min: 1, Max: 100, Integer: true}
	batchSizeRange = provider.Range{Min: 1, Max: 1024, Integer: true}
	lrMultRange    = provider.Range{Min: 0, MinExclusive: true, NoMax: true}
	betaRange      = provider.Range{Min: 0, Max: 10, MinExclusive: true}
	patienceRange  = provider.Range{Min: 0, Max: 1000, Integer: true}
	thresholdRange = provider.Range{Min: 0, Max: 1e6}
)

// maxSeed is the trainer's largest seed.
const maxSeed = 1<<32 - 1

// preferenceMethods train on preference pairs only.
var preferenceMethods = map[string]bool{"dpo": true, "reward": true}

// Validate checks the method, that the base model names a model directory
// in the models directory, and each hyperparameter against the trainer's
// range.
func (p *Provider) Validate(method provider.Method, baseModel string, h provider.Hyperparameters) error {
	return provider.Invalid(p.validate(method, baseModel, h, p.cfg.Settings))
}

// ValidateWith is Validate with a job's own settings in place of the
// configured ones, as CreateWith takes them.
func (p *Provider) ValidateWith(method provider.Method, baseModel string, h provider.Hyperparameters, s Settings) error {
	return provider.Invalid(p.validate(method, baseModel, h, s))
}

func (p *Provider) validate(method provider.Method, baseModel string, h provider.Hyperparameters, s Settings) []provider.FieldError {
	var errs provider.FieldErrors
	add := errs.Add
	name, known := trainerMethod[method]
	if !known {
		add(&provider.FieldError{Field: "method", Message: `must be "supervised", "dpo", "reward", "irs", "grpo" or "ppo"`})
	}
	_, fe := p.modelPath("base_model", baseModel)
	add(fe)
	if s.IRS.RewardModel != "" {
		_, fe := p.modelPath("irs.reward_model", s.IRS.RewardModel)
		add(fe)
	}
	if s.Policy.RewardModel != "" {
		_, fe := p.modelPath("policy.reward_model", s.Policy.RewardModel)
		add(fe)
	}
	if method == GRPO && s.Policy.GroupSize == 1 {
		add(&provider.FieldError{Field: "policy.group_size", Message: "must be at least 2 for grpo: advantages are measured within each prompt's group"})
	}
	add(epochsRange.Check(provider.FieldEpochs, h.Epochs))
	add(batchSizeRange.Check(provider.FieldBatchSize, h.BatchSize))
	if fe := lrMultRange.Check(provider.FieldLearningRateMultiplier, h.LearningRateMultiplier); fe != nil {
		add(fe)
	} else if lr, set := learningRate(name, s, h); known && set && lr >= 1 {
		add(&provider.FieldError{Field: provider.FieldLearningRateMultiplier, Message: "gives a learning rate of " + describeLR(lr) + "; it must stay below 1"})
	}
	if method == provider.DPO {
		add(betaRange.Check(provider.FieldBeta, h.Beta))
	} else if !h.Beta.IsAuto() {
		add(&provider.FieldError{Field: provider.FieldBeta, Message: "applies only to the dpo method; leave it auto"})
	}
	if method == Reward {
		// The reward model stops when validation loss has not improved for
		// patience epochs (the trainer's default 2), keeping the best epoch.
		add(patienceRange.Check(provider.FieldEarlyStoppingPatience, h.EarlyStoppingPatience))
		add(thresholdRange.Check(provider.FieldEarlyStoppingThreshold, h.EarlyStoppingThreshold))
	} else {
		for _, nv := range []provider.NamedValue{
			{Field: provider.FieldEarlyStoppingThreshold, Value: h.EarlyStoppingThreshold},
			{Field: provider.FieldEarlyStoppingPatience, Value: h.EarlyStoppingPatience},
		} {
			if !nv.Value.IsAuto() {
				add(&provider.FieldError{Field: nv.Field, Message: "the local trainer stops early only for the reward method; leave it auto"})
			}
		}
	}
	return append(errs, s.check()...)
}

// checkCreate adds to Validate's checks those of the job's files: they
// must be this job's upload, in a format the method trains on.
func (p *Provider) checkCreate(req provider.CreateRequest, s Settings) error {
	errs := req.CheckCommon()
	errs = append(errs, p.validate(req.Method, req.BaseModel, req.Hyper, s)...)
	if provider.CheckCurateJobID(req.CurateJobID) != nil {
		return provider.Invalid(errs)
	}
	r := p.run(req.CurateJobID)
	if req.TrainFileID != "" && req.TrainFileID != r.path(trainFile) {
		errs = append(errs, provider.FieldError{Field: "train_file_id", Message: "is not this job's upload; upload the files for job " + req.CurateJobID + " first"})
	}
	if req.ValidFileID != "" && req.ValidFileID != r.path(evalFile) {
		errs = append(errs, provider.FieldError{Field: "valid_file_id", Message: "is not this job's upload"})
	}
	if req.Seed != nil && (*req.Seed < 0 || *req.Seed > maxSeed) {
		errs = append(errs, provider.FieldError{Field: "seed", Message: "must be from 0 to 4294967295"})
	}
	if up, err := r.readUpload(); err == nil {
		if preferenceMethods[trainerMethod[req.Method]] && up.Format != "trl_preference" {
			errs = append(errs, provider.FieldError{Field: "method", Message: string(req.Method) + " trains on preference pairs, but the dataset was exported as " + up.Format + "; export it as trl_preference"})
		}
	} else if req.TrainFileID != "" {
		errs = append(errs, provider.FieldError{Field: "train_file_id", Message: "has no upload record: " + err.Error()})
	}
	return provider.Invalid(errs)
}
