// Command trainertest speaks the local trainer's protocol
// (trainer/README.md) without training anything, so the local provider can
// be tested where there is no GPU and no torch. Invoked as
//
//	trainertest run CONFIG_JSON
//
// in the run directory, it behaves as FAKE_TRAINER_MODE says:
//
//	ok         three training steps, an evaluation, a checkpoint, final/, done
//	malformed  ok, with lines that are not protocol events among the events
//	crash      one step, a traceback on stderr, exit 3 without done
//	error      an error event with FAKE_TRAINER_MESSAGE, exit 1
//	hang       starts a child, ignores SIGTERM (both), never ends
//	term       waits; on SIGTERM saves a checkpoint, reports cancelled, exits 143
//	chatty     50 MB on stderr and 20,000 log lines on stdout, then ok
//	wait       waits until the file "release" appears in the run directory, then ok
//
// With method "irs" the ok run is an IRS run instead: per iteration
// (irs.n_iterations, default 3) a generating and a scoring phase, an
// iteration summary (average reward 1.5, 2.0, 2.5, ...; weights moving
// from the initial ones) and one SFT step, then final/ and done.
//
// With method "grpo" or "ppo" it is a policy run: a held-out check before
// the first step (score 0.5), four steps whose reward is 0.2 + 0.1·step,
// KL 0.01·step and clip fraction 0.05·step, a held-out check after step 4
// (score 0.6), final/ and done. FAKE_TRAINER_MODE=stop ends it after step
// 2 with a stop event (the KL bound) instead.
//
// With method "reward" it trains two epochs (losses 0.7, 0.6 and 0.65),
// evaluates after each (evaluation losses 0.5 and 0.55, with ranking
// accuracy, MSE, MAE, Pearson and ten calibration bins), stops early on
// the second (a stop event), reports epoch 1 as the best kept, saves
// final/ as a reward model and reports done.
// Every training step reports its learning rate and gradient norm: lr
// 0.0002/step and grad_norm 1 + step/2 (a policy step: lr 1e-5 and
// grad_norm 0.25·step). Metrics also go to metrics.jsonl with "ts" and
// "phase", as the trainer writes them.
//
// FAKE_TRAINER_DELAY (a Go duration) makes each training step take that
// long, so a watcher can see the run move.
//
// Every start appends a line to starts.log in the run directory, and
// CURATE_REWARD_TOKEN=<its value> to env.log when the run was given a key
// for Curate's reward API.
//
// Invoked as `trainertest probe` it reports a machine as FAKE_TRAINER_PROBE
// says (see probe).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv("FAKE_TRAINER_MODE") == "child" {
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	}
	if len(os.Args) == 2 && os.Args[1] == "probe" {
		probe(os.Getenv("FAKE_TRAINER_PROBE"))
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "run" {
		fmt.Fprintln(os.Stderr, "usage: trainertest run CONFIG_JSON")
		os.Exit(2)
	}
	os.Exit(run(os.Args[2], os.Getenv("FAKE_TRAINER_MODE")))
}

// probe reports a machine as the real probe does: by default one that
// can train on the CPU; FAKE_TRAINER_PROBE=gpu one with an 80 GB GPU and
// Unsloth (whose training steps then report the GPU memory they hold),
// no-peft one whose Python lacks peft, no-torch (or FAKE_TRAINER_MODE=
// no-torch) one without torch, and fail none at all (it exits 1).
func probe(mode string) {
	if os.Getenv("FAKE_TRAINER_MODE") == "no-torch" {
		mode = "no-torch"
	}
	info := map[string]any{"event": "probe", "device": "cpu", "python": "3.12.3", "torch": "2.5.1",
		"transformers": "4.46.3", "peft": "0.13.2"}
	switch mode {
	case "gpu":
		info["device"], info["gpu_name"], info["gpu_memory_bytes"], info["gpu_count"] = "cuda", "NVIDIA H100 80GB HBM3", 85520809984, 1
		info["cuda"], info["bf16"], info["unsloth"] = "12.4", true, "2024.11.7"
	case "no-peft":
		delete(info, "peft")
		info["note"] = "peft not installed, so runs will fail here"
	case "no-torch":
		info = map[string]any{"event": "probe", "device": "none", "python": "3.12.3",
			"note": "torch is not installed, so this machine cannot run the local trainer"}
	case "fail":
		fmt.Fprintln(os.Stderr, "ModuleNotFoundError: No module named 'curate_trainer'")
		os.Exit(1)
	}
	emit(info)
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format(time.RFC3339)+" INFO curate_trainer: "+format+"\n", args...)
}

func run(configPath, mode string) int {
	dir := filepath.Dir(configPath)
	appendLine(filepath.Join(dir, "starts.log"), strconv.Itoa(os.Getpid()))
	if token := os.Getenv("CURATE_REWARD_TOKEN"); token != "" {
		appendLine(filepath.Join(dir, "env.log"), "CURATE_REWARD_TOKEN="+token)
	}
	var cfg struct {
		Method    string `json:"method"`
		BaseModel string `json:"base_model"`
		IRS       struct {
			NIterations int `json:"n_iterations"`
			DW          struct {
				InitialWeights map[string]float64 `json:"initial_weights"`
			} `json:"dw_config"`
		} `json:"irs"`
	}
	b, err := os.ReadFile(configPath)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		emit(map[string]any{"event": "error", "message": "config: " + err.Error()})
		return 1
	}
	logf("method %s, base model %s", cfg.Method, cfg.BaseModel)
	emit(map[string]any{"event": "progress", "phase": "loading"})

	switch mode {
	case "crash":
		step(dir, 1, 1.0)
		fmt.Fprintln(os.Stderr, "Traceback (most recent call last):\n  File \"train.py\", line 1\nRuntimeError: boom")
		return 3
	case "error":
		emit(map[string]any{"event": "error", "message": os.Getenv("FAKE_TRAINER_MESSAGE")})
		return 1
	case "hang":
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "FAKE_TRAINER_MODE=child")
		if err := child.Start(); err != nil {
			emit(map[string]any{"event": "error", "message": err.Error()})
			return 1
		}
		os.WriteFile(filepath.Join(dir, "child.pid"), []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		signal.Ignore(syscall.SIGTERM)
		emit(map[string]any{"event": "progress", "phase": "training", "step": 0, "total_steps": 3, "epoch": 1})
		sleepForever()
	case "term":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM)
		emit(map[string]any{"event": "progress", "phase": "training", "step": 0, "total_steps": 3, "epoch": 1})
		<-stop
		os.MkdirAll(filepath.Join(dir, "checkpoints", "step_1"), 0o755)
		emit(map[string]any{"event": "artifact", "path": "checkpoints/step_1", "kind": "checkpoint"})
		emit(map[string]any{"event": "error", "message": "cancelled"})
		return 143
	case "chatty":
		chunk := []byte(strings.Repeat("warning: this library has a lot to say\n", 1638)) // ~64 KB
		for written := 0; written < 50<<20; written += len(chunk) {
			os.Stderr.Write(chunk)
		}
		for i := range 20000 {
			fmt.Fprintf(os.Stdout, "stdout noise %d\n", i)
		}
	case "wait":
		for {
			if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "malformed":
		fmt.Println("not json at all")
		fmt.Println(`{"event": "metric", "step": `)
		fmt.Println(`[1, 2, 3]`)
		fmt.Println(`{"event": "metric", "step": "two", "loss": "low"}`)
		fmt.Println(`{"no_event": true}`)
		os.Stdout.Write([]byte{0xff, 0xfe, '\n'})
	}
	switch cfg.Method {
	case "irs":
		return trainIRS(dir, cfg.IRS.NIterations, cfg.IRS.DW.InitialWeights)
	case "grpo", "ppo":
		return trainPolicy(dir, cfg.Method, mode == "stop")
	case "reward":
		return trainReward(dir)
	}
	return train(dir)
}

// record sends a metric event and appends it to metrics.jsonl with its phase.
func record(dir, phase string, v map[string]any) {
	emit(merge(map[string]any{"event": "metric"}, v))
	metricsLine(dir, merge(map[string]any{"phase": phase}, v))
}

// stopEarly sends a stop event and records it, as the trainer does.
func stopEarly(dir string, step, epoch int, reason string) {
	emit(map[string]any{"event": "stop", "step": step, "epoch": epoch, "reason": reason})
	metricsLine(dir, map[string]any{"phase": "STOPPED", "step": step, "epoch": epoch, "reason": reason})
}

// trainPolicy is the ok run of methods grpo and ppo.
func trainPolicy(dir, method string, stop bool) int {
	record(dir, "EVALUATING", map[string]any{"step": 0, "epoch": 0, "heldout_score": 0.5})
	for i := 1; i <= 4; i++ {
		if stop && i == 3 {
			stopEarly(dir, 2, 1, "KL divergence from the reference reached 0.8 after step 2, above the bound 0.5; the adapter from step 1, the last within it, is kept")
			break
		}
		emit(map[string]any{"event": "progress", "phase": "generating", "step": i - 1, "total_steps": 4, "epoch": 1})
		emit(map[string]any{"event": "progress", "phase": "training", "step": i, "total_steps": 4, "epoch": 1})
		f := float64(i)
		m := map[string]any{"step": i, "epoch": 1, "loss": 0.5 - 0.1*f, "lr": 1e-5, "grad_norm": 0.25 * f, "reward": 0.2 + 0.1*f, "reward_std": 0.1,
			"kl": 0.01 * f, "clip_fraction": 0.05 * f, "response_length": 20.0, "reward_breakdown": map[string]float64{"rel": 0.1 * f}}
		if method == "ppo" {
			m["value_loss"] = 1.0 / f
		}
		record(dir, "TRAINING", m)
	}
	if !stop {
		record(dir, "EVALUATING", map[string]any{"step": 4, "epoch": 1, "heldout_score": 0.6, "train_reward": 0.45})
	}
	os.MkdirAll(filepath.Join(dir, "final"), 0o755)
	os.WriteFile(filepath.Join(dir, "final", "adapter_config.json"), []byte("{}"), 0o644)
	emit(map[string]any{"event": "artifact", "path": "final", "kind": "adapter"})
	emit(map[string]any{"event": "done"})
	return 0
}

// calibration is ten bins as the trainer reports them: the middle ones
// filled, the outer ones empty.
func calibration(shift float64) []map[string]any {
	var bins []map[string]any
	for i := range 10 {
		b := map[string]any{"lower": float64(i) / 10, "upper": float64(i+1) / 10, "count": 0, "predicted": nil, "observed": nil}
		if i >= 2 && i <= 7 {
			mid := (float64(i) + 0.5) / 10
			b["count"], b["predicted"], b["observed"] = 4, mid, min(1, mid+shift)
		}
		bins = append(bins, b)
	}
	return bins
}

// trainReward is the ok run of method reward.
func trainReward(dir string) int {
	evals := []struct {
		loss, acc, shift float64
	}{{0.5, 0.75, 0.05}, {0.55, 0.7, 0.1}}
	steps := [][]float64{{0.7, 0.6}, {0.65}}
	n := 0
	for epoch, losses := range steps {
		for _, loss := range losses {
			n++
			step(dir, n, loss)
		}
		e := evals[epoch]
		emit(map[string]any{"event": "progress", "phase": "evaluating", "step": n, "epoch": epoch + 1})
		record(dir, "EVALUATING", map[string]any{"step": n, "epoch": epoch + 1, "eval_loss": e.loss, "ranking_accuracy": e.acc,
			"eval_mse": 0.04, "eval_mae": 0.15, "pearson": 0.82, "calibration": calibration(e.shift), "calibration_error": e.shift})
	}
	stopEarly(dir, n, 2, "validation loss has not improved for 1 evaluation (best 0.5 after epoch 1, now 0.55); the model from epoch 1 is kept")
	record(dir, "EVALUATING", map[string]any{"step": n, "best_epoch": 1, "best_step": 2, "best_eval_loss": 0.5})
	os.MkdirAll(filepath.Join(dir, "final"), 0o755)
	os.WriteFile(filepath.Join(dir, "final", "config.json"), []byte("{}"), 0o644)
	emit(map[string]any{"event": "artifact", "path": "final", "kind": "reward_model"})
	emit(map[string]any{"event": "done"})
	return 0
}

// trainIRS is the ok run of method irs: iteration i has an average reward
// of 1 + i/2 and uses the weights of the one before, each weight moved by
// +0.1 (rel), -0.1 (faith) and 0 (conc) per iteration.
func trainIRS(dir string, n int, weights map[string]float64) int {
	if n == 0 {
		n = 3
	}
	delta := map[string]float64{"rel": 0.1, "faith": -0.1}
	for i := 1; i <= n; i++ {
		for _, phase := range []string{"generating", "scoring"} {
			emit(map[string]any{"event": "progress", "phase": phase, "iter": i})
			metricsLine(dir, map[string]any{"iter": i, "phase": strings.ToUpper(phase), "progress": 0.0})
		}
		next := map[string]float64{}
		for k, w := range weights {
			next[k] = w + delta[k]
		}
		summary := map[string]any{"step": 0, "iter": i, "avg_reward": 1 + float64(i)/2, "best_avg_reward": 2 + float64(i)/2,
			"n_samples": 4, "reward_breakdown": map[string]float64{"rel": 0.9, "faith": 0.8, "conc": 0.7}, "weights": weights, "next_weights": next}
		emit(merge(map[string]any{"event": "metric"}, summary))
		metricsLine(dir, merge(map[string]any{"phase": "METRICS"}, summary))
		weights = next
		step(dir, i, 2.0/float64(i))
		os.MkdirAll(filepath.Join(dir, "checkpoints", "iter_"+strconv.Itoa(i)), 0o755)
		emit(map[string]any{"event": "artifact", "path": "checkpoints/iter_" + strconv.Itoa(i), "kind": "checkpoint"})
	}
	os.MkdirAll(filepath.Join(dir, "final"), 0o755)
	os.WriteFile(filepath.Join(dir, "final", "adapter_config.json"), []byte("{}"), 0o644)
	emit(map[string]any{"event": "artifact", "path": "final", "kind": "adapter"})
	emit(map[string]any{"event": "done"})
	return 0
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// metricsLine appends one line to metrics.jsonl, stamped.
func metricsLine(dir string, v map[string]any) {
	b, _ := json.Marshal(merge(map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano)}, v))
	appendLine(filepath.Join(dir, "metrics.jsonl"), string(b))
}

// train is the ok run: losses 2.0, 1.5, 1.25 at steps 1 to 3, a checkpoint
// at step 2, an evaluation loss of 1.4 at step 3, final/ and done.
func train(dir string) int {
	for i, loss := range []float64{2.0, 1.5, 1.25} {
		step(dir, i+1, loss)
		if i+1 == 2 {
			os.MkdirAll(filepath.Join(dir, "checkpoints", "step_2"), 0o755)
			emit(map[string]any{"event": "artifact", "path": "checkpoints/step_2", "kind": "checkpoint"})
		}
	}
	emit(map[string]any{"event": "progress", "phase": "evaluating", "step": 3, "epoch": 1})
	emit(map[string]any{"event": "metric", "step": 3, "epoch": 1, "eval_loss": 1.4, "eval_perplexity": 4.0552})
	emit(map[string]any{"event": "progress", "phase": "saving"})
	os.MkdirAll(filepath.Join(dir, "final"), 0o755)
	os.WriteFile(filepath.Join(dir, "final", "adapter_config.json"), []byte("{}"), 0o644)
	emit(map[string]any{"event": "artifact", "path": "final", "kind": "adapter"})
	emit(map[string]any{"event": "done"})
	logf("done")
	return 0
}

func step(dir string, n int, loss float64) {
	if d, err := time.ParseDuration(os.Getenv("FAKE_TRAINER_DELAY")); err == nil {
		time.Sleep(d)
	}
	emit(map[string]any{"event": "progress", "phase": "training", "step": n, "total_steps": 3, "epoch": 1})
	m := map[string]any{"step": n, "epoch": 1, "loss": loss, "lr": 0.0002 / float64(n), "grad_norm": 1 + float64(n)/2}
	if os.Getenv("FAKE_TRAINER_PROBE") == "gpu" {
		// As the trainer on CUDA reports it: the memory it holds.
		m["gpu_mem_used"] = int64(6800000000 + n*1000)
	}
	emit(merge(map[string]any{"event": "metric"}, m))
	metricsLine(dir, merge(map[string]any{"phase": "TRAINING"}, m))
	logf("step %d loss %g", n, loss)
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}
