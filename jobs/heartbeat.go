package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/shadow"
)

// Crash recovery for long jobs.
//
// River rescues a job left "running" by a dead worker once the job has run
// for longer than its own timeout (and RescueStuckJobsAfter): fine for the
// jobs that take seconds, but an export may rightly run for an hour, so its
// timeout is long, and a killed one would sit "running" that long too. A
// short timeout is no answer: it cancels a live export that is merely
// large. Writing an export in resumable chunks (snooze and resume) is no
// answer either: the format writers (parquet's above all) and the file
// hashes in the manifest are one stream, and the half-written file is on
// the dead process's disk, which the worker taking over may not share.
//
// So the long kinds beat. While a worker runs an attempt of one, the
// heartbeat middleware updates the attempt's row in job_heartbeats every
// beatEvery. A periodic sweep (HeartbeatSweepWorker, on a queue of its own
// so busy workers never delay it) puts a running job whose current attempt
// has not beaten for staleAfter back in the queue at once (JobUpdateStale),
// where a live worker picks it up and starts it over: a retried export
// writes fresh scratch files and the same bytes, a retried evaluation goes
// on at its next unscored item. A dead worker's job is thus retried 25 to
// 45 s after its last beat (staleAfter, then up to sweepEvery; River
// elects a new leader to queue the sweeps within about 20 s of the old one
// dying, inside that wait), while a live one, however long, is never
// touched. The sweep also removes the attempt's heartbeat row, and a
// worker whose beat finds no row (or that could not beat for longer than
// staleAfter allows) cancels its own work, so two attempts of one job
// never write at once for long.
//
// Any kind can beat: LongKinds lists them, each with what its sweep does
// when the attempt it gave up was the job's last.
const (
	beatEvery  = jobq.BeatEvery
	staleAfter = jobq.StaleAfter
	sweepEvery = 15 * time.Second
)

// LongKind is a job kind whose workers beat, and Abandon, which the sweep
// calls with the job's args when it gives up the job's last attempt:
// what the job worked on is failed (or paused, when it can be resumed),
// since no retry will carry it on.
type LongKind struct {
	// Kinds are the kind's name and its earlier ones (its aliases).
	Kinds   []string
	Abandon func(ctx context.Context, args json.RawMessage) error
}

// Long is the LongKind of T's kind.
func Long[T river.JobArgs](abandon func(context.Context, T) error) LongKind {
	var zero T
	return LongKind{Kinds: jobq.Kinds(zero), Abandon: func(ctx context.Context, raw json.RawMessage) error {
		var args T
		if err := json.Unmarshal(raw, &args); err != nil {
			return err
		}
		return abandon(ctx, args)
	}}
}

// LongKinds are the kinds that beat, of the services present (a service
// left out of a test's services runs no job). Short jobs are left to
// River's rescue (see NewClient).
func LongKinds(d *app.Services) []LongKind {
	var out []LongKind
	if d == nil {
		return out
	}
	if d.Datasets != nil {
		out = append(out, Long(func(ctx context.Context, a datasets.ExportArgs) error {
			return d.Datasets.AbandonExport(ctx, a.ExportID, "the export's worker stopped on its last attempt; start the export again")
		}))
	}
	if d.Imports != nil {
		out = append(out, Long(func(ctx context.Context, a imports.ImportArgs) error {
			return d.Imports.Abandon(ctx, a.OrgID, a.RunID, "the import's worker stopped on its last attempt; upload the file again")
		}))
	}
	if d.Eval != nil {
		// Every scored item is stored: the run is paused, and resuming
		// it goes on at the next one.
		out = append(out, Long(func(ctx context.Context, a eval.EvaluateArgs) error {
			return d.Eval.Abandon(ctx, a.RunID, abandonedRun)
		}))
	}
	if d.Judge != nil {
		out = append(out, Long(func(ctx context.Context, a judge.AgreementArgs) error {
			return d.Judge.AbandonAgreement(ctx, a.ID, abandonedRun)
		}))
	}
	if d.FineTune != nil {
		// Each step at the provider (upload, job creation) is stored
		// before the next, so a retry polls the job it created rather
		// than creating another; the last attempt given up fails the job.
		out = append(out, Long(func(ctx context.Context, a finetune.JobArgs) error {
			return d.FineTune.Fail(ctx, a.JobID, errors.New("its worker stopped on the job's last attempt; launch it again"))
		}))
	}
	if d.Models != nil {
		// A deployment loads only what its target does not list yet and
		// stores each step, so a retry resumes; the last attempt given
		// up fails it, the alias where it was, and frees the alias.
		out = append(out, Long(func(ctx context.Context, a models.DeployArgs) error {
			return d.Models.Fail(ctx, a.DeploymentID, errors.New("its worker stopped on the deployment's last attempt; deploy again"))
		}))
	}
	if d.Datasets != nil {
		// A report already stored is left as it is, and a retry computes
		// it whole. One given up on its last attempt (River's 25) stays
		// missing.
		out = append(out, Long(func(context.Context, datasets.ReportArgs) error { return nil }))
	}
	if d.Imports != nil {
		// A sync stores everything in one transaction with its new
		// position, so a retry covers the same scores; one given up is
		// followed by the next periodic sync.
		out = append(out, Long(func(context.Context, imports.LangfuseSyncArgs) error { return nil }))
	}
	if d.Codebooks != nil && d.Codebooks.Judge != nil {
		// Answered suggestions are stored one by one; a retry answers
		// the pending ones, and one given up leaves them pending.
		out = append(out, Long(func(context.Context, codebook.SuggestArgs) error { return nil }))
	}
	if d.LiveScore != nil {
		// Each scored answer is stored; the next sample's job scores
		// what is still pending.
		out = append(out, Long(func(context.Context, livescore.ScoreArgs) error { return nil }))
	}
	if d.Loops != nil {
		// What a step made is recorded as it goes, and a retry finds it:
		// only a step's last attempt given up fails its run.
		out = append(out, Long(func(ctx context.Context, a loops.StepArgs) error {
			return d.Loops.Abandon(ctx, a.RunID, a.Step, "Its worker stopped on the step's last attempt; start the loop again.")
		}))
	}
	if d.Shadows != nil {
		// Each step of a query is recorded before the next, and a query
		// found begun by a stopped worker is failed rather than asked
		// again; one given up leaves the rest open for the next run.
		out = append(out, Long(func(context.Context, shadow.RunArgs) error { return nil }))
	}
	return out
}

// abandonedRun is why a run whose job was given up is paused.
const abandonedRun = "Its worker stopped on the job's last attempt. Resume it to go on from where it stopped."

func kindNames(kinds []LongKind) []string {
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.Kinds...)
	}
	return out
}

// QueueHeartbeat is the queue of the sweep alone.
const QueueHeartbeat = "heartbeat"

// errLeaseLost cancels a job whose attempt was given up by the sweep.
var errLeaseLost = errors.New("the job's heartbeat was lost: another worker may be running it")

// heartbeat is River worker middleware that beats for the jobs of kinds
// while they run.
type heartbeat struct {
	river.MiddlewareDefaults
	beats *jobq.Heartbeats
	kinds []string
	every time.Duration
	stale time.Duration
}

func newHeartbeat(beats *jobq.Heartbeats, kinds []LongKind) *heartbeat {
	return &heartbeat{beats: beats, kinds: kindNames(kinds), every: beatEvery, stale: staleAfter}
}

// Work records the attempt's heartbeat, beats while doInner runs, and
// clears the row when it returns. doInner's context is cancelled when the
// attempt is given up.
func (h *heartbeat) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if !slices.Contains(h.kinds, job.Kind) {
		return doInner(ctx)
	}
	key := jobq.Attempt{JobID: job.ID, Attempt: job.Attempt}
	if err := h.beats.Start(ctx, key); err != nil {
		return fmt.Errorf("recording the job's heartbeat: %w", err)
	}
	work, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { h.beat(work, cancel, stop, key) })
	err := doInner(work)
	close(stop)
	wg.Wait()
	if derr := h.beats.Stop(context.WithoutCancel(ctx), key); derr != nil && err == nil {
		err = fmt.Errorf("clearing the job's heartbeat: %w", derr)
	}
	if cause := context.Cause(work); errors.Is(cause, errLeaseLost) && err != nil {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// beat updates the heartbeat every h.every until stop is closed. It
// cancels the work when the row is gone (the sweep gave the attempt up),
// or when no beat has succeeded for so long that the sweep may have.
func (h *heartbeat) beat(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}, key jobq.Attempt) {
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		bctx, done := context.WithTimeout(ctx, h.every)
		alive, err := h.beats.Beat(bctx, key)
		done()
		switch {
		case err == nil && !alive:
			cancel(errLeaseLost)
			return
		case err == nil:
			last = time.Now()
		case time.Since(last) > h.stale-h.every:
			// The sweep counts from the last beat it saw: stop before it
			// can give the attempt to another worker.
			cancel(fmt.Errorf("%w (no beat for %s: %v)", errLeaseLost, time.Since(last).Round(time.Second), err))
			return
		}
	}
}

// HeartbeatSweepArgs asks for one sweep of the long jobs whose worker is
// gone; NewClient queues it every sweepEvery.
type HeartbeatSweepArgs struct{}

// Kind names the job in River's table.
func (HeartbeatSweepArgs) Kind() string { return "heartbeat_sweep" }

// InsertOpts: one sweep waits at a time, on its own queue; a failed sweep
// is not retried, the next one comes soon.
func (HeartbeatSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHeartbeat, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// HeartbeatSweepWorker puts the long jobs whose worker stopped beating
// back in the queue. A job out of attempts is discarded, and its kind's
// Abandon is called, since no retry will carry it on.
type HeartbeatSweepWorker struct {
	river.WorkerDefaults[HeartbeatSweepArgs]
	Heartbeats *jobq.Heartbeats
	Kinds      []LongKind
	Log        *slog.Logger
}

// Work sweeps once.
func (w *HeartbeatSweepWorker) Work(ctx context.Context, job *river.Job[HeartbeatSweepArgs]) error {
	stale, err := w.Heartbeats.Sweep(ctx, kindNames(w.Kinds), staleAfter, jobq.StaleError)
	errs := []error{err}
	for _, r := range stale {
		if !r.GivenUp {
			w.Log.Warn("a job's worker stopped sending heartbeats; the job is queued again", "job", r.ID, "kind", r.Kind)
			continue
		}
		w.Log.Error("a job's worker stopped sending heartbeats on its last attempt; the job is given up", "job", r.ID, "kind", r.Kind)
		for _, k := range w.Kinds {
			if !slices.Contains(k.Kinds, r.Kind) {
				continue
			}
			if err := k.Abandon(ctx, r.Args); err != nil {
				errs = append(errs, fmt.Errorf("job %d (%s): %w", r.ID, r.Kind, err))
			}
		}
	}
	return errors.Join(errs...)
}
