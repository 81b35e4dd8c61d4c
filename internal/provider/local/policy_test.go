package local

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/curate/curate/internal/provider"
)

// A grpo job's config.json carries its policy settings, resolved reward
// model and all; its steps' losses are the training curve, and the run
// succeeds with its adapter.
func TestGRPOConfigAndRun(t *testing.T) {
	f := newFixture(t, "ok")
	writeModelDir(t, filepath.Join(f.cfg.ModelsDir, "rm-v1"))
	kl := 0.0
	s := Settings{Policy: PolicySettings{GroupSize: 8, KLCoef: &kl, KLMax: 2, RewardModel: "rm-v1",
		Weights: map[string]float64{"rm": 1, "conc": 0.25}}}
	req := f.request("job-grpo", GRPO, "openai_chat")
	job, err := f.p.CreateWith(context.Background(), req, s)
	must(t, err)
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateSucceeded || got.status.FineTunedModel != filepath.Join(f.runDir(job.ID), "final") {
		t.Fatalf("status = %+v", got.status)
	}
	var cfg struct {
		Method string         `json:"method"`
		Policy map[string]any `json:"policy"`
		IRS    map[string]any `json:"irs"`
	}
	b, err := os.ReadFile(filepath.Join(f.runDir(job.ID), "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &cfg))
	want := map[string]any{"group_size": 8.0, "kl_coef": 0.0, "kl_max": 2.0, "reward_model": filepath.Join(f.cfg.ModelsDir, "rm-v1"),
		"weights": map[string]any{"rm": 1.0, "conc": 0.25}}
	if cfg.Method != "grpo" || !reflect.DeepEqual(cfg.Policy, want) || cfg.IRS != nil {
		t.Errorf("config.json = %s", b)
	}
	metrics, err := f.p.Metrics(context.Background(), job.ID)
	must(t, err)
	// The fake's four steps lose 0.4, 0.3, 0.2, 0.1; the held-out checks are not curve points.
	if len(metrics) != 4 || metrics[0].Step != 1 || math.Abs(*metrics[3].TrainLoss-0.1) > 1e-9 {
		gotJSON, _ := json.Marshal(metrics)
		t.Errorf("metrics = %s", gotJSON)
	}
	if got.status.Progress.TotalEpochs != 1 {
		t.Errorf("total epochs %d, want the trainer's 1", got.status.Progress.TotalEpochs)
	}

	// Settings the trainer would refuse are refused before it starts.
	bad := Settings{Policy: PolicySettings{GroupSize: 1, ClipEpsilon: 1, KLMax: -1, Weights: map[string]float64{"rm": 1, "speed": 2}}}
	_, err = f.p.CreateWith(context.Background(), f.request("job-bad", GRPO, "openai_chat"), bad)
	wantFields := []string{"policy.clip_epsilon", "policy.group_size", "policy.kl_max", "policy.weights.rm", "policy.weights.speed"}
	if got := fields(t, err); !reflect.DeepEqual(got, wantFields) {
		t.Errorf("fields = %v, want %v (%v)", got, wantFields, err)
	}
	_, err = f.p.CreateWith(context.Background(), f.request("job-bad2", GRPO, "openai_chat"), Settings{Policy: PolicySettings{RewardModel: "missing"}})
	if got := fields(t, err); !reflect.DeepEqual(got, []string{"policy.reward_model"}) {
		t.Errorf("a missing reward model: fields %v (%v)", got, err)
	}
}

// A stop event is a warning in the job's log naming the step and the
// reason; the run still succeeds with the model it saved.
func TestStopEventIsAWarning(t *testing.T) {
	f := newFixture(t, "stop")
	job := f.start("job-stop", PPO, "openai_chat")
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateSucceeded {
		t.Fatalf("status = %+v", got.status)
	}
	want := "stopped early at step 2: KL divergence from the reference reached 0.8 after step 2, above the bound 0.5; the adapter from step 1, the last within it, is kept"
	if !containsMessage(got.events, "warn", want) {
		t.Errorf("no warning %q in %q", want, messages(got.events))
	}
	var stopped int
	for _, r := range got.records {
		if strings.Contains(string(r.Line), `"phase":"STOPPED"`) {
			stopped++
		}
	}
	if stopped != 1 {
		t.Errorf("%d STOPPED records, want 1", stopped)
	}
}

// A reward job runs the recipe's 5 epochs unless told otherwise, and may
// set its early stopping.
func TestRewardConfig(t *testing.T) {
	f := newFixture(t, "ok")
	req := f.request("job-rm", Reward, "trl_preference")
	req.Hyper = provider.Hyperparameters{EarlyStoppingPatience: provider.Num(3), EarlyStoppingThreshold: provider.Num(0.01)}
	job, err := f.p.Create(context.Background(), req)
	must(t, err)
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateSucceeded || got.status.Progress.TotalEpochs != 5 {
		t.Fatalf("status = %+v, want succeeded with 5 epochs in all", got.status)
	}
	var cfg struct {
		Hyper map[string]any `json:"hyperparameters"`
	}
	b, err := os.ReadFile(filepath.Join(f.runDir(job.ID), "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &cfg))
	if cfg.Hyper["early_stopping_patience"] != 3.0 || cfg.Hyper["early_stopping_threshold"] != 0.01 {
		t.Errorf("config.json = %s", b)
	}
	if !containsMessage(got.events, "warn", "stopped early at step 3: validation loss has not improved for 1 evaluation (best 0.5 after epoch 1, now 0.55); the model from epoch 1 is kept") {
		t.Errorf("events %q", messages(got.events))
	}
}

func writeModelDir(t *testing.T, dir string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644))
}
