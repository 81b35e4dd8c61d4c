package local

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/provider"
)

// trainerDir is the bundled trainer, from this package's directory.
const trainerDir = "../../../trainer"

// The bundled trainer checks the base model before it imports torch, so
// this runs anywhere with Python 3.
func TestBundledTrainerReportsABadBaseModel(t *testing.T) {
	f := newFixture(t, "", func(c *Config) {
		c.Command, c.Env, c.TrainerDir = nil, nil, trainerDir
	})
	// A directory that passes Validate (it has config.json) but holds no weights.
	job := f.start("job-real", provider.Supervised, "openai_chat")
	got := pollToEnd(t, f.p, job.ID)
	want := "base_model: " + f.model + " has no weight files (*.safetensors or *.bin)"
	if got.status.State != provider.StateFailed || got.status.Error != want {
		t.Fatalf("status = %+v; want failed with %q", got.status, want)
	}
	if !containsMessage(got.events, "error", want) {
		t.Errorf("no error event in %q", messages(got.events))
	}
	log, err := os.ReadFile(filepath.Join(f.runDir(job.ID), "train.log"))
	must(t, err)
	if !strings.Contains(string(log), "has no weight files") {
		t.Errorf("train.log = %q", log)
	}
}

func TestProbe(t *testing.T) {
	p, err := New(Config{RunsRoot: t.TempDir(), ModelsDir: t.TempDir(), TrainerDir: trainerDir})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := p.Probe(ctx)
	must(t, err)
	if !slices.Contains([]string{"none", "cpu", "cuda"}, info.Device) || !regexp.MustCompile(`^3\.\d+`).MatchString(info.Python) {
		t.Errorf("probe = %+v", info)
	}
	if info.Device == "none" && info.Note == "" {
		t.Errorf("probe without torch gives no note: %+v", info)
	}
	if info.Device == "cuda" && (info.GPUName == "" || info.GPUMemoryBytes <= 0) {
		t.Errorf("probe on a GPU names none: %+v", info)
	}

	missing, err := New(Config{RunsRoot: t.TempDir(), ModelsDir: t.TempDir(), Python: filepath.Join(t.TempDir(), "no-python")})
	must(t, err)
	if _, err := missing.Probe(ctx); err == nil || !strings.Contains(err.Error(), "no-python") {
		t.Errorf("probe with a missing interpreter = %v", err)
	}
}
