package models

import (
	"testing"

	"github.com/curate/curate/internal/serving"
)

// Which target takes which kind of version: vLLM loads adapters at
// runtime, its pooling runner serves a reward model and nothing else, a
// provider serves its own full models, a webhook's pipeline takes any.
func TestTakes(t *testing.T) {
	for _, tc := range []struct {
		target, version string
		want            bool
	}{
		{serving.KindVLLM, KindLoRA, true},
		{serving.KindVLLM, KindFull, false},
		{serving.KindOpenAI, KindFull, true},
		{serving.KindOpenAI, KindLoRA, false},
		{serving.KindWebhook, KindFull, true},
		{serving.KindWebhook, KindLoRA, true},
		{serving.KindVLLMPooling, KindReward, true},
		{serving.KindVLLMPooling, KindLoRA, false},
		{serving.KindVLLMPooling, KindFull, false},
		{serving.KindVLLM, KindReward, false},
		{serving.KindOpenAI, KindReward, false},
		{serving.KindWebhook, KindReward, true},
	} {
		if got := Takes(tc.target, tc.version); got != tc.want {
			t.Errorf("Takes(%s, %s) = %v, want %v", tc.target, tc.version, got, tc.want)
		}
		err := refuseTarget("t", tc.target, "support", "1.0.0", tc.version)
		if (err == nil) != tc.want {
			t.Errorf("refuseTarget(%s, %s) = %v", tc.target, tc.version, err)
		}
	}
}
