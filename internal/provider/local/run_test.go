package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curate/curate/internal/provider"
)

func TestHappyPath(t *testing.T) {
	f := newFixture(t, "ok", func(c *Config) { c.Settings.LoRAR = 16 })
	req := f.request("job-1", provider.Supervised, "openai_chat")
	req.Hyper = provider.Hyperparameters{Epochs: provider.Num(2), BatchSize: provider.Num(8), LearningRateMultiplier: provider.Num(0.5)}
	seed := int64(7)
	req.Seed = &seed
	job, err := f.p.Create(context.Background(), req)
	must(t, err)
	t.Cleanup(func() { f.kill(job.ID) })
	if job.ID != "train_job-1" || job.CurateJobID != "job-1" || job.BaseModel != f.model {
		t.Fatalf("job = %+v", job)
	}

	got := pollToEnd(t, f.p, job.ID)
	run := f.runDir(job.ID)
	want := provider.Status{
		State: provider.StateSucceeded, ProviderState: "succeeded",
		Progress:       provider.Progress{Step: 3, Epoch: 1, TotalEpochs: 2},
		FineTunedModel: filepath.Join(run, "final"),
	}
	if got.status.State != want.State || got.status.FineTunedModel != want.FineTunedModel || got.status.Error != "" {
		t.Errorf("status = %+v, want %+v", got.status, want)
	}
	if len(got.checkpoints) != 1 || got.checkpoints[0].ID != "step_2" || got.checkpoints[0].Step != 2 ||
		got.checkpoints[0].Model != filepath.Join(run, "checkpoints", "step_2") {
		t.Errorf("checkpoints = %+v, want step_2", got.checkpoints)
	}
	for _, msg := range []string{"phase loading", "phase training", "phase evaluating", "phase saving", "saved adapter at final", "done"} {
		if !containsMessage(got.events, "info", msg) {
			t.Errorf("no event %q in %q", msg, messages(got.events))
		}
	}
	phases := 0
	for _, m := range messages(got.events) {
		if m == "phase training" {
			phases++
		}
	}
	if phases != 1 {
		t.Errorf("phase training reported %d times, want once (progress comes every step)", phases)
	}

	// The fake trainer's losses: 2.0, 1.5, 1.25, then evaluation 1.4 at step 3.
	metrics, err := f.p.Metrics(context.Background(), job.ID)
	must(t, err)
	wantMetrics := []provider.StepMetric{
		{Step: 1, Epoch: 1, TrainLoss: float(2.0)},
		{Step: 2, Epoch: 1, TrainLoss: float(1.5)},
		{Step: 3, Epoch: 1, TrainLoss: float(1.25), ValidLoss: float(1.4)},
	}
	if !reflect.DeepEqual(metrics, wantMetrics) {
		gotJSON, _ := json.Marshal(metrics)
		t.Errorf("metrics = %s", gotJSON)
	}

	// Every line of metrics.jsonl came once, as the trainer wrote it.
	log, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	must(t, err)
	lines := strings.Split(strings.TrimSuffix(string(log), "\n"), "\n")
	if len(got.records) != 3 || len(lines) != 3 {
		t.Fatalf("%d records of %d lines", len(got.records), len(lines))
	}
	for i, r := range got.records {
		if string(r.Line) != lines[i] || !strings.Contains(lines[i], `"phase":"TRAINING"`) {
			t.Errorf("record %d = %s, want %s", i, r.Line, lines[i])
		}
	}

	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &cfg))
	wantCfg := map[string]any{
		"method": "sft", "base_model": f.model, "device": "auto", "require_gpu": false, "seed": 7.0, "job_id": "job-1",
		"train_file": filepath.Join(run, "train.jsonl"), "eval_file": filepath.Join(run, "eval.jsonl"),
		// learning rate: the sft default 2e-4 times 0.5.
		"hyperparameters": map[string]any{"epochs": 2.0, "batch_size": 8.0, "learning_rate": 1e-4, "lora_r": 16.0},
	}
	if !reflect.DeepEqual(cfg, wantCfg) {
		t.Errorf("config.json = %s", b)
	}
	for _, name := range []string{"train.jsonl", "eval.jsonl", "events.jsonl", "stderr.log", "trainer.pid", "outcome.json", "final"} {
		if _, err := os.Stat(filepath.Join(run, name)); err != nil {
			t.Errorf("run directory: %v", err)
		}
	}

	// Found again later, with its result.
	found, ok, err := f.p.FindJob(context.Background(), "job-1")
	if err != nil || !ok || found.Status.State != provider.StateSucceeded || found.Status.FineTunedModel != want.FineTunedModel {
		t.Errorf("FindJob after the end = %+v, %v, %v", found, ok, err)
	}
	// Polling again from the start reports the same outcome and events.
	again, err := f.p.Poll(context.Background(), job.ID, "")
	must(t, err)
	if again.Status.State != provider.StateSucceeded || len(again.Events) != len(got.events) {
		t.Errorf("second poll from the start: %+v with %d events, want succeeded with %d", again.Status, len(again.Events), len(got.events))
	}
}

func TestIRSConfigHasTheDesignDefaults(t *testing.T) {
	f := newFixture(t, "ok")
	job := f.start("job-irs", IRS, "openai_chat")
	pollToEnd(t, f.p, job.ID)
	var cfg struct {
		Method string         `json:"method"`
		IRS    map[string]any `json:"irs"`
	}
	b, err := os.ReadFile(filepath.Join(f.runDir(job.ID), "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &cfg))
	// The request in the IRS design, section 4.1.
	want := map[string]any{
		"n_iterations": 3.0, "n_candidates": 4.0, "batch_size": 2.0, "learning_rate": 2e-5, "max_new_tokens": 256.0,
		"dw_config": map[string]any{
			"history_window": 5.0, "temperature": 2.0,
			"initial_weights": map[string]any{"rel": 1.0, "faith": 1.0, "conc": 0.5},
		},
	}
	if cfg.Method != "irs" || !reflect.DeepEqual(cfg.IRS, want) {
		t.Errorf("config.json = %s", b)
	}
}

func TestMalformedLinesAreLogText(t *testing.T) {
	f := newFixture(t, "malformed")
	job := f.start("job-2", provider.Supervised, "openai_chat")
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateSucceeded {
		t.Fatalf("status = %+v, want succeeded", got.status)
	}
	for _, line := range []string{"not json at all", `{"event": "metric", "step": `, "[1, 2, 3]", `{"event": "metric", "step": "two", "loss": "low"}`, `{"no_event": true}`, "\uFFFD"} {
		if !containsMessage(got.events, "info", line) {
			t.Errorf("line %q is not a log event; events %q", line, messages(got.events))
		}
	}
	metrics, err := f.p.Metrics(context.Background(), job.ID)
	must(t, err)
	if len(metrics) != 3 {
		t.Errorf("metrics = %d steps, want the 3 well-formed ones", len(metrics))
	}
}

func TestCrashFailsWithLogTail(t *testing.T) {
	f := newFixture(t, "crash")
	job := f.start("job-3", provider.Supervised, "openai_chat")
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateFailed {
		t.Fatalf("status = %+v, want failed", got.status)
	}
	for _, part := range []string{"exited without reporting done", "exit status 3", "RuntimeError: boom", "step 1 loss 1"} {
		if !strings.Contains(got.status.Error, part) {
			t.Errorf("error %q lacks %q", got.status.Error, part)
		}
	}
	if got.status.FineTunedModel != "" {
		t.Errorf("a failed job has model %q", got.status.FineTunedModel)
	}
	// The run directory is kept for inspection.
	for _, name := range []string{"config.json", "train.jsonl", "events.jsonl", "stderr.log"} {
		if _, err := os.Stat(filepath.Join(f.runDir(job.ID), name)); err != nil {
			t.Error(err)
		}
	}
}

func TestErrorEventFailsWithItsMessage(t *testing.T) {
	msg := "no GPU available: require_gpu is true but CUDA is not available"
	f := newFixture(t, "error", func(c *Config) { c.Env = append(c.Env, "FAKE_TRAINER_MESSAGE="+msg) })
	job := f.start("job-4", provider.DPO, "trl_preference")
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateFailed || got.status.Error != msg {
		t.Fatalf("status = %+v, want failed with %q", got.status, msg)
	}
	if !containsMessage(got.events, "error", msg) {
		t.Errorf("no error event in %q", messages(got.events))
	}
}

func TestCancelKillsAHungTrainerAndItsChildren(t *testing.T) {
	f := newFixture(t, "hang")
	job := f.start("job-5", provider.Supervised, "openai_chat")
	run := f.runDir(job.ID)
	child, err := strconv.Atoi(string(f.waitFile(filepath.Join(run, "child.pid"))))
	must(t, err)
	leader := f.pid(job.ID).PID

	res, err := f.p.Poll(context.Background(), job.ID, "")
	must(t, err)
	if res.Status.State != provider.StateRunning {
		t.Fatalf("before cancel: %+v", res.Status)
	}
	began := time.Now()
	must(t, f.p.Cancel(context.Background(), job.ID))
	took := time.Since(began)
	// Both ignore SIGTERM, so only SIGKILL after the grace period ends them.
	if took < testGrace || took > testGrace+5*time.Second {
		t.Errorf("Cancel took %v; want the %v grace period, then the kill", took, testGrace)
	}
	if !gone(leader) || !gone(child) {
		t.Fatalf("after Cancel: trainer %d gone %v, its child %d gone %v", leader, gone(leader), child, gone(child))
	}
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateCancelled {
		t.Errorf("status = %+v, want cancelled", got.status)
	}
	must(t, f.p.Cancel(context.Background(), job.ID)) // a second cancel is harmless
}

func TestCancelLetsTheTrainerSaveACheckpoint(t *testing.T) {
	f := newFixture(t, "term", func(c *Config) { c.CancelGrace = 10 * time.Second })
	job := f.start("job-6", provider.Supervised, "openai_chat")
	f.waitFile(filepath.Join(f.runDir(job.ID), "events.jsonl"))
	began := time.Now()
	must(t, f.p.Cancel(context.Background(), job.ID))
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Cancel took %v; the trainer ends at once on SIGTERM", took)
	}
	got := pollToEnd(t, f.p, job.ID)
	if got.status.State != provider.StateCancelled {
		t.Errorf("status = %+v, want cancelled", got.status)
	}
	if len(got.checkpoints) != 1 || got.checkpoints[0].ID != "step_1" {
		t.Errorf("checkpoints = %+v, want the one saved on cancel", got.checkpoints)
	}
}

func TestChattyTrainer(t *testing.T) {
	f := newFixture(t, "chatty")
	job := f.start("job-7", provider.Supervised, "openai_chat")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := pollToEnd(t, f.p, job.ID)
	runtime.ReadMemStats(&after)
	if got.status.State != provider.StateSucceeded {
		t.Fatalf("status = %+v, want succeeded", got.status)
	}
	info, err := os.Stat(filepath.Join(f.runDir(job.ID), "stderr.log"))
	must(t, err)
	if info.Size() < 50<<20 {
		t.Errorf("stderr.log has %d bytes, want the 50 MB written", info.Size())
	}
	// Polling reads a bounded window of events.jsonl and never stderr.log.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("polling allocated %d bytes for a 50 MB log", alloc)
	}
	var noise []string
	for _, m := range messages(got.events) {
		if strings.HasPrefix(m, "stdout noise ") {
			noise = append(noise, m)
		}
	}
	if len(noise) != 20000 || noise[0] != "stdout noise 0" || noise[19999] != "stdout noise 19999" {
		t.Errorf("got %d noise lines, want 20000 in order", len(noise))
	}
	if got.polls < 20000/maxPollEvents {
		t.Errorf("%d polls delivered 20000 lines; each poll must stop at %d events", got.polls, maxPollEvents)
	}
}

func TestRestartAdoptsARunningTrainer(t *testing.T) {
	f := newFixture(t, "wait")
	req := f.request("job-8", provider.Supervised, "openai_chat")
	job, err := f.p.Create(context.Background(), req)
	must(t, err)
	t.Cleanup(func() { f.kill(job.ID) })
	run := f.runDir(job.ID)
	f.waitFile(filepath.Join(run, "starts.log"))

	// A new worker process: a fresh provider over the same runs root.
	p2, err := New(f.cfg)
	must(t, err)
	found, ok, err := p2.FindJob(context.Background(), "job-8")
	if err != nil || !ok || found.ID != job.ID || found.Status.State != provider.StateRunning {
		t.Fatalf("FindJob = %+v, %v, %v; want the running job", found, ok, err)
	}
	again, err := p2.Create(context.Background(), req)
	if err != nil || again.ID != job.ID {
		t.Fatalf("Create again = %+v, %v; want the running job adopted", again, err)
	}
	must(t, os.WriteFile(filepath.Join(run, "release"), nil, 0o644))
	got := pollToEnd(t, p2, job.ID)
	if got.status.State != provider.StateSucceeded {
		t.Errorf("status = %+v, want succeeded", got.status)
	}
	if again, err = p2.Create(context.Background(), req); err != nil || again.Status.State != provider.StateSucceeded {
		t.Errorf("Create after the end = %+v, %v; want the finished job", again, err)
	}
	starts, err := os.ReadFile(filepath.Join(run, "starts.log"))
	must(t, err)
	if n := strings.Count(string(starts), "\n"); n != 1 {
		t.Errorf("the trainer was started %d times, want once", n)
	}
}

func TestRestartFindsADeadTrainer(t *testing.T) {
	f := newFixture(t, "wait")
	job := f.start("job-9", provider.Supervised, "openai_chat")
	// The trainer has logged what it trains (starts.log is written before
	// that line) and dies while no worker is watching.
	f.waitText(filepath.Join(f.runDir(job.ID), "stderr.log"), "base model")
	must(t, syscall.Kill(-f.pid(job.ID).PID, syscall.SIGKILL))

	p2, err := New(f.cfg)
	must(t, err)
	got := pollToEnd(t, p2, job.ID)
	if got.status.State != provider.StateFailed ||
		!strings.Contains(got.status.Error, "exited without reporting done") ||
		!strings.Contains(got.status.Error, "method sft, base model "+f.model) {
		t.Errorf("status = %+v; want failed with the end of stderr.log", got.status)
	}
}

func TestSlotLockAllowsOneTrainer(t *testing.T) {
	f := newFixture(t, "wait")
	first := f.start("job-a", provider.Supervised, "openai_chat")
	reqB := f.request("job-b", provider.Supervised, "openai_chat")
	_, err := f.p.Create(context.Background(), reqB)
	if !errors.Is(err, ErrSlotsBusy) || provider.IsPermanent(err) {
		t.Fatalf("second Create = %v; want a retryable ErrSlotsBusy", err)
	}
	if _, found, err := f.p.FindJob(context.Background(), "job-b"); found || err != nil {
		t.Errorf("FindJob(job-b) = %v, %v; nothing may have started", found, err)
	}
	// Another worker process does not get the slot either.
	p2, err := New(f.cfg)
	must(t, err)
	if _, err := p2.Create(context.Background(), reqB); !errors.Is(err, ErrSlotsBusy) {
		t.Fatalf("Create from a second provider = %v; want ErrSlotsBusy", err)
	}

	must(t, os.WriteFile(filepath.Join(f.runDir(first.ID), "release"), nil, 0o644))
	if got := pollToEnd(t, f.p, first.ID); got.status.State != provider.StateSucceeded {
		t.Fatalf("first job: %+v", got.status)
	}
	second, err := f.p.Create(context.Background(), reqB)
	must(t, err)
	t.Cleanup(func() { f.kill(second.ID) })
	must(t, os.WriteFile(filepath.Join(f.runDir(second.ID), "release"), nil, 0o644))
	if got := pollToEnd(t, f.p, second.ID); got.status.State != provider.StateSucceeded {
		t.Fatalf("second job: %+v", got.status)
	}
}

func TestTwoSlotsRunTwoTrainers(t *testing.T) {
	f := newFixture(t, "wait", func(c *Config) { c.Slots = 2; c.SlotDevices = []string{"0", "1"} })
	a := f.start("job-c", provider.Supervised, "openai_chat")
	b := f.start("job-d", provider.Supervised, "openai_chat")
	if pa, pb := f.pid(a.ID), f.pid(b.ID); pa.Slot == pb.Slot {
		t.Fatalf("both trainers in slot %d", pa.Slot)
	}
	for _, id := range []string{a.ID, b.ID} {
		must(t, os.WriteFile(filepath.Join(f.runDir(id), "release"), nil, 0o644))
		if got := pollToEnd(t, f.p, id); got.status.State != provider.StateSucceeded {
			t.Errorf("%s: %+v", id, got.status)
		}
	}
}

// readMetrics returns each complete line of metrics.jsonl once, with its
// offset; a line still being written waits until it is complete or the
// trainer has exited, and lines that are not JSON objects in UTF-8 are
// passed over. The offsets go into the cursor, which also reads as it did
// before it carried them.
func TestReadMetrics(t *testing.T) {
	r := run{id: "train_x", dir: t.TempDir()}
	path := r.path(metricsFile)
	a, b := `{"phase":"TRAINING","step":1,"loss":2}`, `{"phase":"TRAINING","step":2,"loss":1.5}`
	must(t, os.WriteFile(path, []byte(a+"\nnot json\n{\"bad\":\"\xff\"}\n"+b+"\n{\"step\":3"), 0o644))

	recs, next, done, err := r.readMetrics(0, false)
	must(t, err)
	if len(recs) != 2 || string(recs[0].Line) != a || recs[0].Offset != 0 || string(recs[1].Line) != b || done {
		t.Fatalf("records %+v, done %v", recs, done)
	}
	if want := int64(len(a) + len("\nnot json\n{\"bad\":\"\xff\"}\n")); recs[1].Offset != want {
		t.Errorf("second record at %d, want %d", recs[1].Offset, want)
	}
	again, next2, _, err := r.readMetrics(next, false)
	must(t, err)
	if len(again) != 0 || next2 != next {
		t.Fatalf("the unfinished line was read early: %+v", again)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(`,"loss":1}`)
	must(t, err)
	must(t, f.Close())
	last, end, done, err := r.readMetrics(next, true)
	must(t, err)
	if len(last) != 1 || string(last[0].Line) != `{"step":3,"loss":1}` || last[0].Offset != next || !done {
		t.Fatalf("after the trainer exited: %+v, done %v", last, done)
	}

	for _, c := range []struct {
		in   provider.EventCursor
		want localCursor
	}{
		{"0", localCursor{}}, {"42", localCursor{events: 42}}, {"42:training", localCursor{events: 42, phase: "training"}},
		{"42:training:" + provider.EventCursor(strconv.FormatInt(end, 10)), localCursor{events: 42, phase: "training", metrics: end}},
		{"42::7", localCursor{events: 42, metrics: 7}},
	} {
		got, err := parseCursor(c.in)
		if err != nil || got != c.want || provider.EventCursor(got.String()) != c.in {
			t.Errorf("cursor %q: %+v (%v), written back as %q", c.in, got, err, got.String())
		}
	}
	if got, err := parseCursor(""); err != nil || got != (localCursor{}) {
		t.Errorf("no cursor: %+v, %v", got, err)
	}
	if _, err := parseCursor("42:training:x"); err == nil {
		t.Error("a bad metrics offset was accepted")
	}
}
