package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The local trainer's settings: defaults, the bundled trainer found beside
// the working directory, overrides, and clear refusals.
func TestLocalTrainerSettings(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "trainer", "curate_trainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.TrainerPython != "python3" || c.GPUSlots != 1 || c.TrainerDevice != "auto" || c.TrainerCommand != "" ||
		c.TrainerDir != filepath.Join(dir, "trainer") {
		t.Errorf("defaults %q %d %q %q %q", c.TrainerPython, c.GPUSlots, c.TrainerDevice, c.TrainerCommand, c.TrainerDir)
	}

	t.Setenv("CURATE_TRAINER_PYTHON", "/opt/venv/bin/python")
	t.Setenv("CURATE_TRAINER_DIR", "/srv/trainer")
	t.Setenv("CURATE_TRAINER_COMMAND", "/usr/local/bin/train --quiet")
	t.Setenv("CURATE_GPU_SLOTS", "4")
	t.Setenv("CURATE_TRAINER_DEVICE", "cuda")
	if c, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	if c.TrainerPython != "/opt/venv/bin/python" || c.TrainerDir != "/srv/trainer" || c.TrainerCommand != "/usr/local/bin/train --quiet" ||
		c.GPUSlots != 4 || c.TrainerDevice != "cuda" {
		t.Errorf("overrides %+v", c)
	}

	for name, tc := range map[string]struct{ key, value, msg string }{
		"device": {"CURATE_TRAINER_DEVICE", "tpu", "CURATE_TRAINER_DEVICE"},
		"slots":  {"CURATE_GPU_SLOTS", "99", "CURATE_GPU_SLOTS"},
		"number": {"CURATE_GPU_SLOTS", "two", "CURATE_GPU_SLOTS"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s=%s: %v", tc.key, tc.value, err)
			}
		})
	}
}
