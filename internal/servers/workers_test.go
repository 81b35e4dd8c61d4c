package servers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/servers"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// worker finds id among the listed workers.
func worker(t *testing.T, svc *servers.Service, id uuid.UUID) (servers.Worker, bool) {
	t.Helper()
	ws, err := svc.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return servers.Worker{}, false
}

// A worker is recorded, with what its trainer's probe reported, before
// Start returns; its probe is asked again only once the answer is a
// minute old, or at the next beat when it failed; stopping removes it.
func TestWorkerBeats(t *testing.T) {
	ctx := context.Background()
	svc := servers.New(pgtest.NewDB(t))
	var asked atomic.Int32
	fail := atomic.Bool{}
	gpu := local.ProbeInfo{Device: "cuda", GPUName: "NVIDIA H100\x00 80GB HBM3" + strings.Repeat("!", 300), GPUMemoryBytes: 85520809984, GPUCount: 1,
		Python: "3.12.3", Torch: "2.5.1", Transformers: "4.46.3", PEFT: "0.13.2"}
	b := &servers.WorkerBeats{Servers: svc, Log: quiet, Every: time.Hour, ProbeEvery: time.Hour,
		Report: servers.WorkerReport{ID: uuid.New(), Host: "gpu-1\n", Device: "auto", Slots: 2},
		ProbeTrainer: func(context.Context) (local.ProbeInfo, error) {
			asked.Add(1)
			if fail.Load() {
				return local.ProbeInfo{}, errors.New("ModuleNotFoundError: No module named 'torch'")
			}
			return gpu, nil
		}}
	stop := b.Start(ctx)
	w, ok := worker(t, svc, b.Report.ID)
	if !ok || !w.Live || w.Host != "gpu-1" || w.Device != "auto" || w.Slots != 2 || w.Probe == nil || w.SeenAgo > 10*time.Second {
		t.Fatalf("after Start: %+v (listed %v)", w, ok)
	}
	// Stored as shown: no NUL, at most 200 bytes.
	if p := w.Probe; p.Device != "cuda" || p.GPUMemoryBytes != 85520809984 || p.PEFT != "0.13.2" ||
		!strings.HasPrefix(p.GPUName, "NVIDIA H100 80GB HBM3!") || len(p.GPUName) != 200 {
		t.Errorf("stored probe %+v", p)
	}
	if w.ProbedAt.IsZero() {
		t.Error("no probe time")
	}

	if err := b.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the probe was asked %d times within its minute, want once", n)
	}
	fail.Store(true)
	b.ProbeEvery = time.Nanosecond
	if err := b.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if w, _ := worker(t, svc, b.Report.ID); w.Probe != nil || !w.Live {
		t.Errorf("a failed probe left %+v, want the worker live without a probe", w)
	}
	b.ProbeEvery = time.Hour
	fail.Store(false)
	if err := b.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if w, _ := worker(t, svc, b.Report.ID); w.Probe == nil || asked.Load() != 3 {
		t.Errorf("after a failed probe the next beat asked %d times in all and stored %+v, want it asked again", asked.Load(), w.Probe)
	}

	stop()
	if _, ok := worker(t, svc, b.Report.ID); ok {
		t.Error("a stopped worker is still listed")
	}
}

// A worker counts as live for WorkerLiveFor after its last beat, by the
// database's clock; one silent for longer is listed, not live, until it
// has been silent for an hour and the next beat prunes it.
func TestWorkerLiveness(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	svc := servers.New(pool)
	live, silent, gone := uuid.New(), uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{live, silent, gone} {
		if err := svc.WorkerBeat(ctx, servers.WorkerReport{ID: id, Host: "h-" + id.String()[:4], Device: "cpu", Slots: 1}); err != nil {
			t.Fatal(err)
		}
	}
	age := func(id uuid.UUID, secs float64) {
		if _, err := pool.Exec(ctx, "UPDATE workers SET last_seen_at = now() - make_interval(secs => $2) WHERE id = $1", id, secs); err != nil {
			t.Fatal(err)
		}
	}
	edge := servers.WorkerLiveFor.Seconds()
	age(silent, edge+1)
	age(gone, 3601)
	if w, _ := worker(t, svc, live); !w.Live {
		t.Errorf("a worker that just beat is not live: %+v", w)
	}
	w, ok := worker(t, svc, silent)
	if !ok || w.Live || w.SeenAgo < servers.WorkerLiveFor || w.SeenAgo > servers.WorkerLiveFor+10*time.Second {
		t.Errorf("a worker silent for %.0f s: %+v (listed %v), want listed, not live", edge+1, w, ok)
	}
	if err := svc.WorkerBeat(ctx, servers.WorkerReport{ID: live, Host: "h", Device: "cpu", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := worker(t, svc, gone); ok {
		t.Error("a worker silent for an hour was not pruned")
	}
	if _, ok := worker(t, svc, silent); !ok {
		t.Error("a worker silent for a minute was pruned")
	}

	for _, bad := range []servers.WorkerReport{{ID: uuid.New(), Device: "tpu", Slots: 1}, {Device: "cpu", Slots: 1}} {
		if err := svc.WorkerBeat(ctx, bad); err == nil {
			t.Errorf("beat %+v was recorded", bad)
		}
	}
}
