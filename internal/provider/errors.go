package provider

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/curate/curate/internal/outbound"
)

// FieldError is one refused field, named as Curate's forms and API name it
// (e.g. "hyperparameters.beta").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every refused field of a request.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Describe is the sentence a page shows: Curate's own words, field by field.
func (e *ValidationError) Describe() string {
	return "The request was refused: " + sentence(strings.TrimPrefix(e.Error(), "invalid request: "))
}

// Invalid returns a *ValidationError holding errs, or nil when errs is
// empty, so a validator can end with `return provider.Invalid(errs)`.
func Invalid(errs []FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// Error is a request the provider answered with an error.
type Error struct {
	Provider   string // "openai", "bedrock"
	Op         string // what Curate was doing, e.g. "create job"
	StatusCode int    // HTTP status, 0 when none came back
	Code       string // the provider's error code or type, when given
	Message    string // the provider's own explanation
	// Permanent is true when asking again cannot help: the request was
	// refused as it stands (bad input, unknown id, missing permission).
	// Rate limits and server errors are not permanent.
	Permanent bool
	Err       error // the SDK's error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Provider, e.Op)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": %d", e.StatusCode)
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	} else if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Describe is the sentence a page shows for the failure (outbound.Describe
// finds it): what Curate asked the provider and why it failed. A refusal
// keeps the provider's explanation, which its API writes for people; a
// failure without an answer is worded by outbound.Describe, and the SDK's
// text stays in the log.
func (e *Error) Describe() string {
	switch {
	case e.StatusCode != 0 && e.Permanent && e.Message != "":
		return fmt.Sprintf("The provider refused to %s: %s", e.Op, sentence(e.Message))
	case e.StatusCode != 0:
		return fmt.Sprintf("The provider could not %s: it answered %d %s.", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
	case e.Err != nil:
		return fmt.Sprintf("Curate could not %s at the provider. %s", e.Op, outbound.Describe(e.Err))
	case e.Message != "":
		// A failure reported in words without an HTTP error: a training
		// file the provider could not process, files that changed.
		return fmt.Sprintf("Could not %s: %s", e.Op, sentence(e.Message))
	}
	return fmt.Sprintf("Could not %s.", e.Op)
}

// sentence ends s with a full stop unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// PermanentStatus reports whether an HTTP status means the same request
// will fail again: any 4xx but timeout (408), conflict (409, which some
// services use for "still in progress") and rate limit (429).
func PermanentStatus(code int) bool {
	return code >= 400 && code < 500 && code != 408 && code != 409 && code != 429
}

// IsPermanent reports whether err will recur if the same step is retried:
// a validation error or a provider error marked permanent. A worker stops
// retrying on these.
func IsPermanent(err error) bool {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return true
	}
	var pe *Error
	return errors.As(err, &pe) && pe.Permanent
}

// jobIDPattern keeps Curate job ids usable inside every provider's names,
// idempotency tokens and object keys: letters and digits in groups joined by
// single hyphens, as a UUID is.
var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)

// MaxCurateJobIDLen leaves room for a prefix within the providers' 63
// character name limits.
const MaxCurateJobIDLen = 40

// CheckCurateJobID returns a FieldError for "curate_job_id" when id cannot
// name things at a provider, or nil.
func CheckCurateJobID(id string) *FieldError {
	switch {
	case id == "":
		return &FieldError{Field: "curate_job_id", Message: "is required"}
	case len(id) > MaxCurateJobIDLen:
		return &FieldError{Field: "curate_job_id", Message: fmt.Sprintf("must be at most %d characters", MaxCurateJobIDLen)}
	case !jobIDPattern.MatchString(id):
		return &FieldError{Field: "curate_job_id", Message: "may hold only letters and digits joined by single hyphens"}
	}
	return nil
}

// FieldErrors gathers the refusals of one check, field by field.
type FieldErrors []FieldError

// Add keeps fe when there is one: a Range's Check answers nil for a value
// inside it.
func (e *FieldErrors) Add(fe *FieldError) {
	if fe != nil {
		*e = append(*e, *fe)
	}
}

// Whole checks a whole-number setting against lo to hi when it is given
// (not 0, which leaves the default).
func (e *FieldErrors) Whole(field string, v, lo, hi int) {
	if v != 0 {
		e.Add(Range{Min: float64(lo), Max: float64(hi), Integer: true}.Check(field, Num(float64(v))))
	}
}
