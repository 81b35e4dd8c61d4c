package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
)

// The scale-out of the README, as separate processes of the real binary
// on one database: `curate serve --workers=0` (CURATE_WORKERS=0), whose
// machine's trainer cannot even answer its probe, refuses a local launch
// while no worker runs, and takes it once `curate worker` runs on a "GPU
// machine" (the stand-in trainer, whose probe reports an H100); that
// worker trains the job to the end. A worker stopped with SIGTERM leaves
// the workers table, and launches are refused again at once.
func TestWebOnlyServerLaunchesOnAGPUWorker(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "curate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	trainer := filepath.Join(t.TempDir(), "trainertest")
	if out, err := exec.Command("go", "build", "-o", trainer, "github.com/curate/curate/internal/provider/local/trainertest").CombinedOutput(); err != nil {
		t.Fatalf("building the fake trainer: %v\n%s", err, out)
	}
	pool, dbURL := pgtest.NewDBURL(t)
	models := t.TempDir()
	if err := os.MkdirAll(filepath.Join(models, "tiny-llama"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "tiny-llama", "config.json"), []byte(`{"model_type":"llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// What every process of the deployment shares; each has its own data
	// directory and its own trainer.
	shared := []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + dbURL, "CURATE_MODELS_DIR=" + models, "CURATE_FINETUNE_POLL=50ms",
		"CURATE_SESSION_KEY=gpu-test-session-key-0123456789abcdef", "CURATE_SECRET_KEY=gpu-test-secret-key-0123456789abcdef",
		"CURATE_METRICS_ADDR=off"}
	env := func(dataDir, probe string, more ...string) []string {
		return append(append(append([]string(nil), shared...), "CURATE_DATA_DIR="+dataDir,
			"CURATE_TRAINER_COMMAND=env FAKE_TRAINER_PROBE="+probe+" "+trainer+" run"), more...)
	}
	webEnv := env(t.TempDir(), "fail", "CURATE_ADDR=127.0.0.1:0", "CURATE_WORKERS=0")
	curate := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = webEnv
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	datasetID := curatingDataset(t, pool, org.ID, 20)
	curate("dataset", "freeze", datasetID.String())
	var version string
	if err := pool.QueryRow(ctx, "SELECT id::text FROM dataset_versions WHERE dataset_id = $1", datasetID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`cur_[a-z0-9]+_[a-z0-9]+`).FindString(curate("apikey", "create", "--org", "acme", "--name", "ops", "--role", "admin"))

	web := startCurate(t, bin, webEnv)
	api := &apiClient{t: t, key: key, base: web.url}
	launch := func() (int, string) {
		t.Helper()
		resp := api.do(http.MethodPost, "/api/train", strings.NewReader(fmt.Sprintf(`{"stage":"DPO","model_id":"tiny-llama","dataset_version_id":%q}`, version)))
		defer resp.Body.Close()
		var body struct {
			JobID  string `json:"job_id"`
			Errors []struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusCreated {
			return resp.StatusCode, body.JobID
		}
		var msgs []string
		for _, e := range body.Errors {
			msgs = append(msgs, e.Field+": "+e.Message)
		}
		return resp.StatusCode, strings.Join(msgs, "; ")
	}
	const noWorker = "stage: Local GPU cannot take this job: no GPU worker is running"
	if st, msg := launch(); st != http.StatusUnprocessableEntity || !strings.HasPrefix(msg, noWorker) {
		t.Fatalf("launch without a worker: %d %s, want 422 %s", st, msg, noWorker)
	}

	workerDir := t.TempDir()
	worker := startProcess(t, bin, env(workerDir, "gpu", "CURATE_WORKERS=2"), regexp.MustCompile(`msg="workers running"`), "worker")
	st, id := launch()
	if st != http.StatusCreated {
		t.Fatalf("launch with a GPU worker: %d %s\n%s", st, id, worker.logs())
	}
	var status struct {
		State  string `json:"state"`
		Detail struct {
			Error   string `json:"error"`
			Runtime struct {
				Device string `json:"device"`
			} `json:"runtime"`
		} `json:"detail"`
	}
	deadline := time.Now().Add(90 * time.Second)
	for status.State != "succeeded" {
		resp := api.do(http.MethodGet, "/api/train/status/"+id, nil)
		err := json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		switch {
		case err != nil:
			t.Fatal(err)
		case status.State == "failed" || status.State == "cancelled":
			t.Fatalf("the job ended %s: %s\n%s", status.State, status.Detail.Error, worker.logs())
		case time.Now().After(deadline):
			t.Fatalf("the job is still %s after 90 s\n%s", status.State, worker.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status.Detail.Runtime.Device != "cuda" {
		t.Errorf("runtime device %q, want the worker's cuda", status.Detail.Runtime.Device)
	}
	if _, err := os.Stat(filepath.Join(workerDir, "runs", "train_"+id, "events.jsonl")); err != nil {
		t.Errorf("the worker did not train the job: %v", err)
	}

	worker.stop()
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM workers").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d workers (%v) after the only one stopped", rows, err)
	}
	if st, msg := launch(); st != http.StatusUnprocessableEntity || !strings.HasPrefix(msg, noWorker) {
		t.Errorf("launch after the worker stopped: %d %s, want 422 %s", st, msg, noWorker)
	}
	web.stop()
}
