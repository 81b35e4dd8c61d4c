package openai_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openai"
)

// The result file shown in OpenAI's fine-tuning guide.
const guideResult = `step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy
1,1.52347,0.0,,
2,0.57719,0.0,,
3,3.63525,0.0,,
4,1.72257,0.0,,
5,1.52379,0.0,,
`

func TestParseResultCSV(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	want := []provider.StepMetric{
		{Step: 1, TrainLoss: f(1.52347), TrainAccuracy: f(0)},
		{Step: 2, TrainLoss: f(0.57719), TrainAccuracy: f(0)},
		{Step: 3, TrainLoss: f(3.63525), TrainAccuracy: f(0)},
		{Step: 4, TrainLoss: f(1.72257), TrainAccuracy: f(0)},
		{Step: 5, TrainLoss: f(1.52379), TrainAccuracy: f(0)},
	}
	encoded := base64.StdEncoding.EncodeToString([]byte(guideResult))
	// Some encoders wrap base64 at 76 characters.
	var wrapped strings.Builder
	for i := 0; i < len(encoded); i += 76 {
		wrapped.WriteString(encoded[i:min(i+76, len(encoded))] + "\n")
	}
	for name, content := range map[string]string{
		"plain": guideResult, "base64": encoded, "wrapped base64": wrapped.String(),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := openai.ParseResultCSV([]byte(content))
			if err != nil {
				t.Fatal(err)
			}
			assertMetrics(t, got, want)
		})
	}

	t.Run("columns by name", func(t *testing.T) {
		got, err := openai.ParseResultCSV([]byte("valid_loss,step,train_loss\n0.75,10,0.5\n,11,0.25\n"))
		if err != nil {
			t.Fatal(err)
		}
		assertMetrics(t, got, []provider.StepMetric{{Step: 10, TrainLoss: f(0.5), ValidLoss: f(0.75)}, {Step: 11, TrainLoss: f(0.25)}})
	})
}

func TestParseResultCSVErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not csv", "%%% not base64 %%%", "neither CSV nor base64"},
		{"no step column", "train_loss,valid_loss\n1,2\n", `no "step" column`},
		{"bad step", "step,train_loss\n1,0.5\ntwo,0.4\n", `line 3: step "two" is not a whole number`},
		{"bad loss", "step,train_loss\n1,low\n", `line 2: train_loss "low" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.ParseResultCSV([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
