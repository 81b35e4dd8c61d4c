package finetune_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/internal/provider/openaitest"
)

// The local entry trains sft, irs, grpo and ppo on chat lines and dpo and
// reward on TRL preference pairs; with OpenAI beside it every method is
// known.
func TestLocalEntryAndMethods(t *testing.T) {
	e := finetune.Local(local.Config{RunsRoot: t.TempDir(), ModelsDir: t.TempDir()})
	want := map[provider.Method]export.Format{"supervised": "openai_chat", "irs": "openai_chat", "dpo": "trl_preference", "reward": "trl_preference",
		"grpo": "openai_chat", "ppo": "openai_chat"}
	for m, f := range want {
		if e.Formats[m] != f {
			t.Errorf("local %s trains on %q, want %q", m, e.Formats[m], f)
		}
	}
	if !e.Free || len(e.Formats) != 6 {
		t.Errorf("local entry %+v", e)
	}
	reg := finetune.Providers{"local": e, "openai": finetune.OpenAI(openai.Config{})}
	if got := reg.Methods(); !slices.Equal(got, []provider.Method{"dpo", "grpo", "irs", "ppo", "reward", "supervised"}) {
		t.Errorf("methods %v", got)
	}
}

// A local launch needs no price and costs nothing; its settings are
// checked by the local trainer's ranges, named after the request's
// "local" object, and stored with the job.
func TestLocalEstimateIsFreeAndChecksSettings(t *testing.T) {
	fake := openaitest.New(t)
	models := t.TempDir()
	e := newEnv(t, finetune.Providers{"local": finetune.Local(local.Config{RunsRoot: t.TempDir(), ModelsDir: models}), "openai": openaiEntry(fake)})
	v := e.src.AddPref(e.org, "support-dpo v1", finetunetest.Pairs(6), 2)
	model := filepath.Join(models, "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	req := finetune.Request{VersionID: v.ID, Provider: "local", BaseModel: "model", Method: local.Reward,
		Local: &local.Settings{LoRAR: 32, IRS: local.IRSSettings{NIterations: 5}}}
	est, err := e.svc.Estimate(t.Context(), e.org, req)
	if err != nil {
		t.Fatal(err)
	}
	// The reward model's recipe runs 5 epochs when they are left auto.
	if !est.Free || est.Cost != 0 || est.Format != export.TRLPreference || est.TrainExamples != 4 || est.Epochs != 5 || !est.EpochsAuto {
		t.Errorf("estimate %+v", est)
	}
	job := e.launch(t, req)
	var stored local.Settings
	if err := json.Unmarshal(job.LocalSettings, &stored); err != nil || stored.LoRAR != 32 || stored.IRS.NIterations != 5 {
		t.Errorf("stored settings %s (%v)", job.LocalSettings, err)
	}
	if job.EstimatedCost != 0 || job.PricePerMillion != 0 {
		t.Errorf("a local job priced at %d (%d per million)", job.EstimatedCost, job.PricePerMillion)
	}

	for _, tc := range []struct {
		change func(*finetune.Request)
		field  string
		msg    string
	}{
		{func(r *finetune.Request) { r.Local = &local.Settings{LoRAAlpha: 2000} }, "local.lora_alpha", "from 1 to 1024"},
		{func(r *finetune.Request) { r.Local = &local.Settings{LearningRate: 2} }, "local.learning_rate", "below 1"},
		{func(r *finetune.Request) {
			r.Local = &local.Settings{IRS: local.IRSSettings{DW: local.DWSettings{InitialWeights: map[string]float64{"fun": 1}}}}
		}, "local.irs.dw_config.initial_weights.fun", "is not a score"},
		{func(r *finetune.Request) { r.BaseModel = "model/absent" }, "base_model", `"model/absent" is not a model directory`},
		{func(r *finetune.Request) { r.BaseModel = model }, "base_model", "not a path"},
		{func(r *finetune.Request) { r.Hyper.Epochs = provider.Num(101) }, "hyperparameters.epochs", "from 1 to 100"},
		{func(r *finetune.Request) { r.Method = "rlhf" }, "method", `"supervised"`},
		{func(r *finetune.Request) { r.Provider, r.BaseModel = "openai", mini }, "local", "only to the local provider"},
	} {
		r := req
		tc.change(&r)
		_, err := e.svc.Estimate(t.Context(), e.org, r)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || !strings.Contains(inv.ByField()[tc.field], tc.msg) {
			t.Errorf("want %s %q, got %v", tc.field, tc.msg, err)
		}
	}
	sft := e.src.AddSFT(e.org, "support-sft v1", finetunetest.Chats(4), 1)
	r := req
	r.VersionID = sft.ID
	_, err = e.svc.Estimate(t.Context(), e.org, r)
	var inv *errs.Invalid
	if !errors.As(err, &inv) || !strings.Contains(inv.ByField()["method"], "reward trains on preference pairs") {
		t.Errorf("reward on single examples: %v", err)
	}
}

// IRSSummary picks the iteration summaries and the last phase out of
// metrics.jsonl lines as the trainer's README shows them.
func TestIRSSummary(t *testing.T) {
	lines := []json.RawMessage{
		json.RawMessage(`{"ts":"2026-02-03T12:00:01.250Z","iter":1,"phase":"GENERATING","progress":0.0}`),
		json.RawMessage(`{"ts":"2026-02-03T12:05:00Z","iter":1,"phase":"SCORING","progress":50}`),
		json.RawMessage(`{"ts":"2026-02-03T12:10:00.000Z","phase":"METRICS","step":0,"iter":1,"avg_reward":2.1,"weights":{"rel":1.0,"faith":1.0,"conc":0.5},"next_weights":{"rel":1.1,"faith":0.9,"conc":0.5}}`),
		json.RawMessage(`{"ts":"2026-02-03T12:15:00.000Z","phase":"TRAINING","step":3,"epoch":1,"iter":1,"loss":1.25,"lr":2e-05}`),
		json.RawMessage(`{"ts":"2026-02-03T12:20:00Z","iter":2,"phase":"GENERATING","progress":25}`),
	}
	points, last := finetune.IRSSummary(lines)
	if len(points) != 1 || points[0].Iter != 1 || *points[0].AvgReward != 2.1 || points[0].Weights["conc"] != 0.5 || points[0].NextWeights["rel"] != 1.1 {
		t.Errorf("points %+v", points)
	}
	if last.Iter != 2 || last.Phase != "GENERATING" || last.Progress == nil || *last.Progress != 25 {
		t.Errorf("last phase %+v", last)
	}
}

// Local models come from CURATE_MODELS_DIR, or <data dir>/models when it
// is unset.
func TestLocalConfigModelsDir(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = "/srv/curate"
	if got := finetune.LocalConfig(cfg).ModelsDir; got != "/srv/curate/models" {
		t.Errorf("models in %s, want /srv/curate/models", got)
	}
	cfg.ModelsDir = "/mnt/models"
	if got := finetune.LocalConfig(cfg).ModelsDir; got != "/mnt/models" {
		t.Errorf("models in %s, want /mnt/models", got)
	}
}
