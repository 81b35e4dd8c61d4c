package provider_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/curate/curate/internal/provider"
)

func TestParseValue(t *testing.T) {
	tests := []struct {
		in      string
		auto    bool
		n       float64
		wantErr bool
	}{
		{"auto", true, 0, false},
		{"AUTO", true, 0, false},
		{"", true, 0, false},
		{"3", false, 3, false},
		{" 0.5 ", false, 0.5, false},
		{"1e-5", false, 0.00001, false},
		{"three", false, 0, true},
		{"NaN", false, 0, true},
		{"Inf", false, 0, true},
	}
	for _, tt := range tests {
		v, err := provider.ParseValue(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseValue(%q) error = %v", tt.in, err)
			continue
		}
		if err != nil {
			continue
		}
		n, set := v.Number()
		if v.IsAuto() != tt.auto || set == tt.auto || n != tt.n {
			t.Errorf("ParseValue(%q) = %v (auto %v), want auto %v n %v", tt.in, v, v.IsAuto(), tt.auto, tt.n)
		}
	}
}

func TestHyperparametersJSON(t *testing.T) {
	h := provider.Hyperparameters{Epochs: provider.Num(3), Beta: provider.Num(0.1)}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	// Auto settings are left out; stored rows stay small.
	if string(b) != `{"epochs":3,"beta":0.1}` {
		t.Fatalf("marshal = %s", b)
	}

	var got provider.Hyperparameters
	in := `{"epochs":"auto","batch_size":16,"learning_rate_multiplier":null,"beta":0.25}`
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Epochs.IsAuto() || got.BatchSize.String() != "16" || !got.LearningRateMultiplier.IsAuto() || got.Beta.String() != "0.25" {
		t.Fatalf("unmarshal = %+v", got)
	}
	if b, _ := json.Marshal(provider.Auto()); string(b) != `"auto"` {
		t.Fatalf("auto marshals as %s", b)
	}

	for _, bad := range []string{`{"epochs":"three"}`, `{"epochs":true}`, `{"epochs":[1]}`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("unmarshal %s succeeded", bad)
		}
	}
}

func TestRangeCheck(t *testing.T) {
	epochs := provider.Range{Min: 1, Max: 50, Integer: true}
	lr := provider.Range{Min: 0, MinExclusive: true, NoMax: true}
	beta := provider.Range{Min: 0, Max: 2, MinExclusive: true}
	one := provider.Range{Min: 1, Max: 1, Integer: true}
	threshold := provider.Range{Min: 0, Max: 0.1}
	tests := []struct {
		r    provider.Range
		v    provider.Value
		want string // "" means accepted
	}{
		{epochs, provider.Auto(), ""},
		{epochs, provider.Num(1), ""},
		{epochs, provider.Num(50), ""},
		{epochs, provider.Num(0), "must be a whole number from 1 to 50, or auto"},
		{epochs, provider.Num(51), "must be a whole number from 1 to 50, or auto"},
		{epochs, provider.Num(1.5), "must be a whole number from 1 to 50, or auto"},
		{lr, provider.Num(1e-9), ""},
		{lr, provider.Num(1000), ""},
		{lr, provider.Num(0), "must be a number greater than 0, or auto"},
		{beta, provider.Num(2), ""},
		{beta, provider.Num(2.0001), "must be a number greater than 0 and at most 2, or auto"},
		{beta, provider.Num(0), "must be a number greater than 0 and at most 2, or auto"},
		{one, provider.Num(1), ""},
		{one, provider.Num(2), "must be 1, or auto"},
		{threshold, provider.Num(0), ""},
		{threshold, provider.Num(-0.01), "must be a number from 0 to 0.1, or auto"},
	}
	for _, tt := range tests {
		fe := tt.r.Check("f", tt.v)
		got := ""
		if fe != nil {
			got = fe.Message
			if fe.Field != "f" {
				t.Errorf("field = %q", fe.Field)
			}
		}
		if got != tt.want {
			t.Errorf("%+v.Check(%v) = %q, want %q", tt.r, tt.v, got, tt.want)
		}
	}
}

func TestTerminal(t *testing.T) {
	for st, want := range map[provider.State]bool{
		provider.StateValidating: false, provider.StateQueued: false, provider.StateRunning: false,
		provider.StateSucceeded: true, provider.StateFailed: true, provider.StateCancelled: true,
	} {
		if st.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", st, !want)
		}
	}
}

func TestCheckCurateJobID(t *testing.T) {
	for id, want := range map[string]string{
		"6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b": "",
		"42":                                   "",
		"":                                     "is required",
		strings.Repeat("a", 41):                "must be at most 40 characters",
		"a--b":                                 "may hold only letters and digits joined by single hyphens",
		"-a":                                   "may hold only letters and digits joined by single hyphens",
		"a_b":                                  "may hold only letters and digits joined by single hyphens",
		"a/b":                                  "may hold only letters and digits joined by single hyphens",
	} {
		got := ""
		if fe := provider.CheckCurateJobID(id); fe != nil {
			got = fe.Message
		}
		if got != want {
			t.Errorf("CheckCurateJobID(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestPermanence(t *testing.T) {
	for code, want := range map[int]bool{200: false, 400: true, 401: true, 403: true, 404: true, 408: false, 409: false, 422: true, 429: false, 500: false, 503: false} {
		if provider.PermanentStatus(code) != want {
			t.Errorf("PermanentStatus(%d) = %v", code, !want)
		}
	}
	tests := []struct {
		err  error
		want bool
	}{
		{provider.Invalid([]provider.FieldError{{Field: "seed", Message: "bad"}}), true},
		{fmt.Errorf("step: %w", &provider.Error{Provider: "openai", Op: "create job", StatusCode: 400, Permanent: true}), true},
		{&provider.Error{Provider: "openai", Op: "create job", StatusCode: 500}, false},
		{errors.New("connection reset"), false},
	}
	for _, tt := range tests {
		if provider.IsPermanent(tt.err) != tt.want {
			t.Errorf("IsPermanent(%v) = %v", tt.err, !tt.want)
		}
	}
	if provider.Invalid(nil) != nil {
		t.Error("Invalid(nil) is not nil")
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	tests := []struct {
		err  *provider.Error
		want string
	}{
		{&provider.Error{Provider: "openai", Op: "create job", StatusCode: 400, Code: "invalid_request_error", Message: "bad file"},
			"openai: create job: 400 invalid_request_error: bad file"},
		{&provider.Error{Provider: "bedrock", Op: "get job", Err: cause}, "bedrock: get job: dial tcp: connection refused"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if !errors.Is(tests[1].err, cause) {
		t.Error("the SDK's error is not unwrapped")
	}
}

func TestUploadRequestCheck(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 11)), 0o600); err != nil {
		t.Fatal(err)
	}
	req := provider.UploadRequest{CurateJobID: "42", TrainPath: big, ValidPath: dir, Format: "openai_chat"}
	err := req.Check(10, "openai_chat")
	var ve *provider.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 2 {
		t.Fatalf("Check = %v", err)
	}
	if ve.Errors[0].Field != "train_path" || !strings.Contains(ve.Errors[0].Message, "has 11 bytes, more than the 10") {
		t.Errorf("train_path error = %+v", ve.Errors[0])
	}
	if ve.Errors[1].Field != "valid_path" || !strings.Contains(ve.Errors[1].Message, "is not a regular file") {
		t.Errorf("valid_path error = %+v", ve.Errors[1])
	}
	req.ValidPath = ""
	if err := req.Check(11, "openai_chat"); err != nil {
		t.Fatalf("11 bytes with a limit of 11: %v", err)
	}
}
