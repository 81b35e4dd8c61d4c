// Package errs holds the domain errors that handlers turn into HTTP answers:
// not found (404), invalid input with a message per field (422), forbidden
// (403), conflict (409) and too many requests (429).
package errs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

var (
	// ErrNotFound: the row does not exist, or belongs to another organisation.
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the caller's role does not allow the action.
	ErrForbidden = errors.New("forbidden")
)

// FieldError is one message about one input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Invalid is input that failed validation, with a message per field.
type Invalid struct {
	Errors []FieldError
}

func (e *Invalid) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Add records a message for a field.
func (e *Invalid) Add(field, format string, args ...any) {
	e.Errors = append(e.Errors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Merge records the messages of another validation's error. It takes
// only an *Invalid: any other error is a fault, not a message about input,
// and is recorded as one on the empty field so that it is not lost.
func (e *Invalid) Merge(err error) {
	var other *Invalid
	if errors.As(err, &other) {
		e.Errors = append(e.Errors, other.Errors...)
	} else if err != nil {
		e.Add("", "%v", err)
	}
}

// Has reports whether any message was recorded.
func (e *Invalid) Has() bool { return len(e.Errors) > 0 }

// Err returns e as an error when it holds messages, else nil.
func (e *Invalid) Err() error {
	if !e.Has() {
		return nil
	}
	return e
}

// ByField maps each field to its first message, for forms.
func (e *Invalid) ByField() map[string]string {
	m := make(map[string]string, len(e.Errors))
	for _, f := range e.Errors {
		if _, ok := m[f.Field]; !ok {
			m[f.Field] = f.Message
		}
	}
	return m
}

// Fields lists the fields with messages, sorted.
func (e *Invalid) Fields() []string {
	var out []string
	for f := range e.ByField() {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// InvalidField is a shorthand for one field's message.
func InvalidField(field, format string, args ...any) error {
	e := &Invalid{}
	e.Add(field, format, args...)
	return e
}

// Conflict is a write refused because the row changed or already exists.
type Conflict struct {
	Message string
	Current any // the row as it is now, when that helps the caller
}

func (e *Conflict) Error() string { return e.Message }

// Unavailable is a request that cannot be answered now, for a reason in
// words that names what is missing (503): it may be answered later.
type Unavailable struct {
	Message string
}

func (e *Unavailable) Error() string { return e.Message }

// TooMany is a request refused by a rate limit.
type TooMany struct {
	Message    string
	RetryAfter time.Duration
}

func (e *TooMany) Error() string { return e.Message }

// Text checks a text field: present when required, at most max bytes, valid
// UTF-8 and free of NUL characters. It records the first problem and
// reports whether the field is fine.
func (e *Invalid) Text(field, value string, max int, required bool) bool {
	switch {
	case required && strings.TrimSpace(value) == "":
		e.Add(field, "is required")
	case len(value) > max:
		e.Add(field, "is %d bytes; at most %d", len(value), max)
	case !utf8.ValidString(value):
		e.Add(field, "is not valid UTF-8")
	case strings.ContainsRune(value, 0):
		e.Add(field, "contains a NUL character")
	default:
		return true
	}
	return false
}
