package web_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/jobs"
	"github.com/curate/curate/web/webtest"
)

// gpuWorker is a `curate worker` on another machine of s's deployment.
type gpuWorker struct {
	dataDir string
	stop    func()
}

// startGPUWorker runs workers alone on s's database as `curate worker`
// does on a GPU machine: its own data directory, s's keys, blob store and
// models directory, and as its local trainer the fake run as `env
// VARS... trainertest run`, whose probe answers as the VARS say
// (FAKE_TRAINER_PROBE). Like the command, it beats with what the probe
// reports before it takes jobs, and stop ends it as a signal would,
// leaving the workers table.
func startGPUWorker(t *testing.T, s *webtest.Server, trainer string, env ...string) *gpuWorker {
	t.Helper()
	cfg := s.App.Config
	cfg.DataDir, cfg.Workers, cfg.GPUSlots = t.TempDir(), 2, 1
	cfg.TrainerCommand = strings.Join(append(append([]string{"env"}, env...), trainer, "run"), " ")
	svc, err := app.New(cfg, s.Pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewClient(s.Pool, svc, jobs.Options{Workers: cfg.Workers, GPUSlots: cfg.GPUSlots})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leave := svc.StartWorkerBeats(ctx)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	w := &gpuWorker{dataDir: cfg.DataDir, stop: func() {
		once.Do(func() {
			sctx, done := context.WithTimeout(context.Background(), 10*time.Second)
			defer done()
			_ = client.Stop(sctx)
			leave()
			cancel()
			svc.Scratch.Close()
		})
	}}
	t.Cleanup(w.stop)
	return w
}

// frozenPairs makes a frozen DPO dataset of six pairs through the API and
// returns its version's id.
func frozenPairs(t *testing.T, s *webtest.Server, org uuid.UUID, key string) string {
	t.Helper()
	pairs := storePairs(t, s, org, 6)
	var d datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "Deployments", "dataset_type": "dpo"}).Must(t, http.StatusCreated).JSON(t, &d)
	base := "/api/training-datasets/" + d.ID
	s.API(key, http.MethodPost, base+"/members", map[string]any{"add": pairs}).Must(t, http.StatusOK)
	s.API(key, http.MethodPatch, base, map[string]any{"status": "ready"}).Must(t, http.StatusOK)
	var version string
	if err := s.Pool.QueryRow(t.Context(), "SELECT id::text FROM dataset_versions WHERE dataset_id = $1", d.ID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return version
}

// A web server that works no jobs, on a machine whose own trainer cannot
// even answer its probe, takes a local launch once a worker of the GPU
// queue that can run it beats on the same database, and that worker
// trains it. Before, the launch is refused naming what is missing: no
// worker at all, then a worker without peft; a GPU worker that stopped
// beating does not count. The fine-tuning page shows admins each worker:
// its host, device, GPU and memory, what its probe found, when it last
// beat.
func TestLocalLaunchOnAWebOnlyServer(t *testing.T) {
	trainer := fakeTrainer(t)
	models := t.TempDir()
	writeModel(t, filepath.Join(models, "tiny-llama"))
	s := webtest.New(t, webtest.Options{Workers: 0, Configure: func(c *config.Config) {
		c.TrainerCommand = "env FAKE_TRAINER_PROBE=fail " + trainer + " run"
		c.ModelsDir, c.FineTunePoll = models, 20*time.Millisecond
	}})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "vic@acme.test", "viewer")
	admin := s.APIKey(org, "ops", "admin")
	version := frozenPairs(t, s, org, admin)
	train := map[string]any{"stage": "DPO", "model_id": "tiny-llama", "dataset_version_id": version}

	refused := func(want string) {
		t.Helper()
		var p problemDoc
		s.API(admin, http.MethodPost, "/api/train", train).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if len(p.Errors) != 1 || p.Errors[0].Field != "stage" || p.Errors[0].Message != "Local GPU cannot take this job: "+want {
			t.Fatalf("refusal %+v, want stage: Local GPU cannot take this job: %s", p.Errors, want)
		}
	}
	const noWorker = "no GPU worker is running (none has reported in the last 45 seconds); start curate worker, or curate serve with workers, on a machine that can run the trainer"
	refused(noWorker)

	cpu := startGPUWorker(t, s, trainer, "FAKE_TRAINER_PROBE=no-peft")
	refused("no live GPU worker has peft")

	// A GPU worker that beat once and then stopped, past the liveness window.
	gone := uuid.New()
	probe := &local.ProbeInfo{Device: "cuda", GPUName: "NVIDIA A100-SXM4-40GB", GPUMemoryBytes: 42505273344, GPUCount: 1,
		Python: "3.12.3", Torch: "2.5.1", Transformers: "4.46.3", PEFT: "0.13.2"}
	if err := s.App.Services.Servers.WorkerBeat(t.Context(), servers.WorkerReport{ID: gone, Host: "gpu-old", Device: "cuda", Slots: 1, Probe: probe, ProbedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(t.Context(), "UPDATE workers SET last_seen_at = now() - make_interval(secs => $2) WHERE id = $1",
		gone, servers.WorkerLiveFor.Seconds()+1); err != nil {
		t.Fatal(err)
	}
	refused("no live GPU worker has peft")
	cpu.stop()
	refused(noWorker)

	gpu := startGPUWorker(t, s, trainer, "FAKE_TRAINER_PROBE=gpu")
	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", train).Must(t, http.StatusCreated).JSON(t, &started)
	var status trainStatusDoc
	deadline := time.Now().Add(60 * time.Second)
	for {
		s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &status)
		if status.State == "succeeded" || status.State == "failed" || status.State == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is still %s after a minute", status.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status.State != "succeeded" || status.Detail.Runtime.Device != "cuda" {
		t.Fatalf("the job ended %s on %q: %s", status.State, status.Detail.Runtime.Device, status.Detail.Error)
	}
	// The GPU worker trained it: the run is in its data directory, not the
	// web server's.
	if _, err := os.Stat(filepath.Join(gpu.dataDir, "runs", "train_"+started.JobID, "events.jsonl")); err != nil {
		t.Errorf("the worker has no run of the job: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the web server has a run of the job (%v)", err)
	}

	host, _ := os.Hostname()
	page := s.SignedIn("ada@acme.test").Get("/fine-tuning").Must(t, http.StatusOK).Body
	card := regexpFind(t, `(?s)(<section class="card" id="ft-workers".*?</section>)`, page)
	row := func(h string) string {
		return regexp.MustCompile(`(?s)<tr data-worker="` + regexp.QuoteMeta(h) + `".*?</tr>`).FindString(card)
	}
	live := row(host)
	for _, want := range []string{"data-live", "CUDA GPU", "NVIDIA H100 80GB HBM3", "80 GiB", "can train", "torch 2.5.1", "peft 0.13.2", "device auto, 1 slot"} {
		if !strings.Contains(live, want) {
			t.Errorf("the GPU worker's row lacks %q: %s", want, live)
		}
	}
	if !regexp.MustCompile(`just now|\d+ seconds? ago`).MatchString(live) {
		t.Errorf("the GPU worker's row does not say when it last beat: %s", live)
	}
	old := row("gpu-old")
	for _, want := range []string{"not live", "NVIDIA A100-SXM4-40GB", "40 GiB", "device cuda", "seconds ago"} {
		if !strings.Contains(old, want) {
			t.Errorf("the silent worker's row lacks %q: %s", want, old)
		}
	}
	if strings.Contains(old, "data-live") || strings.Count(card, "<tr data-worker=") != 2 {
		t.Errorf("the card lists %d workers or takes the silent one for live: %s", strings.Count(card, "<tr data-worker="), card)
	}
	if strings.Contains(s.SignedIn("vic@acme.test").Get("/fine-tuning").Must(t, http.StatusOK).Body, `id="ft-workers"`) {
		t.Error("a viewer sees the workers")
	}
}

type trainStatusDoc struct {
	State  string `json:"state"`
	Detail struct {
		Error   string `json:"error"`
		Runtime struct {
			Device string `json:"device"`
		} `json:"runtime"`
	} `json:"detail"`
}

// The fine-tuning page as an admin sees it with a live GPU worker and one
// that stopped beating, in a real browser.
func TestBrowserGPUWorkersCard(t *testing.T) {
	trainer := fakeTrainer(t)
	s := webtest.New(t, webtest.Options{Workers: 0})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	startGPUWorker(t, s, trainer, "FAKE_TRAINER_PROBE=gpu")
	noPEFT := &local.ProbeInfo{Device: "cuda", GPUName: "NVIDIA L4", GPUMemoryBytes: 24152899584, GPUCount: 1, CUDA: "12.4",
		Python: "3.11.9", Torch: "2.4.0", Transformers: "4.44.2"}
	gone := uuid.New()
	for _, r := range []servers.WorkerReport{
		{ID: uuid.New(), Host: "gpu-l4-2", Device: "cuda", Slots: 1, Probe: noPEFT, ProbedAt: time.Now()},
		{ID: gone, Host: "gpu-a100-1", Device: "auto", Slots: 2, Probe: &local.ProbeInfo{Device: "cuda", GPUName: "NVIDIA A100-SXM4-40GB",
			GPUMemoryBytes: 42505273344, GPUCount: 2, Python: "3.12.3", Torch: "2.5.1", Transformers: "4.46.3", PEFT: "0.13.2"}, ProbedAt: time.Now()},
	} {
		if err := s.App.Services.Servers.WorkerBeat(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool.Exec(t.Context(), "UPDATE workers SET last_seen_at = now() - interval '3 minutes' WHERE id = $1", gone); err != nil {
		t.Fatal(err)
	}

	b := webtest.Browser(t)
	signIn(t, b, s, "ada@acme.test")
	if err := chromedp.Do(b, chromedp.Navigate(s.URL+"/fine-tuning"), chromedp.WaitVisible(`#ft-workers`), chromedp.ScrollIntoView(`#ft-workers`)); err != nil {
		t.Fatal(err)
	}
	rows := eval[[]string](t, b, `[...document.querySelectorAll('#ft-workers tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`)
	if len(rows) != 3 {
		t.Fatalf("card rows %q, want three workers", rows)
	}
	// Each worker says what it has and lacks; the silent one comes last.
	host, _ := os.Hostname()
	for h, want := range map[string][]string{
		host:         {"CUDA GPU", "can train", "NVIDIA H100 80GB HBM3", "80 GiB", "peft 0.13.2"},
		"gpu-l4-2":   {"CUDA GPU", "lacks peft", "NVIDIA L4", "22 GiB", "CUDA 12.4"},
		"gpu-a100-1": {"not live", "3 minutes ago", "NVIDIA A100-SXM4-40GB × 2", "40 GiB", "device auto, 2 slots"},
	} {
		i := slices.IndexFunc(rows, func(r string) bool { return strings.HasPrefix(r, h+" ") })
		if i < 0 || (h == "gpu-a100-1") != (i == 2) {
			t.Errorf("%s is row %d of %q", h, i, rows)
			continue
		}
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("%s's row %q lacks %q", h, rows[i], w)
			}
		}
	}
	webtest.Screenshot(t, b, "gpu-workers")
}
