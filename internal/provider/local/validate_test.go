package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/internal/provider"
)

// fields returns the refused fields of a validation error, sorted.
func fields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *provider.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *provider.ValidationError", err)
	}
	var out []string
	for _, fe := range ve.Errors {
		out = append(out, fe.Field)
	}
	slices.Sort(out)
	return out
}

func TestValidate(t *testing.T) {
	f := newFixture(t, "ok")
	models := f.cfg.ModelsDir
	must(t, os.WriteFile(filepath.Join(models, "weights.bin"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(models, "empty"), 0o755))
	// A model outside the models directory, and links to it and to the
	// model inside.
	outside := filepath.Join(f.dir, "elsewhere")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "config.json"), []byte(`{}`), 0o644))
	must(t, os.Symlink(outside, filepath.Join(models, "escape")))
	must(t, os.Symlink("../..", filepath.Join(models, "up")))
	must(t, os.Symlink(modelName, filepath.Join(models, "alias")))
	n := provider.Num
	cases := []struct {
		name    string
		method  provider.Method
		model   string
		h       provider.Hyperparameters
		fields  []string
		message string // part of the first message
	}{
		{name: "sft, all auto", method: provider.Supervised, model: modelName},
		{name: "dpo at the ranges' ends", method: provider.DPO, model: modelName, h: provider.Hyperparameters{Epochs: n(100), BatchSize: n(1024), Beta: n(10)}},
		{name: "reward", method: Reward, model: modelName, h: provider.Hyperparameters{Epochs: n(1), BatchSize: n(1)}},
		{name: "irs", method: IRS, model: modelName},
		{name: "grpo", method: GRPO, model: modelName},
		{name: "ppo", method: PPO, model: modelName},
		{name: "unknown method", method: "rlhf", model: modelName, fields: []string{"method"}, message: `"grpo" or "ppo"`},
		{name: "a link to a model inside", method: provider.Supervised, model: "alias"},
		{name: "missing base model", method: provider.Supervised, model: "nope", fields: []string{"base_model"}, message: `"nope" is not a model directory`},
		{name: "empty base model", method: provider.Supervised, fields: []string{"base_model"}, message: "is required"},
		{name: "base model is a file", method: provider.Supervised, model: "weights.bin", fields: []string{"base_model"}, message: "is not a model directory"},
		{name: "base model without config.json", method: provider.Supervised, model: "empty", fields: []string{"base_model"}, message: "has no config.json"},
		{name: "an absolute path", method: provider.Supervised, model: f.model, fields: []string{"base_model"}, message: "not a path"},
		{name: "a path out", method: provider.Supervised, model: "../elsewhere", fields: []string{"base_model"}, message: "not a path"},
		{name: "a path out and back", method: provider.Supervised, model: modelName + "/../" + modelName, fields: []string{"base_model"}, message: "not a path"},
		{name: "a path not clean", method: provider.Supervised, model: "./" + modelName, fields: []string{"base_model"}, message: "not a path"},
		{name: "a link out", method: provider.Supervised, model: "escape", fields: []string{"base_model"}, message: `"escape" is not a model directory`},
		{name: "a link up", method: provider.Supervised, model: "up/elsewhere", fields: []string{"base_model"}, message: "is not a model directory"},
		{name: "a NUL", method: provider.Supervised, model: "tiny\x00llama", fields: []string{"base_model"}, message: "must be the name"},
		{name: "zero epochs", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{Epochs: n(0)}, fields: []string{provider.FieldEpochs}, message: "from 1 to 100"},
		{name: "101 epochs", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{Epochs: n(101)}, fields: []string{provider.FieldEpochs}},
		{name: "fractional epochs", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{Epochs: n(1.5)}, fields: []string{provider.FieldEpochs}},
		{name: "batch too large", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{BatchSize: n(1025)}, fields: []string{provider.FieldBatchSize}},
		{name: "zero multiplier", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{LearningRateMultiplier: n(0)}, fields: []string{provider.FieldLearningRateMultiplier}},
		// sft's 2e-4 times 5000 is 1, which the trainer refuses; 4999 gives 0.9998.
		{name: "learning rate reaches 1", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{LearningRateMultiplier: n(5000)}, fields: []string{provider.FieldLearningRateMultiplier}, message: "learning rate of 1;"},
		{name: "learning rate just below 1", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{LearningRateMultiplier: n(4999)}},
		{name: "beta on sft", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{Beta: n(0.1)}, fields: []string{provider.FieldBeta}},
		{name: "beta above 10", method: provider.DPO, model: modelName, h: provider.Hyperparameters{Beta: n(10.5)}, fields: []string{provider.FieldBeta}},
		{name: "beta zero", method: provider.DPO, model: modelName, h: provider.Hyperparameters{Beta: n(0)}, fields: []string{provider.FieldBeta}},
		{name: "early stopping", method: provider.Supervised, model: modelName, h: provider.Hyperparameters{EarlyStoppingPatience: n(3)}, fields: []string{provider.FieldEarlyStoppingPatience}, message: "only for the reward method"},
		{name: "early stopping of a reward model", method: Reward, model: modelName, h: provider.Hyperparameters{EarlyStoppingPatience: n(3), EarlyStoppingThreshold: n(0.01)}},
		{name: "early stopping patience fractional", method: Reward, model: modelName, h: provider.Hyperparameters{EarlyStoppingPatience: n(1.5), EarlyStoppingThreshold: n(-1)}, fields: []string{provider.FieldEarlyStoppingPatience, provider.FieldEarlyStoppingThreshold}},
		{name: "several at once", method: provider.DPO, model: "", h: provider.Hyperparameters{Epochs: n(0), Beta: n(20)}, fields: []string{"base_model", provider.FieldBeta, provider.FieldEpochs}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := f.p.Validate(c.method, c.model, c.h)
			if got := fields(t, err); !slices.Equal(got, c.fields) {
				t.Fatalf("fields = %v, want %v (%v)", got, c.fields, err)
			}
			if c.message != "" && !strings.Contains(err.Error(), c.message) {
				t.Errorf("error %q lacks %q", err, c.message)
			}
			// Nothing of the filesystem shows but the name given.
			if err != nil && c.model != f.model && strings.Contains(err.Error(), f.dir) {
				t.Errorf("error %q shows the directory %s", err, f.dir)
			}
		})
	}
}

func TestSettingsOutOfRange(t *testing.T) {
	dropout := 1.0
	bad := Settings{LoRAR: 300, LoRADropout: &dropout, Dtype: "int4", IRS: IRSSettings{NCandidates: 1, DW: DWSettings{InitialWeights: map[string]float64{"rm": 1}}}}
	_, err := New(Config{RunsRoot: t.TempDir(), ModelsDir: t.TempDir(), Settings: bad})
	if err == nil {
		t.Fatal("New accepted out-of-range settings")
	}
	for _, field := range []string{"hyperparameters.lora_r", "hyperparameters.lora_dropout", "hyperparameters.dtype", "irs.n_candidates", "irs.dw_config.initial_weights.rm"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}

	f := newFixture(t, "ok")
	req := f.request("job-s", provider.Supervised, "openai_chat")
	_, err = f.p.CreateWith(context.Background(), req, Settings{MaxLength: 8})
	if got := fields(t, err); !slices.Equal(got, []string{"hyperparameters.max_length"}) {
		t.Errorf("CreateWith fields = %v (%v)", got, err)
	}
}

func TestCreateRefusesDataThatDoesNotFitTheMethod(t *testing.T) {
	f := newFixture(t, "ok")
	req := f.request("job-x", provider.DPO, "openai_chat")
	_, err := f.p.Create(context.Background(), req)
	if got := fields(t, err); !slices.Equal(got, []string{"method"}) || !strings.Contains(err.Error(), "export it as trl_preference") {
		t.Fatalf("Create = %v; want the method refused for chat data", err)
	}
	if _, err := os.Stat(filepath.Join(f.runDir("train_job-x"), pidFile)); err == nil {
		t.Error("a trainer was started for refused data")
	}

	other := f.request("job-y", provider.Supervised, "openai_chat")
	req = f.request("job-z", provider.Supervised, "openai_chat")
	req.TrainFileID = other.TrainFileID
	if got := fields(t, func() error { _, err := f.p.Create(context.Background(), req); return err }()); !slices.Equal(got, []string{"train_file_id"}) {
		t.Errorf("another job's file: fields %v", got)
	}

	req = f.request("job-z", provider.Supervised, "openai_chat")
	seed := int64(1 << 32) // one past the trainer's largest seed
	req.Seed = &seed
	if got := fields(t, func() error { _, err := f.p.Create(context.Background(), req); return err }()); !slices.Equal(got, []string{"seed"}) {
		t.Errorf("seed 2^32: fields %v", got)
	}
}

func TestUploadRefusesUnknownFormats(t *testing.T) {
	f := newFixture(t, "ok")
	train, _ := f.export("openai_chat")
	_, err := f.p.Upload(context.Background(), provider.UploadRequest{CurateJobID: "job-u", TrainPath: train, Format: "alpaca"})
	if got := fields(t, err); !slices.Equal(got, []string{"format"}) {
		t.Errorf("fields = %v (%v)", got, err)
	}
}

func TestBadJobIDsAndCursors(t *testing.T) {
	f := newFixture(t, "ok")
	job := f.start("job-c", provider.Supervised, "openai_chat")
	pollToEnd(t, f.p, job.ID)
	ctx := context.Background()
	for _, id := range []string{"../train_job-c", "train_../../etc", "job-c", "train_nothing-here"} {
		if _, err := f.p.Poll(ctx, id, ""); err == nil || !provider.IsPermanent(err) {
			t.Errorf("Poll(%q) = %v; want a permanent error", id, err)
		}
	}
	for _, c := range []provider.EventCursor{"abc", "-5", "999999999"} {
		if _, err := f.p.Poll(ctx, job.ID, c); err == nil {
			t.Errorf("Poll with cursor %q succeeded", c)
		}
	}
}

func TestLogTail(t *testing.T) {
	r := run{dir: t.TempDir()}
	// 3000 bytes of lines "line 0000\n"...: the tail of 2048 bytes starts
	// mid-line, so the first whole line kept is the one after it.
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "line %04d\n", i)
	}
	must(t, os.WriteFile(r.path(stderrFile), []byte(b.String()), 0o644))
	tail := r.logTail()
	// 3000-2048 = 952 is inside line 95 (bytes 950-959), so line 96 comes first.
	if !strings.HasPrefix(tail, "line 0096\n") || !strings.HasSuffix(tail, "line 0299") {
		t.Errorf("tail starts %q and ends %q", tail[:10], tail[len(tail)-9:])
	}
}

func TestCreateWithAMissingTrainerCommand(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-trainer")
	f := newFixture(t, "ok", func(c *Config) { c.Command = []string{missing, "run"} })
	req := f.request("job-m", provider.Supervised, "openai_chat")
	_, err := f.p.Create(context.Background(), req)
	if err == nil || !provider.IsPermanent(err) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Create = %v; want a permanent error naming the command", err)
	}
	// The slot is free again: a working trainer starts.
	f.p.argv = []string{fakeTrainer, "run"}
	job, err := f.p.Create(context.Background(), req)
	must(t, err)
	t.Cleanup(func() { f.kill(job.ID) })
	if got := pollToEnd(t, f.p, job.ID); got.status.State != provider.StateSucceeded {
		t.Errorf("status = %+v", got.status)
	}
}

// A provider without a models directory would have nothing to check a
// model name against.
func TestNewNeedsAModelsDirectory(t *testing.T) {
	if _, err := New(Config{RunsRoot: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "ModelsDir") {
		t.Errorf("New without ModelsDir = %v", err)
	}
}

// Create hands the trainer the directory a name resolves to, for the base
// model and for an IRS reward model alike, and refuses a reward model
// outside the models directory.
func TestCreateResolvesModelNames(t *testing.T) {
	f := newFixture(t, "ok")
	reward := filepath.Join(f.cfg.ModelsDir, "rewards", "rm-v1")
	must(t, os.MkdirAll(reward, 0o755))
	must(t, os.WriteFile(filepath.Join(reward, "config.json"), []byte(`{}`), 0o644))
	req := f.request("job-rm", IRS, "openai_chat")
	s := Settings{IRS: IRSSettings{RewardModel: "/etc"}}
	if got := fields(t, func() error { _, err := f.p.CreateWith(context.Background(), req, s); return err }()); !slices.Equal(got, []string{"irs.reward_model"}) {
		t.Errorf("a reward model path: fields %v", got)
	}
	s.IRS.RewardModel = "rewards/rm-v1"
	job, err := f.p.CreateWith(context.Background(), req, s)
	must(t, err)
	t.Cleanup(func() { f.kill(job.ID) })
	pollToEnd(t, f.p, job.ID)
	var cfg struct {
		BaseModel string `json:"base_model"`
		IRS       struct {
			RewardModel string `json:"reward_model"`
		} `json:"irs"`
	}
	b, err := os.ReadFile(filepath.Join(f.runDir(job.ID), "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &cfg))
	if cfg.BaseModel != f.model || cfg.IRS.RewardModel != reward {
		t.Errorf("config.json names %q and %q, want %q and %q", cfg.BaseModel, cfg.IRS.RewardModel, f.model, reward)
	}
}
