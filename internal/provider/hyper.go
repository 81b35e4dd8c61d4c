package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
	return []NamedValue{
		{FieldEpochs, h.Epochs},
		{FieldBatchSize, h.BatchSize},
		{FieldLearningRateMultiplier, h.LearningRateMultiplier},
		{FieldBeta, h.Beta},
		{FieldEarlyStoppingThreshold, h.EarlyStoppingThreshold},
		{FieldEarlyStoppingPatience, h.EarlyStoppingPatience},
	}
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
