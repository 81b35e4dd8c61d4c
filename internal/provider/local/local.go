// Package local runs Curate's fine-tuning jobs on this machine with the
// bundled trainer (trainer/curate_trainer) or any program that speaks its
// protocol.
//
// Each job owns a run directory, <runs root>/train_<curate job id>/, and
// everything about the job lives there, so a worker that restarts learns
// the job's state from the directory alone:
//
//	config.json   the trainer's configuration, written by Create
//	train.jsonl   the training file, copied by Upload (eval.jsonl likewise)
//	upload.json   the export format of the files
//	trainer.pid   the trainer's pid and kernel start time
//	run.lock      held (flock) by the trainer for as long as it lives
//	events.jsonl  the trainer's stdout: one protocol event per line
//	stderr.log    the trainer's stderr (train.log is the trainer's own log)
//	exit.json     the exit status, when this process saw the trainer exit
//	cancel.json   written when the job was cancelled
//	outcome.json  the result, once known
//
// The trainer runs detached in its own process group and inherits two
// locked files: the run's lock and one GPU slot's lock. The kernel drops
// both when the last process holding them exits, however it ends, so "is
// the trainer alive" and "is the GPU free" never depend on pids that may
// have been reused or on this process having been up the whole time.
package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/curate/curate/internal/provider"
)

// Name is the provider's name in Curate.
const Name = "local"

// The methods the local trainer offers beyond the shared ones.
const (
	Reward provider.Method = "reward" // a reward model from preference pairs
	IRS    provider.Method = "irs"    // iterative rejection sampling
	GRPO   provider.Method = "grpo"   // group relative policy optimisation against a reward
	PPO    provider.Method = "ppo"    // proximal policy optimisation with a value head
)

// Defaults for Config's zero fields.
const (
	DefaultPython       = "python3"
	DefaultSlots        = 1
	DefaultCancelGrace  = 10 * time.Second
	DefaultMaxFileBytes = 10 << 30
)

// Config holds the settings.
type Config struct {
	RunsRoot string // where run directories are made, e.g. <data dir>/runs; required
	// ModelsDir holds the models jobs may train (base models, and IRS
	// reward models), each a Hugging Face model directory named by its
	// path inside it; required.
	ModelsDir   string
	Python      string   // the interpreter for the bundled trainer; default python3
	TrainerDir  string   // put first on PYTHONPATH, e.g. <repo>/trainer; empty uses the installed package
	Command     []string // replaces `Python -m curate_trainer run`; the config path is appended
	Env         []string // added to the trainer's environment, KEY=VALUE
	Slots       int      // trainers that may run at once; default 1
	SlotDevices []string // CUDA_VISIBLE_DEVICES for each slot; optional, one per slot
	Device      string   // "auto" (default), "cuda" or "cpu"
	RequireGPU  bool     // fail rather than train on the CPU when no GPU is found
	// CancelGrace is how long a trainer has to save and exit after SIGTERM
	// (or after reporting its end) before its process group is killed.
	CancelGrace  time.Duration
	MaxFileBytes int64    // largest training or evaluation file; default 10 GiB
	Settings     Settings // the settings only the local trainer has
}

// Provider runs trainers as detached child processes.
type Provider struct {
	cfg  Config
	argv []string
	env  []string

	mu      sync.Mutex
	reaping map[string]bool // runs whose trainer this process started and has not yet seen exit
}

var _ provider.Provider = (*Provider)(nil)

// New checks the configuration and makes the runs root and the models
// directory.
func New(cfg Config) (*Provider, error) {
	if cfg.RunsRoot == "" {
		return nil, errors.New("local: RunsRoot is required")
	}
	root, err := filepath.Abs(cfg.RunsRoot)
	if err != nil {
		return nil, fmt.Errorf("local: runs root: %w", err)
	}
	cfg.RunsRoot = root
	if cfg.ModelsDir == "" {
		return nil, errors.New("local: ModelsDir is required")
	}
	if cfg.ModelsDir, err = filepath.Abs(cfg.ModelsDir); err != nil {
		return nil, fmt.Errorf("local: models directory: %w", err)
	}
	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("local: Slots must be at least 1, got %d", cfg.Slots)
	}
	if len(cfg.SlotDevices) != 0 && len(cfg.SlotDevices) != cfg.Slots {
		return nil, fmt.Errorf("local: SlotDevices names %d devices for %d slots", len(cfg.SlotDevices), cfg.Slots)
	}
	switch cfg.Device {
	case "":
		cfg.Device = "auto"
	case "auto", "cuda", "cpu":
	default:
		return nil, fmt.Errorf(`local: Device must be "auto", "cuda" or "cpu", got %q`, cfg.Device)
	}
	if cfg.RequireGPU && cfg.Device == "cpu" {
		return nil, errors.New(`local: RequireGPU is set but Device is "cpu"`)
	}
	if cfg.CancelGrace <= 0 {
		cfg.CancelGrace = DefaultCancelGrace
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if err := provider.Invalid(cfg.Settings.check()); err != nil {
		return nil, fmt.Errorf("local: settings: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, slotsDir), 0o750); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := os.MkdirAll(cfg.ModelsDir, 0o750); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	p := &Provider{cfg: cfg, reaping: map[string]bool{}}
	p.argv = cfg.Command
	if len(p.argv) == 0 {
		p.argv = []string{cfg.Python, "-m", "curate_trainer", "run"}
	}
	p.env = trainerEnv(cfg)
	return p, nil
}

// trainerEnv is this process's environment with PYTHONPATH led by the
// trainer directory and the configured additions.
func trainerEnv(cfg Config) []string {
	env := os.Environ()
	if cfg.TrainerDir != "" {
		dir, err := filepath.Abs(cfg.TrainerDir)
		if err != nil {
			dir = cfg.TrainerDir
		}
		path := dir
		if old := os.Getenv("PYTHONPATH"); old != "" {
			path += string(os.PathListSeparator) + old
		}
		env = append(env, "PYTHONPATH="+path)
	}
	return append(env, cfg.Env...)
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// fail wraps err as a provider error for op. Local failures are worth
// retrying unless permanent is set.
func fail(op string, permanent bool, err error) error {
	return &provider.Error{Provider: Name, Op: op, Message: err.Error(), Permanent: permanent, Err: err}
}
