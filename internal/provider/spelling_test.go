package provider_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/bedrock"
	"github.com/curate/curate/internal/provider/openai"
)

// A request may name each setting as Curate does or as the provider's own
// API does (OpenAI's fine-tuning reference: n_epochs, batch_size,
// learning_rate_multiplier, beta; Bedrock's Claude 3 customization
// hyperparameters: epochCount, batchSize, learningRateMultiplier, ...), but
// not both at once, and not under a name neither knows.
func TestParseHyperparameters(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		sp     provider.Spelling
		want   string // the settings that are not auto, under Curate's names
		sentAs map[string]string
		errs   string // "field: message" of each refusal
	}{
		{name: "openai names", in: `{"n_epochs":1,"batch_size":8,"learning_rate_multiplier":"auto","beta":0.2}`, sp: openai.Spelling,
			want: `{"epochs":1,"batch_size":8,"beta":0.2}`,
			sentAs: map[string]string{provider.FieldEpochs: "n_epochs", provider.FieldBatchSize: "batch_size",
				provider.FieldLearningRateMultiplier: "learning_rate_multiplier", provider.FieldBeta: "beta"}},
		{name: "curate names", in: `{"epochs":3}`, sp: openai.Spelling, want: `{"epochs":3}`,
			sentAs: map[string]string{provider.FieldEpochs: "epochs"}},
		{name: "bedrock names", in: `{"epochCount":2,"batchSize":16,"learningRateMultiplier":0.5,"earlyStoppingPatience":4}`, sp: bedrock.Spelling,
			want: `{"epochs":2,"batch_size":16,"learning_rate_multiplier":0.5,"early_stopping_patience":4}`,
			sentAs: map[string]string{provider.FieldEpochs: "epochCount", provider.FieldBatchSize: "batchSize",
				provider.FieldLearningRateMultiplier: "learningRateMultiplier", provider.FieldEarlyStoppingPatience: "earlyStoppingPatience"}},
		{name: "two spellings", in: `{"epochs":1,"n_epochs":2}`, sp: openai.Spelling, want: `{"epochs":1}`,
			sentAs: map[string]string{provider.FieldEpochs: "epochs"},
			errs:   `[hyperparameters.n_epochs: sets the same hyperparameter as "epochs"; send one of them]`},
		{name: "another provider's name", in: `{"epochCount":2}`, sp: openai.Spelling, want: `{}`, sentAs: map[string]string{},
			errs: `[hyperparameters.epochCount: is not a hyperparameter; use one of n_epochs, batch_size, learning_rate_multiplier, beta, early_stopping_threshold, early_stopping_patience]`},
		{name: "bad value", in: `{"n_epochs":"three"}`, sp: openai.Spelling, want: `{}`,
			sentAs: map[string]string{provider.FieldEpochs: "n_epochs"},
			errs:   `[hyperparameters.n_epochs: "three" is neither "auto" nor a number]`},
		{name: "nothing", in: `{}`, sp: nil, want: `{}`, sentAs: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.in), &raw); err != nil {
				t.Fatal(err)
			}
			h, sentAs, errs := provider.ParseHyperparameters(raw, tt.sp)
			got, _ := json.Marshal(h)
			if string(got) != tt.want {
				t.Errorf("settings %s, want %s", got, tt.want)
			}
			if fmt.Sprint(sentAs) != fmt.Sprint(tt.sentAs) {
				t.Errorf("sent as %v, want %v", sentAs, tt.sentAs)
			}
			var msgs []string
			for _, fe := range errs {
				msgs = append(msgs, fe.Field+": "+fe.Message)
			}
			if tt.errs == "" && len(msgs) > 0 || tt.errs != "" && fmt.Sprint(msgs) != tt.errs {
				t.Errorf("errors %v, want %s", msgs, tt.errs)
			}
		})
	}
}

// A job reports what it was asked for in its provider's names, leaving
// out what was left to the provider.
func TestSpelled(t *testing.T) {
	h := provider.Hyperparameters{Epochs: provider.Num(3), LearningRateMultiplier: provider.Num(0.5)}
	for _, tt := range []struct {
		sp   provider.Spelling
		want string
	}{
		{openai.Spelling, `{"learning_rate_multiplier":0.5,"n_epochs":3}`},
		{bedrock.Spelling, `{"epochCount":3,"learningRateMultiplier":0.5}`},
		{nil, `{"epochs":3,"learning_rate_multiplier":0.5}`},
	} {
		got, _ := json.Marshal(h.Spelled(tt.sp))
		if string(got) != tt.want {
			t.Errorf("spelled %s, want %s", got, tt.want)
		}
	}
}
