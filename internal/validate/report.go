// Package validate checks a dataset before export against the rules of its
// target format and reports what it finds, so a curator can fix problems
// before paying for a training run.
//
// Examples are fed one at a time (AddSFT, AddPref) and Report summarises
// them. Checking an example alone (SFTFacts, PrefFacts) is kept apart from
// the checks across examples and against the base model's context
// (AddFacts), so the costly part, counting tokens, can be stored per
// example and added again to any later report in the same Profile. The validator keeps about 60 bytes per example (token counts,
// severity, a truncated hash for exact duplicates) plus a near-duplicate
// index capped at 100,000 examples (about 60 MB), so large datasets
// validate without being loaded whole.
//
// Each finding has a severity. Errors block export (Report.Blocking);
// warnings are shown but do not. Per code the report keeps a few sample
// findings and counts them all.
//
// Rules per format:
//   - openai_chat: roles system/user/assistant; every message has non-empty
//     content; the last message is the assistant's; at least 10 examples.
//     OpenAI's "no unknown keys" rule is enforced when a file is read
//     (export.ReadSFT decodes strictly); typed examples cannot carry any.
//   - openai_preference: the prompt is one turn (exactly one user message,
//     optionally after a system prompt); chosen and rejected are non-empty;
//     at least 10 examples.
//   - bedrock_chat: the first message is the user's, roles alternate
//     user/assistant, the last is the assistant's, no system message inside
//     the conversation (it goes in "system").
//   - every format: the example fits the line shape the writer needs
//     (export.Format.CheckSFT/CheckPref), token counts, the base model's
//     training context, empty or whitespace-only replies, chosen equal to
//     rejected, exact and near duplicates, length outliers, and PII when a
//     detector is supplied.
package validate

import (
	"github.com/curate/curate/internal/export"
)

// Revision numbers the rules below. Reports of frozen versions are stored
// and reused; raise it whenever a rule, a limit or a method changes, so
// that stored reports are computed again under the new rules.
const Revision = 1

// Severity says whether a finding blocks export.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Finding codes. The severity of each is fixed and listed beside it.
const (
	CodeTooFewExamples       = "too_few_examples"       // error; dataset-level (example -1)
	CodeWrongKind            = "wrong_kind"             // error: SFT example for a preference-only format
	CodeInvalidRole          = "invalid_role"           // error
	CodeEmptyContent         = "empty_content"          // error: an empty or whitespace-only prompt message
	CodeLastNotAssistant     = "last_not_assistant"     // error
	CodeNoUserMessage        = "no_user_message"        // warning
	CodeNotOneTurn           = "not_one_turn"           // error (openai_preference)
	CodePromptNotUserLast    = "prompt_not_user_last"   // error (preference formats)
	CodeFirstNotUser         = "first_not_user"         // error (bedrock_chat)
	CodeRolesNotAlternating  = "roles_not_alternating"  // error (bedrock_chat)
	CodeUnwritable           = "unwritable"             // error: the format's writer cannot hold the example
	CodeOverContext          = "over_context"           // error
	CodeEmptyResponse        = "empty_response"         // error
	CodeChosenEqualsRejected = "chosen_equals_rejected" // error
	CodeDuplicate            = "duplicate"              // warning
	CodeNearDuplicate        = "near_duplicate"         // warning
	CodeLengthOutlier        = "length_outlier"         // warning
	CodePII                  = "pii"                    // warning
)

// Finding is one problem found.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	// Example is the 0-based index of the example in the order it was
	// added, or -1 for a finding about the whole dataset.
	Example int    `json:"example"`
	Message string `json:"message"`
}

// CodeSummary counts the findings of one code and keeps the first few.
type CodeSummary struct {
	Code     string    `json:"code"`
	Severity Severity  `json:"severity"`
	Count    int       `json:"count"`
	Samples  []Finding `json:"samples"`
}

// Distribution summarises per-example values the way the OpenAI cookbook's
// data-preparation notebook prints them. Percentiles interpolate linearly
// between the two nearest ranks (numpy's default).
type Distribution struct {
	Min    int     `json:"min"`
	Max    int     `json:"max"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P5     float64 `json:"p5"`
	P95    float64 `json:"p95"`
}

// Report is the outcome of validating a dataset for one format.
type Report struct {
	Format    export.Format `json:"format"`
	BaseModel string        `json:"base_model"`
	Encoding  string        `json:"encoding"`
	// ContextLimit is the training context checked against; 0 when unknown
	// (then no example is reported over it).
	ContextLimit int `json:"context_limit"`

	Examples             int `json:"examples"`
	ExamplesWithErrors   int `json:"examples_with_errors"`
	ExamplesWithWarnings int `json:"examples_with_warnings"` // warnings but no errors
	Errors               int `json:"errors"`
	Warnings             int `json:"warnings"`
	// Findings lists one summary per code found: errors first, then by code.
	Findings []CodeSummary `json:"findings"`

	// TotalTokens sums every example's tokens. An SFT example is one
	// sequence; a preference pair is two (prompt with chosen, prompt with
	// rejected), both of which the trainer processes.
	TotalTokens     int          `json:"total_tokens"`
	Tokens          Distribution `json:"tokens"`
	AssistantTokens Distribution `json:"assistant_tokens"`
	// ExampleTokens holds each example's tokens in input order, for callers
	// that chart them; it is left out of the JSON form, so a stored report
	// read back has none.
	ExampleTokens []int `json:"-"`

	// BillableTokens sums each sequence's tokens, capped at ContextLimit
	// because the excess is truncated, as the cookbook does.
	BillableTokens int `json:"billable_tokens"`
	// Epochs is Options.Epochs, or the cookbook's default for this many
	// examples when that was 0.
	Epochs                int `json:"epochs"`
	EstimatedBilledTokens int `json:"estimated_billed_tokens"` // BillableTokens × Epochs

	QualityScore   float64 `json:"quality_score"`
	QualityFormula string  `json:"quality_formula"`
	// Methods states how the statistical checks decide, for the report page.
	DuplicateMethod     string `json:"duplicate_method"`
	NearDuplicateMethod string `json:"near_duplicate_method"`
	OutlierMethod       string `json:"outlier_method"`
}

// Blocking reports whether any error was found; errors block export.
func (r *Report) Blocking() bool { return r.Errors > 0 }

// Count returns how many findings of code were found.
func (r *Report) Count(code string) int {
	for _, s := range r.Findings {
		if s.Code == code {
			return s.Count
		}
	}
	return 0
}

// Human-readable statements of the rules, shown with the report.
const (
	qualityFormula      = "1 - (examples_with_errors + 0.5 * examples_with_only_warnings) / examples (0 when there are no examples)"
	duplicateMethod     = "SHA-256 of the example's text after Unicode NFKC normalisation, lower-casing and collapsing whitespace; later copies are flagged"
	nearDuplicateMethod = "MinHash (64 hashes) over word 3-grams with LSH banding (8 bands of 8); flagged when the estimated Jaccard similarity to an earlier example is at least 0.9; the index holds the first 100000 distinct examples"
	outlierMethod       = "token count farther than 3 robust standard deviations from the median, where the robust deviation is 1.4826 x the median absolute deviation (1.2533 x the mean absolute deviation when the MAD is 0); needs at least 5 examples"
)
