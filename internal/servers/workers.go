package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/provider/local"
)

// Workers are the processes that work jobs: `curate worker`, and `curate
// serve` unless --workers=0. Each works the GPU queue, where local
// training runs, and beats in the workers table with what its trainer's
// probe reports (torch, transformers, peft, the device and its memory),
// so that a web server that cannot train itself, as in a scale-out, can
// tell whether some live worker can take a local job. A worker is live
// while its last beat is younger than WorkerLiveFor, by the database's
// clock.
const (
	WorkerLiveFor = liveFor
	// probeEvery is how long a trainer's answer is kept: the probe starts
	// Python and imports torch, which takes seconds. A probe that failed
	// is tried again at the next beat.
	probeEvery = time.Minute
	// probeTimeout bounds one probe; importing torch and asking CUDA for
	// its devices can take a while on a machine just started.
	probeTimeout = 30 * time.Second
	maxHost      = 255
)

// WorkerReport is what a worker says of itself at each beat.
type WorkerReport struct {
	ID     uuid.UUID
	Host   string
	Device string // its CURATE_TRAINER_DEVICE: auto, cuda or cpu
	Slots  int    // its CURATE_GPU_SLOTS: local trainers it runs at once
	// Probe is what its trainer's probe last reported, taken at ProbedAt;
	// nil when the probe could not run.
	Probe    *local.ProbeInfo
	ProbedAt time.Time
}

// Worker is a worker as the database last heard from it.
type Worker struct {
	WorkerReport
	StartedAt time.Time
	LastSeen  time.Time
	// SeenAgo is the age of its last beat, and Live whether that is
	// within WorkerLiveFor, both by the database's clock.
	SeenAgo time.Duration
	Live    bool
}

// WorkerBeat records worker r as live now, with its report, and prunes
// the workers not seen for an hour.
func (s *Service) WorkerBeat(ctx context.Context, r WorkerReport) error {
	if r.ID == uuid.Nil {
		return fmt.Errorf("servers: a worker needs an id")
	}
	switch r.Device {
	case "auto", "cuda", "cpu":
	default:
		return fmt.Errorf("servers: worker device %q is not auto, cuda or cpu", r.Device)
	}
	p := db.WorkerInsertParams{ID: r.ID, Host: cleanHost(r.Host), Device: r.Device, GpuSlots: int32(max(min(r.Slots, 1024), 1))}
	if r.Probe != nil {
		b, err := json.Marshal(r.Probe.Clean())
		if err != nil {
			return err
		}
		at := r.ProbedAt
		p.Probe, p.ProbedAt = b, &at
	}
	q := db.New(s.Pool)
	if err := q.WorkerInsert(ctx, p); err != nil {
		return err
	}
	_, err := q.WorkerDeleteStale(ctx, pruneAfter.Seconds())
	return err
}

// cleanHost is a host name fit to store and show: valid UTF-8, no
// control characters, at most 255 bytes, "unknown" when empty.
func cleanHost(h string) string {
	h = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(h, ""))
	for len(h) > maxHost {
		_, n := utf8.DecodeLastRuneInString(h)
		h = h[:len(h)-n]
	}
	if h = strings.TrimSpace(h); h == "" {
		return "unknown"
	}
	return h
}

// Workers lists the workers seen within the last hour (at most 100), the
// live ones first, each by host.
func (s *Service) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := db.New(s.Pool).WorkerList(ctx, WorkerLiveFor.Seconds())
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(rows))
	for _, r := range rows {
		w := Worker{WorkerReport: WorkerReport{ID: r.ID, Host: r.Host, Device: r.Device, Slots: int(r.GpuSlots)},
			StartedAt: r.StartedAt, LastSeen: r.LastSeenAt, SeenAgo: time.Duration(r.SeenSecondsAgo * float64(time.Second)), Live: r.Live}
		if r.Probe != nil {
			var p local.ProbeInfo
			if err := json.Unmarshal(r.Probe, &p); err != nil {
				return nil, fmt.Errorf("worker %s's probe: %w", r.ID, err)
			}
			w.Probe = &p
		}
		if r.ProbedAt != nil {
			w.ProbedAt = *r.ProbedAt
		}
		out = append(out, w)
	}
	return out, nil
}

// WorkerLeave removes worker id as it stops: launches stop counting on it
// at once instead of after WorkerLiveFor.
func (s *Service) WorkerLeave(ctx context.Context, id uuid.UUID) error {
	return db.New(s.Pool).WorkerDelete(ctx, id)
}

// WorkerBeats beats for one worker process: its report, with the answer
// of its trainer's probe, every BeatEvery.
type WorkerBeats struct {
	Servers *Service
	// Report is the worker's id, host, device setting and slots; the
	// beats fill in the probe.
	Report WorkerReport
	// ProbeTrainer asks the worker's trainer what it finds (finetune's
	// LocalProbe).
	ProbeTrainer func(context.Context) (local.ProbeInfo, error)
	Log          *slog.Logger
	// Every and ProbeEvery change BeatEvery and how long a probe's answer
	// is kept (a minute), for tests.
	Every, ProbeEvery time.Duration

	lastErr string // the probe's last error, logged once until it changes
}

// Beat probes the trainer when its last answer is a minute old (or when
// the last probe failed) and records the worker as live.
func (b *WorkerBeats) Beat(ctx context.Context) error {
	every := b.ProbeEvery
	if every <= 0 {
		every = probeEvery
	}
	r := &b.Report
	if r.Probe == nil || time.Since(r.ProbedAt) >= every {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		info, err := b.ProbeTrainer(pctx)
		cancel()
		r.ProbedAt = time.Now()
		switch {
		case err != nil:
			// The error is a process's or Python's words: the worker's log
			// keeps them, the pages say the probe did not answer.
			r.Probe = nil
			if msg := err.Error(); msg != b.lastErr && ctx.Err() == nil {
				b.Log.Info("the trainer's probe failed: local launches do not count on this worker until it answers", "err", err)
				b.lastErr = msg
			}
		default:
			r.Probe, b.lastErr = &info, ""
		}
	}
	return b.Servers.WorkerBeat(ctx, *r)
}

// Start beats once now, so that launches count the worker before it takes
// its first job, then every BeatEvery in the background. stop ends the
// beats and removes the worker.
func (b *WorkerBeats) Start(ctx context.Context) (stop func()) {
	if b.Log == nil {
		b.Log = slog.Default()
	}
	if err := b.Beat(ctx); err != nil && ctx.Err() == nil {
		b.Log.Warn("worker heartbeat", "err", err)
	}
	every := b.Every
	if every <= 0 {
		every = BeatEvery
	}
	bctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				// A failed beat is tried again at the next tick; launches
				// stop counting this worker only after WorkerLiveFor.
				if err := b.Beat(bctx); err != nil && bctx.Err() == nil {
					b.Log.Warn("worker heartbeat", "err", err)
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		lctx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		if err := b.Servers.WorkerLeave(lctx, b.Report.ID); err != nil {
			b.Log.Warn("leaving the workers table", "err", err)
		}
	}
}
