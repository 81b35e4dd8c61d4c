package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// variables are the environment variables the Config fields name.
func variables(t *testing.T) []string {
	t.Helper()
	var names []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("env"), ",")
		if name == "" {
			t.Fatalf("field %s names no environment variable", typ.Field(i).Name)
		}
		names = append(names, name)
	}
	return names
}

// clearEnv empties every variable Curate reads, for the test's duration:
// an empty variable means its default.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range variables(t) {
		t.Setenv(name, "")
	}
}

// The defaults, as the README's table gives them, whatever the
// environment holds; an empty environment reads as the same.
func TestDefaults(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./trainer here
	// and no trainer environment installed
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CURATE_TOOLS", "")
	want := Config{
		Addr: ":8080", DataDir: "./.curate", SessionTTL: 12 * time.Hour, Workers: 10, LogLevel: "info", LogFormat: "text",
		BodyLimit: 2 << 20, ShutdownTimeout: 30 * time.Second, BatchBodyLimit: 64 << 20, BodyReadTimeout: 30 * time.Second, BodyMinRate: 16 << 10, APIRate: 200, APIBurst: 400, FeedbackPerUser: 10,
		JudgeBudgetUSD: 20, FineTuneBudgetUSD: 100, FineTunePoll: 30 * time.Second, BedrockPrefix: "curate/fine-tuning",
		LoopCheckEvery: time.Minute, LoopPoll: 15 * time.Second, ServingPoll: 30 * time.Second,
		TrainerPython: "python3", GPUSlots: 1, TrainerDevice: "auto", MetricsAddr: "127.0.0.1:9090",
	}
	t.Setenv("CURATE_ADDR", ":9999")
	t.Setenv("CURATE_WORKERS", "not a number")
	if got := Defaults(); got != want {
		t.Errorf("Defaults() read the environment or changed:\n got %+v\nwant %+v", got, want)
	}
	if err := want.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}

	clearEnv(t)
	got, err := FromEnv()
	if err != nil || got != want {
		t.Errorf("FromEnv() with nothing set = %+v, %v; want the defaults", got, err)
	}
}

// Each kind of value is read from its variable.
func TestFromEnvReadsEveryKind(t *testing.T) {
	clearEnv(t)
	t.Setenv("CURATE_ADDR", "127.0.0.1:9000")
	t.Setenv("CURATE_SESSION_TTL", "90m")
	t.Setenv("CURATE_WORKERS", "0")
	t.Setenv("CURATE_BODY_LIMIT", "4096")
	t.Setenv("CURATE_API_RATE", "2.5")
	t.Setenv("CURATE_FINETUNE_BUDGET_USD", "0")
	t.Setenv("OPENAI_API_KEY", "sk-x")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9000" || c.SessionTTL != 90*time.Minute || c.Workers != 0 || c.BodyLimit != 4096 ||
		c.APIRate != 2.5 || c.FineTuneBudgetUSD != 0 || c.OpenAIAPIKey != "sk-x" {
		t.Errorf("FromEnv() = %+v", c)
	}
}

// A bad value is refused with a message naming its variable.
func TestFromEnvRefusals(t *testing.T) {
	for _, tc := range []struct{ key, value, msg string }{
		{"CURATE_SESSION_TTL", "soon", "CURATE_SESSION_TTL"},
		{"CURATE_SESSION_TTL", "30s", "CURATE_SESSION_TTL must be at least 1m"},
		{"CURATE_SHUTDOWN_TIMEOUT", "10", "CURATE_SHUTDOWN_TIMEOUT"},
		{"CURATE_FINETUNE_POLL", "often", "CURATE_FINETUNE_POLL"},
		{"CURATE_WORKERS", "ten", "CURATE_WORKERS"},
		{"CURATE_WORKERS", "1001", "workers must be 0 to 1000, not 1001"},
		{"CURATE_BODY_LIMIT", "1023", "CURATE_BODY_LIMIT must be at least 1024 bytes"},
		{"CURATE_SERVING_POLL", "500ms", "CURATE_SERVING_POLL must be 2s to 1h"},
		{"CURATE_BATCH_BODY_LIMIT", "64MiB", "CURATE_BATCH_BODY_LIMIT"},
		{"CURATE_API_RATE", "fast", "CURATE_API_RATE"},
		{"CURATE_API_BURST", "0", "CURATE_API_RATE, CURATE_API_BURST and CURATE_FEEDBACK_PER_USER must be positive"},
		{"CURATE_FEEDBACK_PER_USER", "-1", "must be positive"},
		{"CURATE_FINETUNE_BUDGET_USD", "-1", "CURATE_FINETUNE_BUDGET_USD must be a number of dollars, at least 0"},
		{"CURATE_FINETUNE_BUDGET_USD", "NaN", "CURATE_FINETUNE_BUDGET_USD must be a number of dollars, at least 0"},
		{"CURATE_FINETUNE_BUDGET_USD", "ten", "CURATE_FINETUNE_BUDGET_USD"},
		{"CURATE_ENV", "prod", `CURATE_ENV must be empty or "dev", not "prod"`},
		{"CURATE_TLS_CERT", "cert.pem", "set both CURATE_TLS_CERT and CURATE_TLS_KEY, or neither"},
		{"CURATE_LOG_FORMAT", "xml", "CURATE_LOG_FORMAT must be text or json"},
		{"CURATE_METRICS_ADDR", "9090", "CURATE_METRICS_ADDR must be host:port (such as 127.0.0.1:9090) or off"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tc.key, tc.value)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("FromEnv() = %v, want an error containing %q", err, tc.msg)
			}
		})
	}
	// Every bad variable is named at once.
	clearEnv(t)
	t.Setenv("CURATE_WORKERS", "ten")
	t.Setenv("CURATE_SESSION_TTL", "soon")
	_, err := FromEnv()
	if err == nil || !strings.Contains(err.Error(), "CURATE_WORKERS: ") || !strings.Contains(err.Error(), "CURATE_SESSION_TTL: ") {
		t.Errorf("two bad variables: %v", err)
	}
}

// The README's table of settings lists every variable.
func TestVariablesDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range variables(t) {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README.md does not document %s", name)
		}
	}
}

// The local trainer's settings: defaults, the bundled trainer found beside
// the working directory, overrides, and clear refusals.
func TestLocalTrainerSettings(t *testing.T) {
	clearEnv(t)
	// No trainer environment installed: python3 is the default.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CURATE_TOOLS", "")
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
	if d := Defaults(); d.TrainerDir != c.TrainerDir {
		t.Errorf("Defaults().TrainerDir = %q, want the bundled trainer %q", d.TrainerDir, c.TrainerDir)
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

// Metrics are served on loopback unless the operator names another
// address, and "off" serves none.
func TestMetricsAddr(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if addr, on := c.Metrics(); err != nil || !on || addr != "127.0.0.1:9090" {
		t.Errorf("default metrics address %q, %v, %v; want 127.0.0.1:9090", addr, on, err)
	}
	t.Setenv("CURATE_METRICS_ADDR", "0.0.0.0:9100")
	if c, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	if addr, on := c.Metrics(); !on || addr != "0.0.0.0:9100" {
		t.Errorf("metrics address %q, %v; want 0.0.0.0:9100", addr, on)
	}
	for _, off := range []string{"off", "OFF"} {
		t.Setenv("CURATE_METRICS_ADDR", off)
		if c, err = FromEnv(); err != nil {
			t.Fatal(err)
		}
		if addr, on := c.Metrics(); on {
			t.Errorf("CURATE_METRICS_ADDR=%s serves metrics on %q", off, addr)
		}
	}
}

// CURATE_TRAINER_PYTHON defaults to the trainer's environment that
// scripts/trainer-env.sh starts through trainer-python in CURATE_TOOLS
// (default ~/.cache/curate) when that is an executable, else python3.
func TestTrainerPythonDefaultsToTheEnvironment(t *testing.T) {
	clearEnv(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	tools := filepath.Join(cache, "curate")
	if err := os.MkdirAll(filepath.Join(tools, "trainer-env-0123", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(tools, "trainer-env-0123", "bin", "python")
	if err := os.WriteFile(python, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tools, "trainer-python")
	if err := os.Symlink(python, link); err != nil {
		t.Fatal(err)
	}
	if c, err := FromEnv(); err != nil || c.TrainerPython != DefaultTrainerPython {
		t.Errorf("a link to a file that is not executable: TrainerPython %q, %v; want %q", c.TrainerPython, err, DefaultTrainerPython)
	}
	if err := os.Chmod(python, 0o755); err != nil {
		t.Fatal(err)
	}
	if c, err := FromEnv(); err != nil || c.TrainerPython != link {
		t.Errorf("with the environment installed: TrainerPython %q, %v; want %q", c.TrainerPython, err, link)
	}
	if d := Defaults(); d.TrainerPython != link {
		t.Errorf("Defaults().TrainerPython = %q, want %q", d.TrainerPython, link)
	}

	// CURATE_TOOLS moves the cache; the link is looked for there.
	t.Setenv("CURATE_TOOLS", t.TempDir())
	if c, err := FromEnv(); err != nil || c.TrainerPython != DefaultTrainerPython {
		t.Errorf("CURATE_TOOLS without the link: TrainerPython %q, %v; want %q", c.TrainerPython, err, DefaultTrainerPython)
	}
	t.Setenv("CURATE_TOOLS", tools)
	if c, err := FromEnv(); err != nil || c.TrainerPython != link {
		t.Errorf("CURATE_TOOLS with the link: TrainerPython %q, %v; want %q", c.TrainerPython, err, link)
	}
	t.Setenv("CURATE_TRAINER_PYTHON", "/opt/venv/bin/python")
	if c, err := FromEnv(); err != nil || c.TrainerPython != "/opt/venv/bin/python" {
		t.Errorf("CURATE_TRAINER_PYTHON set: TrainerPython %q, %v", c.TrainerPython, err)
	}
}

// Local trainers reach Curate at CURATE_TRAINER_API_URL, else on the
// loopback at CURATE_ADDR's port.
func TestTrainerAPI(t *testing.T) {
	for _, tc := range []struct{ addr, url, want string }{
		{":8080", "", "http://127.0.0.1:8080"},
		{"0.0.0.0:9000", "", "http://127.0.0.1:9000"},
		{"[::]:8443", "", "http://127.0.0.1:8443"},
		{":8080", "https://curate.internal", "https://curate.internal"},
		{"nonsense", "", ""},
	} {
		if got := (Config{Addr: tc.addr, TrainerAPIURL: tc.url}).TrainerAPI(); got != tc.want {
			t.Errorf("Addr %q, TrainerAPIURL %q: %q, want %q", tc.addr, tc.url, got, tc.want)
		}
	}
}
