package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/curate/curate/internal/provider"
)

// ErrSlotsBusy is the cause of Create's error when every GPU slot has a
// trainer; the error is not permanent, so the caller tries again later.
var ErrSlotsBusy = errors.New("every GPU slot is running a trainer")

// FindJob reports the job of a run directory whose trainer was started.
// A directory with files but no trainer yet is not a job.
func (p *Provider) FindJob(ctx context.Context, curateJobID string) (provider.Job, bool, error) {
	if fe := provider.CheckCurateJobID(curateJobID); fe != nil {
		return provider.Job{}, false, provider.Invalid([]provider.FieldError{*fe})
	}
	r := p.run(curateJobID)
	if _, err := os.Stat(r.dir); errors.Is(err, fs.ErrNotExist) {
		return provider.Job{}, false, nil
	}
	alive, err := r.alive()
	if err != nil {
		return provider.Job{}, false, fail("find job", false, err)
	}
	var rec pidRecord
	if err := readJSON(r.path(pidFile), &rec); err != nil && !alive {
		if errors.Is(err, fs.ErrNotExist) {
			return provider.Job{}, false, nil
		}
		return provider.Job{}, false, fail("find job", false, err)
	}
	job, err := p.job(r, rec)
	return job, err == nil, err
}

// job describes a started run as a provider.Job.
func (p *Provider) job(r run, rec pidRecord) (provider.Job, error) {
	var cfg trainerConfig
	if err := readJSON(r.path(configFile), &cfg); err != nil {
		return provider.Job{}, fail("read job", false, err)
	}
	st, err := p.status(r)
	if err != nil {
		return provider.Job{}, err
	}
	return provider.Job{
		ID: r.id, CurateJobID: cfg.JobID, BaseModel: cfg.BaseModel,
		CreatedAt: rec.StartedAt, Status: st,
	}, nil
}

// Create starts the trainer with the configured settings.
func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (provider.Job, error) {
	return p.CreateWith(ctx, req, p.cfg.Settings)
}

// CreateWith starts the trainer with settings of the job's own in place
// of the configured ones. A run whose trainer was started before is
// adopted, never started twice; when every slot is busy the error wraps
// ErrSlotsBusy and is not permanent.
func (p *Provider) CreateWith(ctx context.Context, req provider.CreateRequest, s Settings) (provider.Job, error) {
	if err := p.checkCreate(req, s); err != nil {
		return provider.Job{}, err
	}
	r := p.run(req.CurateJobID)
	runLock, free, err := tryLock(r.path(lockFile))
	if err != nil {
		return provider.Job{}, fail("create job", false, err)
	}
	var rec pidRecord
	if !free {
		// A trainer for this job is running: adopt it.
		_ = readJSON(r.path(pidFile), &rec)
		return p.job(r, rec)
	}
	// From here this process holds the run's lock; it passes to the trainer.
	rec, err = p.startLocked(req, s, r, runLock)
	runLock.Close()
	if err != nil {
		return provider.Job{}, err
	}
	return p.job(r, rec)
}

// startLocked starts the run's trainer unless it was started before, in
// which case it returns the earlier trainer's record. The caller holds the
// run's lock.
func (p *Provider) startLocked(req provider.CreateRequest, s Settings, r run, runLock *os.File) (pidRecord, error) {
	var rec pidRecord
	if err := readJSON(r.path(pidFile), &rec); err == nil {
		// Started before and ended since: its result is the job's.
		return rec, nil
	}
	// The trainer reads the directories the names resolve to now.
	base, fe := p.modelPath("base_model", req.BaseModel)
	if fe != nil {
		return rec, provider.Invalid([]provider.FieldError{*fe})
	}
	if s.IRS.RewardModel != "" {
		if s.IRS.RewardModel, fe = p.modelPath("irs.reward_model", s.IRS.RewardModel); fe != nil {
			return rec, provider.Invalid([]provider.FieldError{*fe})
		}
	}
	if s.Policy.RewardModel != "" {
		if s.Policy.RewardModel, fe = p.modelPath("policy.reward_model", s.Policy.RewardModel); fe != nil {
			return rec, provider.Invalid([]provider.FieldError{*fe})
		}
	}
	var env []string
	if policyMethods[trainerMethod[req.Method]] && s.Policy.RLAIF != nil {
		if s.RewardAPI == nil || s.RewardAPI.URL == "" || s.RewardAPI.Token == "" {
			return rec, fail("create job", true, errors.New("policy.rlaif: Curate gave the run no address or key for its reward API"))
		}
		env = append(env, "CURATE_REWARD_TOKEN="+s.RewardAPI.Token)
	}
	if err := writeJSON(r.path(configFile), p.buildConfig(req, s, base)); err != nil {
		return rec, fail("write config.json", false, err)
	}
	slot, slotLock, err := p.takeSlot()
	if err != nil {
		return rec, err
	}
	defer slotLock.Close()
	return p.start(r, slot, runLock, slotLock, env)
}

// takeSlot locks the first free GPU slot.
func (p *Provider) takeSlot() (int, *os.File, error) {
	for slot := range p.cfg.Slots {
		f, ok, err := tryLock(filepath.Join(p.cfg.RunsRoot, slotsDir, strconv.Itoa(slot)+".lock"))
		if err != nil {
			return 0, nil, fail("take GPU slot", false, err)
		}
		if ok {
			return slot, f, nil
		}
	}
	return 0, nil, fail("take GPU slot", false, fmt.Errorf("%w (%d slots)", ErrSlotsBusy, p.cfg.Slots))
}

// start launches the trainer detached, in its own process group, holding
// the run and slot locks, with env added to its environment, and records
// its pid.
func (p *Provider) start(r run, slot int, runLock, slotLock *os.File, env []string) (pidRecord, error) {
	events, err := os.OpenFile(r.path(eventsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return pidRecord{}, fail("open events.jsonl", false, err)
	}
	defer events.Close()
	stderr, err := os.OpenFile(r.path(stderrFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return pidRecord{}, fail("open stderr.log", false, err)
	}
	defer stderr.Close()

	argv := append(append([]string(nil), p.argv...), r.path(configFile))
	// Not CommandContext: the trainer outlives the request that starts it.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.dir
	cmd.Env = append(append(append([]string(nil), p.env...), env...), "CURATE_TRAINER_SLOT="+strconv.Itoa(slot))
	if len(p.cfg.SlotDevices) > 0 {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+p.cfg.SlotDevices[slot])
	}
	cmd.Stdout = events
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{runLock, slotLock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return pidRecord{}, fail("start trainer", true, fmt.Errorf("%s: %w", argv[0], err))
	}
	rec := pidRecord{PID: cmd.Process.Pid, Slot: slot, StartedAt: time.Now().UTC()}
	rec.StartTicks, err = startTicks(rec.PID)
	if err == nil {
		err = writeJSON(r.path(pidFile), rec)
	}
	if err != nil {
		// Without its pid on record the trainer could not be cancelled.
		_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		_ = cmd.Wait()
		return pidRecord{}, fail("record trainer pid", false, err)
	}
	p.mu.Lock()
	p.reaping[r.id] = true
	p.mu.Unlock()
	go p.reap(r, cmd)
	return rec, nil
}

// reap waits for a trainer this process started, so it does not linger as
// a zombie, and records how it ended.
func (p *Provider) reap(r run, cmd *exec.Cmd) {
	err := cmd.Wait()
	rec := exitRecord{Status: "exit status 0", Code: cmd.ProcessState.ExitCode()}
	if err != nil {
		rec.Status = err.Error()
	}
	_ = writeJSON(r.path(exitFile), rec)
	p.mu.Lock()
	delete(p.reaping, r.id)
	p.mu.Unlock()
}

// isReaping reports whether this process started the run's trainer and
// has not yet recorded its exit.
func (p *Provider) isReaping(r run) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reaping[r.id]
}

// pollInterval is how often Cancel looks whether the trainer has gone.
const pollInterval = 50 * time.Millisecond

// Cancel stops the trainer: SIGTERM to its process group, which lets the
// bundled trainer save a checkpoint, then SIGKILL to the group after the
// grace period. It returns once no process of the run is left. A job that
// has ended already is left as it is.
func (p *Provider) Cancel(ctx context.Context, jobID string) error {
	r, err := p.runOf(jobID)
	if err != nil {
		return err
	}
	alive, err := r.alive()
	if err != nil || !alive {
		return err
	}
	if _, err := os.Stat(r.path(cancelFile)); errors.Is(err, fs.ErrNotExist) {
		if err := writeJSON(r.path(cancelFile), cancelRecord{At: time.Now().UTC()}); err != nil {
			return fail("cancel job", false, err)
		}
	}
	var rec pidRecord
	if err := readJSON(r.path(pidFile), &rec); err != nil {
		return fail("cancel job", false, fmt.Errorf("trainer pid unknown: %w", err))
	}
	if err := signalGroup(rec, syscall.SIGTERM); err != nil {
		return fail("cancel job", false, err)
	}
	if gone, err := r.waitGone(ctx, p.cfg.CancelGrace); gone || err != nil {
		if err != nil {
			// The caller gave up waiting; leave nothing running.
			_ = signalGroup(rec, syscall.SIGKILL)
		}
		return err
	}
	if err := signalGroup(rec, syscall.SIGKILL); err != nil {
		return fail("cancel job", false, err)
	}
	gone, err := r.waitGone(ctx, p.cfg.CancelGrace)
	if err == nil && !gone {
		err = fail("cancel job", false, fmt.Errorf("processes of %s still hold its lock after SIGKILL", jobID))
	}
	return err
}

// waitGone waits up to d for the run's last process to exit.
func (r run) waitGone(ctx context.Context, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		alive, err := r.alive()
		if err != nil || !alive {
			return !alive, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}
