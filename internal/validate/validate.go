package validate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/tokens"
)

// PIIDetector returns the kinds of personal data found in text ("email",
// "phone", ...), or none. It is supplied by the caller.
type PIIDetector func(text string) []string

// Options configure a validation run.
type Options struct {
	Format    export.Format
	BaseModel string
	// MinExamples is the fewest examples the format accepts; 0 means the
	// format's own minimum (10 for the OpenAI formats, 1 otherwise).
	MinExamples int
	// ContextLimit overrides the base model's training context; 0 means use
	// tokens.ModelInfo(BaseModel).
	ContextLimit int
	// Epochs is the planned number of epochs; 0 means the cookbook default.
	Epochs int
	// MaxSamples is how many findings to keep per code; 0 means 20.
	MaxSamples int
	// PIIDetector, when set, is run on every example's text.
	PIIDetector PIIDetector
	// Counter, when set, is used instead of building one for the base
	// model's encoding (building one takes a noticeable fraction of a
	// second, so callers validating often should keep one).
	Counter *tokens.Counter
}

// openAIMinExamples is the minimum OpenAI's fine-tuning API accepts.
const openAIMinExamples = 10

// Validator accumulates findings over a stream of examples. It is not safe
// for concurrent use.
type Validator struct {
	opts         Options
	counter      *tokens.Counter
	contextLimit int

	n         int
	found     *tally
	tokens    []int
	assistant []int
	billable  int
	dups      *dedup
}

// tally holds the findings so far: a summary per code and the worst
// severity per example.
type tally struct {
	codes      map[string]*CodeSummary
	severity   []Severity // "" when the example is clean
	maxSamples int
}

func (t *tally) add(sev Severity, code string, example int, msg string) {
	s := t.codes[code]
	if s == nil {
		s = &CodeSummary{Code: code, Severity: sev}
		t.codes[code] = s
	}
	s.Count++
	if len(s.Samples) < t.maxSamples {
		s.Samples = append(s.Samples, Finding{Severity: sev, Code: code, Example: example, Message: msg})
	}
	if example >= 0 && t.severity[example] != Error {
		t.severity[example] = sev
	}
}

func (t *tally) clone() *tally {
	c := &tally{codes: map[string]*CodeSummary{}, severity: slices.Clone(t.severity), maxSamples: t.maxSamples}
	for k, s := range t.codes {
		cs := *s
		cs.Samples = slices.Clone(s.Samples)
		c.codes[k] = &cs
	}
	return c
}

// New returns a validator for opts.
func New(opts Options) (*Validator, error) {
	if _, err := export.ParseFormat(string(opts.Format)); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	model := tokens.ModelInfo(opts.BaseModel)
	counter := opts.Counter
	if counter == nil {
		var err error
		if counter, err = tokens.New(model.Encoding); err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
	}
	limit := opts.ContextLimit
	if limit == 0 {
		limit = model.TrainingContext
	}
	maxSamples := opts.MaxSamples
	if maxSamples <= 0 {
		maxSamples = 20
	}
	return &Validator{
		opts:         opts,
		counter:      counter,
		contextLimit: limit,
		found:        &tally{codes: map[string]*CodeSummary{}, maxSamples: maxSamples},
		dups:         newDedup(),
	}, nil
}

// AddSFT checks one SFT example.
func (v *Validator) AddSFT(ex export.SFTExample) { v.AddFacts(v.SFTFacts(ex)) }

// AddPref checks one preference pair.
func (v *Validator) AddPref(p export.PrefExample) { v.AddFacts(v.PrefFacts(p)) }

// SFTFacts checks one SFT example alone, adding nothing to the report.
func (v *Validator) SFTFacts(ex export.SFTExample) Facts {
	if !v.opts.Format.Accepts(export.KindSFT) {
		var fa Facts
		fa.add(Error, CodeWrongKind, fmt.Sprintf("%s holds preference pairs; an SFT example has no rejected reply", v.opts.Format))
		return fa
	}
	return v.sftFacts(ex)
}

// PrefFacts checks one preference pair alone, adding nothing to the
// report. For formats that keep only the chosen reply it checks the chosen
// conversation, which is what will be written.
func (v *Validator) PrefFacts(p export.PrefExample) Facts {
	if !v.opts.Format.KeepsRejected() {
		return v.sftFacts(p.SFT())
	}
	return v.prefFacts(p)
}

// AddFacts adds the next example by its facts (from SFTFacts or PrefFacts
// of a validator with the same Profile) and runs the checks that compare
// it with the examples before it or with the base model's context.
func (v *Validator) AddFacts(fa Facts) {
	i := v.next()
	for _, f := range fa.Findings {
		v.add(f.Severity, f.Code, i, f.Message)
	}
	v.tokens = append(v.tokens, fa.Tokens)
	v.assistant = append(v.assistant, fa.Assistant)
	longest := 0
	for _, n := range fa.Sequences {
		v.billable += v.capped(n)
		longest = max(longest, n)
	}
	if len(fa.Sequences) > 0 {
		v.checkContext(i, longest)
	}
	if fa.HasText {
		v.checkDuplicates(i, &fa)
	}
}

func (v *Validator) next() int {
	i := v.n
	v.n++
	v.found.severity = append(v.found.severity, "")
	return i
}

func (v *Validator) add(sev Severity, code string, example int, msg string) {
	v.found.add(sev, code, example, msg)
}

// Report summarises everything added so far. It may be called more than
// once; later calls include examples added since.
func (v *Validator) Report() *Report {
	// Checks over the whole dataset go into a copy of the tally, so calling
	// Report again does not count them twice.
	found := v.found.clone()

	r := &Report{
		Format:              v.opts.Format,
		BaseModel:           v.opts.BaseModel,
		Encoding:            v.counter.Encoding(),
		ContextLimit:        v.contextLimit,
		Examples:            v.n,
		ExampleTokens:       slices.Clone(v.tokens),
		QualityFormula:      qualityFormula,
		DuplicateMethod:     duplicateMethod,
		NearDuplicateMethod: nearDuplicateMethod,
		OutlierMethod:       outlierMethod,
	}
	if least := v.minExamples(); v.n < least {
		found.add(Error, CodeTooFewExamples, -1, fmt.Sprintf("%d examples; %s needs at least %d", v.n, v.opts.Format, least))
	}
	for _, o := range lengthOutliers(v.tokens) {
		found.add(Warning, CodeLengthOutlier, o.index, fmt.Sprintf("%d tokens, far from the median of %g", v.tokens[o.index], o.median))
	}

	for _, s := range found.codes {
		r.Findings = append(r.Findings, *s)
		if s.Severity == Error {
			r.Errors += s.Count
		} else {
			r.Warnings += s.Count
		}
	}
	slices.SortFunc(r.Findings, func(a, b CodeSummary) int {
		if a.Severity != b.Severity {
			if a.Severity == Error {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Code, b.Code)
	})
	for _, s := range found.severity {
		switch s {
		case Error:
			r.ExamplesWithErrors++
		case Warning:
			r.ExamplesWithWarnings++
		}
	}
	for _, t := range v.tokens {
		r.TotalTokens += t
	}
	r.Tokens = distribution(v.tokens)
	r.AssistantTokens = distribution(v.assistant)
	r.BillableTokens = v.billable
	r.Epochs = v.opts.Epochs
	if r.Epochs <= 0 {
		r.Epochs = defaultEpochs(v.n)
	}
	r.EstimatedBilledTokens = r.BillableTokens * r.Epochs
	if v.n > 0 {
		r.QualityScore = 1 - (float64(r.ExamplesWithErrors)+0.5*float64(r.ExamplesWithWarnings))/float64(v.n)
	}
	return r
}

func (v *Validator) minExamples() int {
	if v.opts.MinExamples > 0 {
		return v.opts.MinExamples
	}
	if v.opts.Format == export.OpenAIChat || v.opts.Format == export.OpenAIPreference {
		return openAIMinExamples
	}
	return 1
}

// The cookbook's default-epoch rule: aim for 3 epochs, but at least 100 and
// at most 25,000 example passes, with 1 to 25 epochs.
const (
	targetEpochs      = 3
	minTargetExamples = 100
	maxTargetExamples = 25000
	minDefaultEpochs  = 1
	maxDefaultEpochs  = 25
)

func defaultEpochs(n int) int {
	switch {
	case n == 0:
		return targetEpochs
	case n*targetEpochs < minTargetExamples:
		return min(maxDefaultEpochs, minTargetExamples/n)
	case n*targetEpochs > maxTargetExamples:
		return max(minDefaultEpochs, maxTargetExamples/n)
	}
	return targetEpochs
}

// describe shortens text for a finding message.
func describe(s string) string {
	const max = 60
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
