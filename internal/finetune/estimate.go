package finetune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/tokens"
)

// Request is a launch as a form or the API asks for it.
type Request struct {
	VersionID uuid.UUID
	// DatasetID, without VersionID, trains the dataset's newest frozen
	// version; with it, VersionID must be one of the dataset's.
	DatasetID uuid.UUID
	Provider  string
	// BaseModel "" trains the dataset's base model, or else the
	// provider's default model. An alias ("gpt-4o-mini") trains the
	// provider's current snapshot of it (pricing.Snapshot).
	BaseModel string
	// RequestedModel is the alias BaseModel was resolved from, "" when
	// the request named a snapshot.
	RequestedModel string
	// Method "" is the dataset version's own: dpo for preference pairs,
	// supervised for single examples.
	Method provider.Method
	Hyper  provider.Hyperparameters
	Suffix string
	// RegisteredModel is the registered model the result joins when the
	// job succeeds; "" is the dataset's name.
	RegisteredModel string
	Seed            *int64
	// Local holds the local trainer's own settings (LoRA, learning rate,
	// IRS); only the local provider takes them.
	Local *local.Settings
	// NewestSuitable, without VersionID and DatasetID, trains the
	// organisation's newest frozen version that the method can train on
	// and that passed validation (the IRS design's POST /api/train names
	// no dataset); the job's events say which it chose.
	NewestSuitable bool
}

// Estimate is what a launch would train and cost, and what the budget
// leaves.
type Estimate struct {
	// Request is the request as it would launch: the dataset's version
	// and the base model filled in.
	Request        Request
	Version        Version
	Format         export.Format
	TrainExamples  int
	TokensPerEpoch int64 // tokens in the training file, by the base model's tokenizer
	Epochs         int
	EpochsAuto     bool // Epochs is the provider's choice for "auto"
	TrainedTokens  int64
	// Price is the organisation's price row the cost was worked out with
	// (zero for a free provider).
	Price  pricing.Price
	Cost   pricing.Micros
	Free   bool // the provider charges nothing (local training)
	Budget Budget
}

// Fits reports whether the estimate fits in what is left of the budget.
func (e Estimate) Fits() bool { return e.Cost <= e.Budget.Left() }

// suffixPattern keeps a model-name suffix usable at every provider.
var suffixPattern = regexp.MustCompile(`^[A-Za-z0-9]+([_-][A-Za-z0-9]+)*$`)

// maxSuffix leaves room in Bedrock's 63-character model names for the
// hyphen and the job id that follow the suffix.
const maxSuffix = 24

// Estimate checks a launch request and estimates its cost. Bad input is an
// *errs.Invalid naming each field.
func (s *Service) Estimate(ctx context.Context, orgID uuid.UUID, req Request) (Estimate, error) {
	v := &errs.Invalid{}
	var est Estimate
	req.Provider = s.Providers.Resolve(req.Provider)
	entry, known := s.Providers[req.Provider]
	if !known {
		v.Add("provider", "must be one of %v", s.Providers.Names())
	}
	src, err := s.source()
	if err != nil {
		return est, err
	}
	switch {
	case req.VersionID == uuid.Nil && req.DatasetID == uuid.Nil && req.NewestSuitable:
		est.Version, err = newestSuitable(ctx, src, orgID, req.Method)
		switch {
		case errors.Is(err, ErrNoFrozenVersion):
			v.Add("dataset_version_id", "none was sent, and the organisation has no frozen dataset version that passed validation "+
				"for %s training: freeze one (set a dataset's status to ready) or send dataset_version_id", req.Method)
		case err != nil:
			return est, err
		}
		req.VersionID = est.Version.ID
	case req.VersionID == uuid.Nil && req.DatasetID == uuid.Nil:
		v.Add("dataset_version_id", "choose a frozen dataset version")
	case req.VersionID == uuid.Nil:
		est.Version, err = src.Latest(ctx, orgID, req.DatasetID)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			v.Add("dataset_id", "no such dataset in this organisation")
		case errors.Is(err, ErrNoFrozenVersion):
			v.Add("dataset_id", "this dataset has no frozen version yet; set its status to ready to freeze one")
		case err != nil:
			return est, err
		case !est.Version.Valid:
			v.Add("dataset_id", "its latest version, %s, failed validation (%s); fix the dataset and freeze a new version", est.Version.Label, est.Version.Problem)
		}
		req.VersionID = est.Version.ID
	default:
		est.Version, err = src.Version(ctx, orgID, req.VersionID)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			v.Add("dataset_version_id", "no such dataset version in this organisation")
		case err != nil:
			return est, err
		case req.DatasetID != uuid.Nil && est.Version.DatasetID != req.DatasetID:
			v.Add("dataset_version_id", "is not a version of dataset_id; send one of them")
		case !est.Version.Valid:
			v.Add("dataset_version_id", "%s failed validation (%s); fix the dataset and freeze a new version", est.Version.Label, est.Version.Problem)
		}
	}
	if req.BaseModel == "" {
		req.BaseModel = est.Version.BaseModel
		if req.BaseModel == "" && known {
			req.BaseModel = entry.DefaultModel
		}
	}
	if snap, ok := pricing.Snapshot(req.Provider, req.BaseModel); ok && known {
		req.RequestedModel, req.BaseModel = req.BaseModel, snap
	}
	versionKnown := est.Version.ID != uuid.Nil
	if req.Method == "" && versionKnown {
		req.Method = provider.Supervised
		if est.Version.Kind == export.KindPreference {
			req.Method = provider.DPO
		}
	}
	est.Request = req
	methods := s.Providers.Methods()
	switch {
	case req.Method == "" && !versionKnown:
		// The dataset version's type would have decided it; its own
		// field says why there is none.
	case !slices.Contains(methods, req.Method):
		v.Add("method", "must be one of %s", quoteMethods(methods))
	case known:
		f, ok := entry.Formats[req.Method]
		switch {
		case !ok:
			v.Add("method", "%s offers no %s training", entry.Label, req.Method)
		case preferenceMethod(req.Method) && est.Version.Kind == export.KindSFT:
			v.Add("method", "%s trains on preference pairs, and %s holds single examples; choose supervised", req.Method, est.Version.Label)
		}
		est.Format = f
	}
	if req.Local != nil && known && req.Provider != local.Name {
		v.Add("local", "applies only to the local provider")
	}
	if req.RegisteredModel != "" && !models.ValidName(req.RegisteredModel) {
		v.Add("registered_model", "%s", models.NameRule)
	}
	if req.Suffix != "" && (len(req.Suffix) > maxSuffix || !suffixPattern.MatchString(req.Suffix)) {
		v.Add("suffix", "at most %d letters and digits, joined by single hyphens or underscores", maxSuffix)
	}
	switch {
	case req.Seed == nil:
	case known && entry.NoSeed:
		v.Add("seed", "%s takes no seed; leave it empty", entry.Label)
	case *req.Seed < 0 || *req.Seed > 2147483647:
		v.Add("seed", "must be from 0 to 2147483647")
	}
	var p provider.Provider
	if known {
		why, err := s.unavailable(ctx, req.Provider, req.Method)
		switch {
		case err != nil:
			return est, err
		case why != "" && req.Provider == local.Name:
			// Local jobs run on whichever worker takes them, not here.
			v.Add("provider", "%s cannot take this job: %s", entry.Label, lowerFirst(why))
		case why != "":
			v.Add("provider", "%s cannot be used here: %s", entry.Label, lowerFirst(why))
		default:
			if p, _, err = s.client(ctx, req.Provider); err != nil {
				return est, err
			}
		}
	}
	if p != nil {
		var ve *provider.ValidationError
		if err := validate(p, req); errors.As(err, &ve) {
			for _, fe := range ve.Errors {
				if fe.Field != "method" || (req.Method != "" && !hasField(v, "method")) {
					v.Add(localField(fe.Field), "%s", fe.Message)
				}
			}
		} else if err != nil {
			return est, err
		}
	}
	est.Free = known && entry.Free
	if known && !entry.Free && req.BaseModel != "" && !hasField(v, "base_model") {
		prices, err := s.PriceTable(ctx, orgID)
		if err != nil {
			return est, err
		}
		if est.Price, err = prices.Lookup(req.Provider, req.BaseModel); err != nil {
			v.Add("base_model", "%v; an administrator can add it on the prices page", err)
		}
	}
	if v.Has() {
		return est, v
	}

	c, err := s.count(ctx, orgID, src, req.VersionID, est.Format, tokens.ModelInfo(req.BaseModel).Encoding)
	if err != nil {
		return est, err
	}
	est.TrainExamples, est.TokensPerEpoch = c.examples, c.tokens
	if n, ok := req.Hyper.Epochs.Number(); ok {
		est.Epochs = int(n)
	} else {
		est.Epochs, est.EpochsAuto = entry.AutoEpochs(c.examples), true
		if n, ok := entry.MethodEpochs[req.Method]; ok {
			est.Epochs = n
		}
	}
	est.TrainedTokens = est.TokensPerEpoch * int64(est.Epochs)
	est.Cost = pricing.Cost(est.TrainedTokens, est.Price.PerMillion)
	est.Budget, err = s.budget(ctx, db.New(s.Pool), orgID)
	return est, err
}

// validate checks the launch at its provider; the local provider checks
// the job's own settings too.
func validate(p provider.Provider, req Request) error {
	if lp, ok := p.(*local.Provider); ok {
		var s local.Settings
		if req.Local != nil {
			s = *req.Local
		}
		return lp.ValidateWith(req.Method, req.BaseModel, req.Hyper, s)
	}
	return p.Validate(req.Method, req.BaseModel, req.Hyper)
}

// sharedFields are the hyperparameters every provider names; the local
// trainer's other "hyperparameters." settings, and its "irs." ones, come
// from Request.Local and are named after it ("local.lora_r").
var sharedFields = []string{provider.FieldEpochs, provider.FieldBatchSize, provider.FieldLearningRateMultiplier,
	provider.FieldBeta, provider.FieldEarlyStoppingThreshold, provider.FieldEarlyStoppingPatience}

func localField(field string) string {
	switch {
	case slices.Contains(sharedFields, field):
		return field
	case strings.HasPrefix(field, "hyperparameters."):
		return "local." + strings.TrimPrefix(field, "hyperparameters.")
	case strings.HasPrefix(field, "irs."), strings.HasPrefix(field, "policy."):
		return "local." + field
	}
	return field
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + strings.TrimSuffix(s[1:], ".")
}

// preferenceMethod reports whether a method trains on preference pairs.
func preferenceMethod(m provider.Method) bool { return m == provider.DPO || m == local.Reward }

// maxSuitableChecks bounds the versions newestSuitable validates: each is
// a report over its examples (cached once made).
const maxSuitableChecks = 20

// newestSuitable is the organisation's newest frozen version that method
// can train on (preference methods need pairs) and that passed
// validation, or ErrNoFrozenVersion.
func newestSuitable(ctx context.Context, src DataSource, orgID uuid.UUID, method provider.Method) (Version, error) {
	versions, err := src.Versions(ctx, orgID)
	if err != nil {
		return Version{}, err
	}
	checked := 0
	for _, v := range versions {
		if preferenceMethod(method) && v.Kind != export.KindPreference {
			continue
		}
		if checked++; checked > maxSuitableChecks {
			break
		}
		full, err := src.Version(ctx, orgID, v.ID)
		if err != nil {
			return Version{}, err
		}
		if full.Valid {
			return full, nil
		}
	}
	return Version{}, ErrNoFrozenVersion
}

func quoteMethods(ms []provider.Method) string {
	q := make([]string, len(ms))
	for i, m := range ms {
		q[i] = strconv.Quote(string(m))
	}
	return strings.Join(q, ", ")
}

func hasField(v *errs.Invalid, field string) bool {
	_, ok := v.ByField()[field]
	return ok
}

type countKey struct {
	version  uuid.UUID
	format   export.Format
	encoding string
}

type count struct {
	examples int
	tokens   int64
}

// maxCounts bounds the memory of counted versions; a frozen version's
// count never changes, so forgetting is the only reason to count again.
const maxCounts = 256

// count returns the training examples of a version in a format and their
// tokens, preparing the files in a scratch folder the first time.
func (s *Service) count(ctx context.Context, orgID uuid.UUID, src DataSource, versionID uuid.UUID, f export.Format, encoding string) (count, error) {
	key := countKey{versionID, f, encoding}
	s.mu.Lock()
	c, ok := s.counts[key]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	dir, err := s.scratch("estimate-")
	if err != nil {
		return c, err
	}
	defer os.RemoveAll(dir)
	prep, err := src.Prepare(ctx, orgID, versionID, f, dir)
	if err != nil {
		return c, fmt.Errorf("preparing the dataset version: %w", err)
	}
	counter, err := tokens.New(encoding)
	if err != nil {
		return c, err
	}
	n, toks, err := CountFile(ctx, counter, f, prep.TrainPath)
	if err != nil {
		return c, err
	}
	c = count{examples: n, tokens: toks}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil || len(s.counts) >= maxCounts {
		s.counts = map[countKey]count{}
	}
	s.counts[key] = c
	return c, nil
}

// CountFile counts the examples in a training file and the tokens a
// provider trains on per epoch: every message of each conversation, with
// the chat framing, and for a preference pair both replies.
func CountFile(ctx context.Context, counter *tokens.Counter, f export.Format, path string) (examples int, total int64, err error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer file.Close()
	msgs := func(system string, ms []export.Message) []tokens.Message {
		var out []tokens.Message
		if system != "" {
			out = append(out, tokens.Message{Role: export.RoleSystem, Content: system})
		}
		for _, m := range ms {
			out = append(out, tokens.Message{Role: m.Role, Content: m.Content})
		}
		return out
	}
	if f.KeepsRejected() {
		err = export.ReadPref(ctx, f, file, func(_ int, ex export.PrefExample) error {
			chosen := counter.CountMessages(msgs(ex.System, ex.SFT().Messages))
			rejected := counter.CountMessages([]tokens.Message{{Role: export.RoleAssistant, Content: ex.Rejected}})
			// The rejected reply shares the prompt and its priming.
			total += int64(chosen + rejected - tokens.ReplyPriming)
			examples++
			return nil
		})
	} else {
		err = export.ReadSFT(ctx, f, file, func(_ int, ex export.SFTExample) error {
			total += int64(counter.CountMessages(msgs(ex.System, ex.Messages)))
			examples++
			return nil
		})
	}
	return examples, total, err
}
