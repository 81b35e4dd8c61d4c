package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Value is one hyperparameter setting: "auto" (the zero value), which
// leaves the choice to the provider, or a number.
type Value struct {
	n   float64
	set bool
}

// Auto leaves the setting to the provider.
func Auto() Value { return Value{} }

// Num sets a number.
func Num(n float64) Value { return Value{n: n, set: true} }

// IsAuto reports whether the provider chooses.
func (v Value) IsAuto() bool { return !v.set }

// Number returns the number and true, or false for "auto".
func (v Value) Number() (float64, bool) { return v.n, v.set }

// String is "auto" or the number in its shortest form.
func (v Value) String() string {
	if !v.set {
		return "auto"
	}
	return strconv.FormatFloat(v.n, 'g', -1, 64)
}

// ParseValue reads "auto" (or an empty string) or a number, as typed in a
// form.
func ParseValue(s string) (Value, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "auto") {
		return Auto(), nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return Value{}, fmt.Errorf("%q is neither \"auto\" nor a number", s)
	}
	return Num(n), nil
}

// MarshalJSON writes "auto" or the number.
func (v Value) MarshalJSON() ([]byte, error) {
	if !v.set {
		return []byte(`"auto"`), nil
	}
	return []byte(v.String()), nil
}

// UnmarshalJSON reads "auto", null or a number.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*v = Auto()
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != "auto" {
			return fmt.Errorf("%q is neither \"auto\" nor a number", s)
		}
		*v = Auto()
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%s is neither \"auto\" nor a number", b)
	}
	*v = Num(n)
	return nil
}

// Hyperparameters are the training settings Curate passes on. Each
// provider takes only some of them; Validate refuses a number where the
// provider takes none.
type Hyperparameters struct {
	Epochs                 Value `json:"epochs,omitzero"`
	BatchSize              Value `json:"batch_size,omitzero"`
	LearningRateMultiplier Value `json:"learning_rate_multiplier,omitzero"`
	Beta                   Value `json:"beta,omitzero"` // DPO only
	EarlyStoppingThreshold Value `json:"early_stopping_threshold,omitzero"`
	EarlyStoppingPatience  Value `json:"early_stopping_patience,omitzero"`
}

// The field names of Hyperparameters as errors and forms spell them.
const (
	FieldEpochs                 = "hyperparameters.epochs"
	FieldBatchSize              = "hyperparameters.batch_size"
	FieldLearningRateMultiplier = "hyperparameters.learning_rate_multiplier"
	FieldBeta                   = "hyperparameters.beta"
	FieldEarlyStoppingThreshold = "hyperparameters.early_stopping_threshold"
	FieldEarlyStoppingPatience  = "hyperparameters.early_stopping_patience"
)

// Each returns every setting with its field name, so a provider can check
// them all in one loop.
func (h Hyperparameters) Each() []NamedValue {
	settings := h.settings()
	out := make([]NamedValue, len(settings))
	for i, s := range settings {
		out[i] = NamedValue{s.field, *s.value}
	}
	return out
}

// setting is one of a Hyperparameters' settings, to write into.
type setting struct {
	field string
	value *Value
}

// settings are the settings of h with their field names.
func (h *Hyperparameters) settings() []setting {
	return []setting{
		{FieldEpochs, &h.Epochs},
		{FieldBatchSize, &h.BatchSize},
		{FieldLearningRateMultiplier, &h.LearningRateMultiplier},
		{FieldBeta, &h.Beta},
		{FieldEarlyStoppingThreshold, &h.EarlyStoppingThreshold},
		{FieldEarlyStoppingPatience, &h.EarlyStoppingPatience},
	}
}

// Spelling is how a provider's own API names Curate's hyperparameters:
// field ("hyperparameters.epochs") to name ("n_epochs"). A field it does
// not list keeps Curate's name.
type Spelling map[string]string

// Name is the provider's name of a field.
func (sp Spelling) Name(field string) string {
	if name, ok := sp[field]; ok {
		return name
	}
	return strings.TrimPrefix(field, "hyperparameters.")
}

// Spelled returns the settings that are not "auto" under the provider's
// names: how a job reports what it was asked for.
func (h Hyperparameters) Spelled(sp Spelling) map[string]Value {
	out := map[string]Value{}
	for _, nv := range h.Each() {
		if !nv.Value.IsAuto() {
			out[sp.Name(nv.Field)] = nv.Value
		}
	}
	return out
}

// ParseHyperparameters reads a request's "hyperparameters" object, where
// each setting may be sent under Curate's name ("epochs") or the
// provider's own ("n_epochs"). It returns the settings and, per field, the
// name it was sent under, so that later messages name it as the caller
// did. An unknown name, a value that is neither "auto" nor a number, and
// one setting sent under two names are each a FieldError.
func ParseHyperparameters(raw map[string]json.RawMessage, sp Spelling) (Hyperparameters, map[string]string, []FieldError) {
	var h Hyperparameters
	settings := h.settings()
	sentAs := map[string]string{}
	var errs []FieldError
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		field := "hyperparameters." + name
		i := slices.IndexFunc(settings, func(s setting) bool { return s.field == field || sp[s.field] == name })
		if i < 0 {
			known := make([]string, len(settings))
			for j, s := range settings {
				known[j] = sp.Name(s.field)
			}
			errs = append(errs, FieldError{Field: field, Message: "is not a hyperparameter; use one of " + strings.Join(known, ", ")})
			continue
		}
		s := settings[i]
		if first, dup := sentAs[s.field]; dup {
			errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf("sets the same hyperparameter as %q; send one of them", first)})
			continue
		}
		sentAs[s.field] = name
		if err := s.value.UnmarshalJSON(raw[name]); err != nil {
			errs = append(errs, FieldError{Field: field, Message: err.Error()})
		}
	}
	return h, sentAs, errs
}

// NamedValue is a hyperparameter with its field name.
type NamedValue struct {
	Field string
	Value Value
}

// Range is a documented range for one hyperparameter.
type Range struct {
	Min, Max     float64
	MinExclusive bool // the minimum itself is not allowed
	NoMax        bool // no upper bound
	Integer      bool
}

// Check returns nil when v is "auto" or lies in the range, and otherwise
// a FieldError for field that states the range.
func (r Range) Check(field string, v Value) *FieldError {
	n, ok := v.Number()
	if !ok {
		return nil
	}
	bad := (r.Integer && n != math.Trunc(n)) ||
		(r.MinExclusive && n <= r.Min) || (!r.MinExclusive && n < r.Min) ||
		(!r.NoMax && n > r.Max)
	if !bad {
		return nil
	}
	return &FieldError{Field: field, Message: "must be " + r.describe() + ", or auto"}
}

func (r Range) describe() string {
	kind := "a number"
	if r.Integer {
		kind = "a whole number"
	}
	lo := "at least " + fmtNum(r.Min)
	if r.MinExclusive {
		lo = "greater than " + fmtNum(r.Min)
	}
	switch {
	case r.NoMax:
		return kind + " " + lo
	case r.Min == r.Max && !r.MinExclusive:
		return fmtNum(r.Min)
	case !r.MinExclusive:
		return fmt.Sprintf("%s from %s to %s", kind, fmtNum(r.Min), fmtNum(r.Max))
	default:
		return fmt.Sprintf("%s %s and at most %s", kind, lo, fmtNum(r.Max))
	}
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
