package web_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/web/webtest"
)

// fakeTrainer builds the local trainer's stand-in, which speaks its
// protocol without torch, and returns its path.
func fakeTrainer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trainertest")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/curate/curate/internal/provider/local/trainertest").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake trainer: %v\n%s", err, out)
	}
	return bin
}

// localModel puts a directory the local provider accepts as a base model
// (a Hugging Face config.json; the fake trainer loads nothing) in the
// models directory and returns its name there.
func localModel(t *testing.T, s *webtest.Server) string {
	t.Helper()
	writeModel(t, filepath.Join(s.App.Config.ModelsDir, "tiny-llama"))
	return "tiny-llama"
}

func writeModel(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// localServer starts Curate with workers whose local trainer is the fake,
// run as `env VARS... trainertest run CONFIG`, and a models directory of
// its own.
func localServer(t *testing.T, poll time.Duration, env ...string) (*webtest.Server, *finetunetest.Source) {
	t.Helper()
	return localServerWith(t, 2, poll, env...)
}

func localServerWith(t *testing.T, workers int, poll time.Duration, env ...string) (*webtest.Server, *finetunetest.Source) {
	t.Helper()
	command := strings.Join(append(append([]string{"env"}, env...), fakeTrainer(t), "run"), " ")
	models := t.TempDir()
	s := webtest.New(t, webtest.Options{Workers: workers, Configure: func(c *cfgT) {
		c.TrainerCommand, c.FineTunePoll, c.FineTuneBudgetUSD, c.GPUSlots, c.ModelsDir = command, poll, 100, 1, models
	}})
	src := &finetunetest.Source{}
	s.App.FineTune.SetDataSource(src)
	return s, src
}

type localJob struct {
	ftJob
	Progress struct {
		Step       int `json:"step"`
		TotalSteps int `json:"total_steps"`
	} `json:"progress"`
	ProviderJobID string          `json:"provider_job_id"`
	ExportFormat  string          `json:"export_format"`
	Local         json.RawMessage `json:"local"`
}

func waitJob(t *testing.T, s *webtest.Server, key, id, want string) localJob {
	t.Helper()
	var job localJob
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s.API(key, http.MethodGet, "/api/fine-tuning/jobs/"+id, nil).Must(t, http.StatusOK).JSON(t, &job)
		if job.Status == want {
			return job
		}
		if job.Status == "failed" || job.Status == "cancelled" || job.Status == "succeeded" {
			t.Fatalf("job ended %s, want %s: %s", job.Status, want, job.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job still %s after a minute, want %s", job.Status, want)
	return job
}

// A local DPO job launched through the fine-tuning API runs the trainer
// (the fake) on the GPU queue with the job's own settings, stores its
// progress and metrics, ends with the adapter directory as its model, and
// costs nothing. Bad input is refused naming the field.
func TestLocalFineTuneAPI(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	model := localModel(t, s)

	launch := map[string]any{"dataset_version_id": v.ID.String(), "provider": "local", "base_model": model, "method": "dpo",
		"hyperparameters": map[string]any{"beta": 0.2, "epochs": 1},
		"local":           map[string]any{"lora_r": 16, "lora_alpha": 32, "learning_rate": 1e-4, "target_modules": []string{"q_proj", "v_proj"}}}
	var job localJob
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", launch).Must(t, http.StatusCreated).JSON(t, &job)
	if job.EstimatedCost != 0 || job.ExportFormat != "trl_preference" {
		t.Errorf("launched at $%v in %s, want $0 in trl_preference", job.EstimatedCost, job.ExportFormat)
	}
	job = waitJob(t, s, admin, job.ID, "succeeded")

	run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+job.ID)
	if job.FineTunedModel != filepath.Join(run, "final") || job.ProviderJobID != "train_"+job.ID {
		t.Errorf("model %q of provider job %q, want %s/final", job.FineTunedModel, job.ProviderJobID, run)
	}
	// The fake's losses 2.0, 1.5, 1.25 at steps 1–3 and 1.4 evaluated at step 3.
	want := []struct {
		train float64
		valid *float64
	}{{2.0, nil}, {1.5, nil}, {1.25, ptr(1.4)}}
	if len(job.Metrics) != len(want) {
		t.Fatalf("metrics %+v", job.Metrics)
	}
	for i, w := range want {
		m := job.Metrics[i]
		if m.Step != i+1 || m.TrainLoss == nil || *m.TrainLoss != w.train || (w.valid == nil) != (m.ValidLoss == nil) || (w.valid != nil && *m.ValidLoss != *w.valid) {
			t.Errorf("metric %d: %+v", i, m)
		}
	}
	if job.Progress.Step != 3 || job.Progress.TotalSteps != 3 || job.ActualCost == nil || *job.ActualCost != 0 {
		t.Errorf("progress %+v, actual cost %v", job.Progress, job.ActualCost)
	}

	// The trainer saw the job's settings and the shared hyperparameters.
	var cfg struct {
		Method string         `json:"method"`
		Hyper  map[string]any `json:"hyperparameters"`
	}
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("config.json: %v %s", err, b)
	}
	for k, want := range map[string]any{"lora_r": 16.0, "lora_alpha": 32.0, "learning_rate": 1e-4, "beta": 0.2, "epochs": 1.0} {
		if cfg.Hyper[k] != want {
			t.Errorf("config.json hyperparameters.%s = %v, want %v", k, cfg.Hyper[k], want)
		}
	}
	if cfg.Method != "dpo" || !strings.Contains(string(b), `"q_proj"`) {
		t.Errorf("config.json %s", b)
	}
	train, err := os.ReadFile(filepath.Join(run, "train.jsonl"))
	if err != nil || strings.Count(string(train), `"chosen"`) != 4 {
		t.Errorf("train.jsonl has not the 4 training pairs in TRL's format: %v %s", err, train)
	}

	var queue string
	if err := s.Pool.QueryRow(t.Context(), "SELECT queue FROM river_job WHERE kind = 'finetune_advance'").Scan(&queue); err != nil || queue != "gpu" {
		t.Errorf("the worker ran on queue %q (%v), want gpu", queue, err)
	}
	if b, err := s.App.FineTune.Budget(t.Context(), org); err != nil || b.Spent != 0 {
		t.Errorf("local training took %v from the budget (%v)", b.Spent, err)
	}

	for _, tc := range []struct {
		change map[string]any
		field  string
		msg    string
	}{
		{map[string]any{"base_model": model + "/missing"}, "base_model", `\"tiny-llama/missing\" is not a model directory`},
		{map[string]any{"base_model": s.App.Config.ModelsDir + "/" + model}, "base_model", "not a path"},
		{map[string]any{"base_model": "../" + model}, "base_model", "not a path"},
		{map[string]any{"base_model": "/etc"}, "base_model", "not a path"},
		{map[string]any{"base_model": ""}, "base_model", "is required"},
		{map[string]any{"local": map[string]any{"lora_r": 999}}, "local.lora_r", "from 1 to 256"},
		{map[string]any{"local": map[string]any{"irs": map[string]any{"n_candidates": 1}}}, "local.irs.n_candidates", "from 2 to 16"},
		{map[string]any{"method": "rlhf"}, "method", `must be one of`},
		{map[string]any{"provider": "openai", "base_model": ftMini}, "local", "only to the local provider"},
	} {
		body := map[string]any{}
		for k, v := range launch {
			body[k] = v
		}
		for k, v := range tc.change {
			body[k] = v
		}
		res := s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", body).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `"field":"`+tc.field+`"`) || !strings.Contains(res.Body, tc.msg) {
			t.Errorf("%v: want %s %q in %s", tc.change, tc.field, tc.msg, res.Body)
		}
		if strings.Contains(res.Body, s.App.Config.ModelsDir) {
			t.Errorf("%v: the answer shows the models directory: %s", tc.change, res.Body)
		}
	}
}

func ptr(f float64) *float64 { return &f }

type trainStatus struct {
	JobID  string `json:"job_id"`
	Stage  string `json:"stage"`
	State  string `json:"state"`
	Detail struct {
		CurrentIteration int     `json:"current_iteration"`
		TotalIterations  int     `json:"total_iterations"`
		CurrentPhase     string  `json:"current_phase"`
		PhaseProgress    float64 `json:"phase_progress"`
		Metrics          struct {
			AvgReward       *float64           `json:"avg_reward"`
			RewardBreakdown map[string]float64 `json:"reward_breakdown"`
			CurrentWeights  map[string]float64 `json:"current_weights"`
		} `json:"metrics"`
		Runtime struct {
			Device string `json:"device"`
		} `json:"runtime"`
		Model string `json:"model"`
	} `json:"detail"`
}

func waitTrain(t *testing.T, s *webtest.Server, key, id string) trainStatus {
	t.Helper()
	var st trainStatus
	deadline := time.Now().Add(60 * time.Second)
	for st.State != "succeeded" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		s.API(key, http.MethodGet, "/api/train/status/"+id, nil).Must(t, http.StatusOK).JSON(t, &st)
		if st.State == "failed" || st.State == "cancelled" {
			t.Fatalf("train job %s", st.State)
		}
	}
	if st.State != "succeeded" {
		t.Fatalf("train job still %s", st.State)
	}
	return st
}

// The training API of the IRS design: POST /api/train starts a local job
// (DPO, and IRS with its irs_config), the status answers in the design's
// shape with the IRS iteration, reward and weights, and the metrics come
// back as metrics.jsonl's lines. Viewers read; only admins launch.
func TestTrainAPI(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "watcher", "viewer")
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	model := localModel(t, s)

	dpo := map[string]any{"stage": "DPO", "model_id": model, "dataset_version_id": pairs.ID.String()}
	s.API(viewer, http.MethodPost, "/api/train", dpo).Must(t, http.StatusForbidden)
	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", dpo).Must(t, http.StatusCreated).JSON(t, &started)
	st := waitTrain(t, s, viewer, started.JobID)
	run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID)
	if st.JobID != started.JobID || st.Stage != "DPO" || st.Detail.Model != filepath.Join(run, "final") || st.Detail.PhaseProgress != 100 {
		t.Errorf("status %+v", st)
	}
	var lines []map[string]any
	s.API(viewer, http.MethodGet, "/api/train/"+started.JobID+"/metrics", nil).Must(t, http.StatusOK).JSON(t, &lines)
	if len(lines) != 3 || lines[0]["phase"] != "TRAINING" || lines[2]["loss"] != 1.25 {
		t.Errorf("metrics %v", lines)
	}

	// Two IRS iterations on chat prompts, starting from rel 1, faith 1,
	// conc 0.5: the fake moves rel by +0.1 and faith by -0.1 each time,
	// so after iteration 2 the weights are rel 1.2, faith 0.8, conc 0.5,
	// and iteration 2's average reward is 1 + 2/2 = 2.
	irs := map[string]any{"stage": "IRS", "model_id": model, "dataset_version_id": chats.ID.String(), "n_questions": 4, "top_k": 3,
		"irs_config": map[string]any{"n_iterations": 2, "n_candidates": 4, "batch_size": 2, "learning_rate": 2e-5, "max_new_tokens": 256,
			"load_in_4bit": false, "dw_config": map[string]any{"history_window": 5, "temperature": 2.0,
				"initial_weights": map[string]any{"rel": 1.0, "faith": 1.0, "conc": 0.5}}}}
	s.API(admin, http.MethodPost, "/api/train", irs).Must(t, http.StatusCreated).JSON(t, &started)
	st = waitTrain(t, s, viewer, started.JobID)
	d := st.Detail
	if st.Stage != "IRS" || d.CurrentIteration != 2 || d.TotalIterations != 2 || d.Metrics.AvgReward == nil || *d.Metrics.AvgReward != 2 {
		t.Errorf("IRS status %+v", st)
	}
	for k, want := range map[string]float64{"rel": 1.2, "faith": 0.8, "conc": 0.5} {
		if got := d.Metrics.CurrentWeights[k]; math.Abs(got-want) > 1e-9 {
			t.Errorf("current weight %s = %v, want %v", k, got, want)
		}
	}
	if d.Metrics.RewardBreakdown["rel"] != 0.9 || d.Runtime.Device == "" {
		t.Errorf("breakdown %v, device %q", d.Metrics.RewardBreakdown, d.Runtime.Device)
	}
	cfg, err := os.ReadFile(filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID, "config.json"))
	if err != nil || !strings.Contains(string(cfg), `"n_questions": 4`) || !strings.Contains(string(cfg), `"method": "irs"`) {
		t.Errorf("config.json: %v %s", err, cfg)
	}

	// The job page charts the reward and the weights by iteration.
	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
	reward := regexpFind(t, `id="ft-reward-line" points="([^"]*)"`, page.Body)
	if len(strings.Fields(reward)) != 2 {
		t.Errorf("reward line %q, want 2 points", reward)
	}
	// Rewards 1.5 and 2 on a 0–2 scale: y = 184 − r/2 × 168.
	if want := "16.0,58.0 584.0,16.0"; reward != want {
		t.Errorf("reward line %q, want %q", reward, want)
	}
	if n := strings.Count(page.Body, `class="ft-weight-line"`); n != 3 {
		t.Errorf("%d weight lines, want 3 (rel, faith, conc)", n)
	}

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"stage": "RLHF", "model_id": model, "dataset_version_id": pairs.ID.String()}, "stage"},
		{map[string]any{"stage": "DPO", "model_id": model + "/nope", "dataset_version_id": pairs.ID.String()}, "model_id"},
		{map[string]any{"stage": "DPO", "model_id": "/etc", "dataset_version_id": pairs.ID.String()}, "model_id"},
		{map[string]any{"stage": "IRS", "model_id": model, "dataset_version_id": chats.ID.String(), "irs_config": map[string]any{"n_iterations": 0, "n_candidates": 40}}, "irs_config.n_candidates"},
		{map[string]any{"stage": "IRS", "model_id": model, "dataset_version_id": chats.ID.String(), "irs_config": map[string]any{"load_in_4bit": true}}, "irs_config.load_in_4bit"},
		{map[string]any{"stage": "REWARD", "model_id": model, "dataset_version_id": chats.ID.String()}, "stage"},
	} {
		res := s.API(admin, http.MethodPost, "/api/train", tc.body).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `"field":"`+tc.field+`"`) {
			t.Errorf("%v: no message for %s in %s", tc.body, tc.field, res.Body)
		}
	}
	s.API(s.APIKey(s.Org("globex"), "ops", "admin"), http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusNotFound)
}

// Cancelling a local job whose trainer ignores SIGTERM (and has a child)
// kills the trainer's whole process group and ends the job cancelled.
func TestLocalFineTuneCancel(t *testing.T) {
	s, src := localServer(t, 50*time.Millisecond, "FAKE_TRAINER_MODE=hang")
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	var job localJob
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", map[string]any{"dataset_version_id": v.ID.String(), "provider": "local",
		"base_model": localModel(t, s), "method": "dpo"}).Must(t, http.StatusCreated).JSON(t, &job)
	run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+job.ID)

	// Wait for the trainer and its child to be up.
	var pids []int
	deadline := time.Now().Add(30 * time.Second)
	for len(pids) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		pids = pids[:0]
		var rec struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(filepath.Join(run, "trainer.pid")); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 0 {
			pids = append(pids, rec.PID)
		}
		if b, err := os.ReadFile(filepath.Join(run, "child.pid")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, n)
			}
		}
	}
	if len(pids) < 2 {
		t.Fatalf("the trainer did not start: pids %v", pids)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitJob(t, s, admin, job.ID, "running")
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs/"+job.ID+"/cancel", nil).Must(t, http.StatusAccepted)
	waitJob(t, s, admin, job.ID, "cancelled")
	for _, pid := range pids {
		// Gone, or a zombie no longer running: signal 0 fails either way
		// once reaped; a zombie of ours would still answer, so look at
		// its state too.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) && !zombie(pid) {
			t.Errorf("process %d of the cancelled trainer is still running", pid)
		}
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// The launch form offers the local settings with the IRS design's
// defaults, shows the device, estimates no charge, puts each bad setting's
// message beside it, and fills a partly given set of IRS weights from the
// defaults.
func TestLocalLaunchForm(t *testing.T) {
	s, src := localServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	c := s.SignedIn("ada@acme.test")

	page := c.Get("/fine-tuning/new?provider=local&method=irs").Must(t, http.StatusOK)
	for _, want := range []string{`<details id="ft-local" open`, `id="ft-device"`, `name="local.irs.n_candidates" value="" placeholder="4"`,
		`name="local.irs.dw_config.temperature" value="" placeholder="2"`, `<option value="irs" selected`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("launch form lacks %s", want)
		}
	}
	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"local"}, "base_model": {localModel(t, s)}, "method": {"irs"},
		"local.irs.n_iterations": {"2"}, "local.irs.dw_config.initial_weights.rel": {"2"}}
	est := c.PostForm("/fine-tuning/estimate", form).Must(t, http.StatusOK)
	if !strings.Contains(est.Body, "local: no charge") || !strings.Contains(est.Body, `id="est-examples">4<`) {
		t.Errorf("estimate: %s", est.Body)
	}
	bad := cloneForm(form)
	bad.Set("local.irs.n_candidates", "1")
	bad.Set("local.lora_dropout", "lots")
	res := c.PostForm("/fine-tuning/jobs", bad).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-local-irs-n-candidates">must be`) || !strings.Contains(res.Body, `id="err-local-lora-dropout">must be a number`) {
		t.Errorf("no inline messages: %s", regexpFind(t, `(?s)(id="ft-local".{0,1000})`, res.Body))
	}
	res = c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusSeeOther)
	id := strings.TrimPrefix(res.Header.Get("Location"), "/fine-tuning/jobs/")
	var raw []byte
	if err := s.Pool.QueryRow(t.Context(), "SELECT local_settings FROM fine_tuning_jobs WHERE id = $1", id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var stored struct {
		IRS struct {
			NIterations int `json:"n_iterations"`
			DW          struct {
				InitialWeights map[string]float64 `json:"initial_weights"`
			} `json:"dw_config"`
		} `json:"irs"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	w := stored.IRS.DW.InitialWeights
	if stored.IRS.NIterations != 2 || len(w) != 3 || w["rel"] != 2 || w["faith"] != 1 || w["conc"] != 0.5 {
		t.Errorf("stored settings %s", raw)
	}
}

func cloneForm(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// A local job trained by a worker on another machine (a data directory and
// runs of its own, the same database, the same models) is followed from a
// web server that has none of its files: /api/train/:id/metrics answers
// the trainer's metrics.jsonl lines from the database, the status gives
// the IRS iteration and weights, and the job page charts them.
func TestTrainMetricsFromAnotherMachine(t *testing.T) {
	s, src := localServerWith(t, 0, time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	model := localModel(t, s)

	cfg := s.App.Config
	cfg.DataDir, cfg.ModelsDir = t.TempDir(), t.TempDir()
	writeModel(t, filepath.Join(cfg.ModelsDir, model))
	worker := finetune.New(s.Pool, cfg, nil, src, nil, nil, nil)
	// The worker's machine reports what its trainer finds, as its
	// process's beat does; the web server takes the launch on its word.
	info, err := worker.LocalProbe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.App.Services.Servers.WorkerBeat(t.Context(), servers.WorkerReport{ID: uuid.New(), Host: "gpu-1", Device: "auto", Slots: 1,
		Probe: &info, ProbedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "IRS", "model_id": model, "dataset_version_id": chats.ID.String(),
		"irs_config": map[string]any{"n_iterations": 2}}).Must(t, http.StatusCreated).JSON(t, &started)
	id := uuid.MustParse(started.JobID)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := worker.Advance(t.Context(), id)
		if err != nil {
			t.Fatalf("step %s: %v", out.Step, err)
		}
		if out.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is still at %s after a minute", out.Step)
		}
		time.Sleep(out.Wait)
	}
	if _, err := os.Stat(filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the web server has the run directory (%v)", err)
	}

	file, err := os.ReadFile(filepath.Join(cfg.DataDir, "runs", "train_"+started.JobID, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(file)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	var lines []map[string]any
	s.API(admin, http.MethodGet, "/api/train/"+started.JobID+"/metrics", nil).Must(t, http.StatusOK).JSON(t, &lines)
	// Per iteration: generating, scoring, the summary and a training step.
	if len(want) != 8 || !reflect.DeepEqual(lines, want) {
		t.Errorf("metrics answer %v, want the worker's metrics.jsonl %v", lines, want)
	}
	var st trainStatus
	s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &st)
	if d := st.Detail; st.State != "succeeded" || d.CurrentIteration != 2 || d.Metrics.AvgReward == nil || *d.Metrics.AvgReward != 2 ||
		math.Abs(d.Metrics.CurrentWeights["rel"]-1.2) > 1e-9 {
		t.Errorf("status %+v", st)
	}
	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
	if reward := regexpFind(t, `id="ft-reward-line" points="([^"]*)"`, page.Body); len(strings.Fields(reward)) != 2 {
		t.Errorf("reward line %q, want 2 points", reward)
	}
}
