package finetune_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/servers"
)

// A local launch is judged by the workers of the GPU queue, never by this
// process's machine (whose trainer here cannot even be found): refused
// while no worker beats, refused naming what every live worker lacks (or
// what each lacks, when they differ), not rescued by a worker that stopped
// beating, and taken once one live worker can run it.
func TestLocalLaunchNeedsALiveWorker(t *testing.T) {
	models := t.TempDir()
	if err := os.MkdirAll(filepath.Join(models, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "model", "config.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, finetune.Providers{"local": finetune.Local(local.Config{RunsRoot: t.TempDir(), ModelsDir: models,
		Python: filepath.Join(t.TempDir(), "no-python")})})
	ws := servers.New(e.pool)
	e.svc.Workers = ws
	v := e.src.AddPref(e.org, "support-dpo v1", finetunetest.Pairs(6), 2)
	req := finetune.Request{VersionID: v.ID, Provider: "local", BaseModel: "model", Method: local.Reward}
	ctx := t.Context()

	refused := func(want string) {
		t.Helper()
		_, err := e.svc.Estimate(ctx, e.org, req)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()["provider"] != "Local GPU cannot take this job: "+want {
			t.Fatalf("launch: %v, want provider %q", err, "Local GPU cannot take this job: "+want)
		}
		if why := e.svc.Unavailable(ctx)["local"]; why == "" {
			t.Errorf("the launch form offers Local GPU although %s", want)
		}
	}
	beat := func(host, device string, p *local.ProbeInfo) uuid.UUID {
		t.Helper()
		id := uuid.New()
		if err := ws.WorkerBeat(ctx, servers.WorkerReport{ID: id, Host: host, Device: device, Slots: 1, Probe: p}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	full := local.ProbeInfo{Device: "cpu", Python: "3.12.3", Torch: "2.5.1", Transformers: "4.46.3", PEFT: "0.13.2"}
	noPEFT := full
	noPEFT.PEFT = ""
	gpu := full
	gpu.Device, gpu.GPUName, gpu.GPUMemoryBytes = "cuda", "NVIDIA H100 80GB HBM3", 85520809984

	refused("no GPU worker is running (none has reported in the last 45 seconds); start curate worker, or curate serve with workers, on a machine that can run the trainer")

	beat("cpu-1", "auto", &noPEFT)
	beat("cpu-2", "cpu", &noPEFT)
	refused("no live GPU worker has peft")

	// A worker set to train on CUDA where torch sees none lacks a GPU too,
	// and one whose probe did not answer proves nothing.
	beat("cpu-3", "cuda", &full)
	beat("broken", "auto", nil)
	refused("no live GPU worker can run it: broken lacks a trainer that answers its probe; cpu-1 lacks peft; cpu-2 lacks peft; cpu-3 lacks a CUDA GPU")

	// A GPU worker that stopped beating does not count.
	dead := beat("gpu-1", "cuda", &gpu)
	if _, err := e.pool.Exec(ctx, "UPDATE workers SET last_seen_at = now() - make_interval(secs => $2) WHERE id = $1",
		dead, servers.WorkerLiveFor.Seconds()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Estimate(ctx, e.org, req); err == nil {
		t.Fatal("a worker silent past the liveness window took the launch")
	}
	if d, err := e.svc.WorkerDevice(ctx); err != nil || d != "unknown" {
		t.Errorf("device %q (%v) with no live worker able to train, want unknown", d, err)
	}

	beat("gpu-2", "cuda", &gpu)
	if _, err := e.svc.Estimate(ctx, e.org, req); err != nil {
		t.Fatalf("a live GPU worker can run it: %v", err)
	}
	if why, ok := e.svc.Unavailable(ctx)["local"]; ok {
		t.Errorf("Local GPU is offered disabled: %s", why)
	}
	job := e.launch(t, req)
	if job.Provider != "local" {
		t.Errorf("launched %+v", job)
	}
	if d, err := e.svc.WorkerDevice(ctx); err != nil || d != "cuda" {
		t.Errorf("device %q (%v), want cuda", d, err)
	}

	listed, err := e.svc.GPUWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lacks := map[string]string{}
	for _, w := range listed {
		lacks[w.Host] = strings.Join(w.Lacks, ", ")
	}
	want := map[string]string{"cpu-1": "peft", "cpu-2": "peft", "cpu-3": local.NeedsGPU, "broken": finetune.NoProbe, "gpu-1": "", "gpu-2": ""}
	for h, l := range want {
		if got, ok := lacks[h]; !ok || got != l {
			t.Errorf("%s lacks %q (listed %v), want %q", h, got, ok, l)
		}
	}
}
