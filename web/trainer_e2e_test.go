package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/web/webtest"
)

// realTrainer is the Python of the trainer's environment that
// CURATE_TEST_TRAINER_PYTHON names (make test sets it); the test is
// skipped without one, and fails under CI=true, where make test installs it.
func realTrainer(t *testing.T) string {
	t.Helper()
	py := os.Getenv("CURATE_TEST_TRAINER_PYTHON")
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CURATE_TEST_TRAINER_PYTHON is not set; make test installs the trainer's environment and sets it")
		}
		t.Skip("CURATE_TEST_TRAINER_PYTHON is not set: the real trainer (torch, transformers, peft) is not run; make test sets it")
	}
	return py
}

// Every stage of the training API on a local worker whose trainer is the
// real one (transformers, peft and TRL on the CPU), training the tiny
// Llama that make gpu-check builds (gpu_check.py --build-model) a few
// steps each: SFT, DPO, REWARD, IRS, GRPO and PPO succeed, their metrics
// reach the dashboard's API, each version is registered with its adapter
// (REWARD as a reward model). The GRPO and PPO runs take their reward from Curate
// (RLAIF): a stand-in teacher (OpenAI's chat completions) that grades
// every reply 0.95 and two rule scorers in the formula R = 0.4·chain −
// 0.2·risk + 0.4·judge; the tiny model's replies reason in no <think>
// block (chain 0) and advise nothing risky (risk 0), so the rules say
// (0.2·1)/0.6 = 0.33 and every sample is a teacher-versus-rules conflict.
// A GRPO launch whose prompts hold too few red-team prompts is refused.
func TestTrainerEndToEnd(t *testing.T) {
	py := realTrainer(t)
	started := time.Now()
	trainerDir, err := filepath.Abs("../trainer")
	if err != nil {
		t.Fatal(err)
	}
	models := t.TempDir()
	build := exec.Command(py, filepath.Join(trainerDir, "gpu_check.py"), "--build-model", filepath.Join(models, "tiny-llama"))
	build.Env = append(os.Environ(), "HF_HUB_OFFLINE=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the tiny model: %v\n%s", err, out)
	}
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *cfgT) {
		c.TrainerPython, c.TrainerDir, c.TrainerCommand, c.TrainerDevice = py, trainerDir, "", "cpu"
		c.FineTunePoll, c.FineTuneBudgetUSD, c.GPUSlots, c.ModelsDir = 100*time.Millisecond, 100, 1, models
	}})
	src := &finetunetest.Source{}
	s.App.FineTune.SetDataSource(src)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	src.Tag(chats.ID, "red_team", 0, 1) // 2 of the 4 training prompts
	untagged := src.AddSFT(org, "support-sft v2", finetunetest.Chats(6), 2)
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)

	teacher := chattest.New(func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.95, "safety_flag": false, "critique": "Graded by the teacher."}`,
			PromptTokens: 100, CompletionTokens: 20}
	})
	t.Cleanup(teacher.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "teacher", "base_url": teacher.URL + "/v1", "model": "deepseek-chat",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)
	rlaifCfg := map[string]any{"judge": map[string]any{"endpoint": "teacher"}, "conflict_threshold": 0.5,
		"reward_formula": map[string]any{"chain": 0.4, "risk": -0.2, "judge": 0.4}}

	s.User(org, "vic@acme.test", "viewer")
	small := map[string]any{"lora_r": 4, "lora_alpha": 8, "max_length": 64, "learning_rate": 1e-3}
	policy := map[string]any{"group_size": 2, "max_new_tokens": 8, "updates_per_batch": 1, "holdout_every": 100}
	withRLAIF := map[string]any{"rlaif": rlaifCfg}
	for k, v := range policy {
		withRLAIF[k] = v
	}
	// Too few red-team prompts: refused on the field, before anything runs.
	res := s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "GRPO", "model_id": "tiny-llama",
		"dataset_version_id": untagged.ID.String(), "local": small, "grpo_config": withRLAIF}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `"field":"grpo_config.rlaif.red_team_share"`) || !strings.Contains(res.Body, "0 prompts tagged red_team among its 4 training prompts") {
		t.Errorf("a prompt set without red-team prompts: %s", res.Body)
	}

	one := map[string]any{"epochs": 1, "batch_size": 2}
	cases := []struct {
		stage string
		body  map[string]any
		kind  string
	}{
		{"SFT", map[string]any{"dataset_version_id": chats.ID.String(), "hyperparameters": one}, "lora"},
		{"DPO", map[string]any{"dataset_version_id": pairs.ID.String(), "hyperparameters": one}, "lora"},
		{"REWARD", map[string]any{"dataset_version_id": pairs.ID.String(), "hyperparameters": one}, "reward"},
		{"IRS", map[string]any{"dataset_version_id": chats.ID.String(), "irs_config": map[string]any{"n_iterations": 1, "n_candidates": 2,
			"batch_size": 2, "max_new_tokens": 8, "n_questions": 2}}, "lora"},
		{"GRPO", map[string]any{"dataset_version_id": chats.ID.String(), "hyperparameters": one, "grpo_config": withRLAIF}, "lora"},
		{"PPO", map[string]any{"dataset_version_id": chats.ID.String(), "hyperparameters": one, "grpo_config": withRLAIF}, "lora"},
	}
	for _, tc := range cases {
		body := map[string]any{"stage": tc.stage, "model_id": "tiny-llama", "local": small}
		for k, v := range tc.body {
			body[k] = v
		}
		began := time.Now()
		id := launchReal(t, s, admin, body)
		job := waitReal(t, s, viewer, id)
		run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+id)
		if job.FineTunedModel != filepath.Join(run, "final") {
			t.Errorf("%s: model %q, want %s/final", tc.stage, job.FineTunedModel, run)
		}
		artefact := "adapter_config.json"
		if tc.kind == "reward" {
			artefact = "config.json"
		}
		if _, err := os.Stat(filepath.Join(run, "final", artefact)); err != nil {
			t.Errorf("%s: no %s in final/: %v", tc.stage, artefact, err)
		}
		// The metrics the trainer wrote reach the dashboard's API.
		var lines []map[string]any
		s.API(viewer, http.MethodGet, "/api/train/"+id+"/metrics", nil).Must(t, http.StatusOK).JSON(t, &lines)
		losses := 0
		for _, l := range lines {
			if _, ok := l["loss"]; ok {
				losses++
			}
		}
		if losses == 0 {
			t.Errorf("%s: no loss among the %d metrics lines: %v", tc.stage, len(lines), lines)
		}
		// Registered with its adapter (or reward model).
		v := registered(t, s, viewer, id)
		if v.ModelID != job.FineTunedModel || v.Kind != tc.kind {
			t.Errorf("%s: registered %+v, want kind %s at %s", tc.stage, v, tc.kind, job.FineTunedModel)
		}
		t.Logf("%s: succeeded in %s, %d metrics lines, registered %s %s", tc.stage, time.Since(began).Round(100*time.Millisecond), len(lines), v.Kind, v.Version)
		if tc.stage == "GRPO" || tc.stage == "PPO" {
			checkRLAIFRun(t, s, tc.stage, viewer, id, run)
		}
	}
	t.Logf("every stage through the real trainer in %s", time.Since(started).Round(time.Second))
}

// checkRLAIFRun checks a GRPO run that took its reward from Curate: its
// key was revoked at the end, each step's samples are kept with the
// reward's components, the run's page charts them, and the conflicts are
// in the queue.
func checkRLAIFRun(t *testing.T, s *webtest.Server, stage, viewer, id, run string) {
	t.Helper()
	// config.json names the run's rewards API, and holds no key.
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	var cfg struct {
		Policy struct {
			RLAIF map[string]any `json:"rlaif"`
		} `json:"policy"`
	}
	if err != nil || json.Unmarshal(b, &cfg) != nil || len(cfg.Policy.RLAIF) != 1 || cfg.Policy.RLAIF["url"] != s.URL+"/api/train/"+id+"/rewards" {
		t.Errorf("config.json: %v %s", err, b)
	}
	var revoked bool
	if err := s.Pool.QueryRow(t.Context(), `SELECT k.revoked_at IS NOT NULL FROM fine_tuning_run_keys r JOIN api_keys k ON k.id = r.api_key_id
		WHERE r.job_id = $1`, id).Scan(&revoked); err != nil || !revoked {
		t.Errorf("the run's key revoked %v (%v)", revoked, err)
	}
	rows, err := s.Pool.Query(t.Context(), `SELECT step, count(*), count(*) FILTER (WHERE conflict), avg(reward),
		avg((components->'chain'->>'value')::float8), avg((components->'risk'->>'value')::float8), avg((components->'judge'->>'value')::float8)
		FROM rlaif_samples WHERE job_id = $1 GROUP BY step ORDER BY step`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	steps := 0
	for rows.Next() {
		var step, n, conflicts int
		var reward, chain, risk, judge *float64
		if err := rows.Scan(&step, &n, &conflicts, &reward, &chain, &risk, &judge); err != nil {
			t.Fatal(err)
		}
		steps++
		t.Logf("%s step %d: %d samples, %d conflicts, reward %v, chain %v, risk %v, judge %v", stage, step, n, conflicts, deref(reward), deref(chain), deref(risk), deref(judge))
		if chain == nil || risk == nil || judge == nil || *judge != 0.95 {
			t.Errorf("step %d: components chain %v risk %v judge %v", step, chain, risk, judge)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if steps < 2 {
		t.Errorf("%d %s steps scored by Curate, want 2 (4 training prompts, 2 a step)", steps, stage)
	}
	// The trainer's own metrics carry the components too.
	var lines []map[string]any
	s.API(viewer, http.MethodGet, "/api/train/"+id+"/metrics", nil).Must(t, http.StatusOK).JSON(t, &lines)
	for _, l := range lines {
		if b, ok := l["reward_breakdown"].(map[string]any); ok {
			for _, k := range []string{"curate", "chain", "risk", "judge"} {
				if _, ok := b[k]; !ok {
					t.Errorf("step %v reward_breakdown %v has no %s", l["step"], b, k)
				}
			}
		}
	}
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+id+"/live").Must(t, http.StatusOK)
	var series struct {
		Step       []int `json:"step"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-rlaif-chart", "data-rlaif")), &series); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range series.Components {
		names = append(names, c.Name)
	}
	if len(series.Step) != steps || strings.Join(names, ",") != "chain,judge,risk" {
		t.Errorf("the run's chart: steps %v, components %v", series.Step, names)
	}
	// Every prompt of the tiny set is "hello", two of them tagged red_team,
	// so every sample is a red-team one.
	if got := regexpFind(t, `id="ft-rlaif-redteam">([^<]*)<`, page.Body); got == "0" {
		t.Errorf("no red-team samples on the run's page")
	}
	conflicts := s.SignedIn("vic@acme.test").Get("/feedback/conflicts").Must(t, http.StatusOK)
	if n := strings.Count(conflicts.Body, `href="/fine-tuning/jobs/`+id+`" class="conflict-training"`); n == 0 {
		t.Errorf("no conflict of the run in the judge-conflicts queue")
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// launchReal starts a training job, waiting (up to a minute) for a worker
// whose trainer's probe has reported.
func launchReal(t *testing.T, s *webtest.Server, key string, body map[string]any) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res := s.API(key, http.MethodPost, "/api/train", body)
		if res.Status == http.StatusCreated {
			var out struct {
				JobID string `json:"job_id"`
			}
			res.JSON(t, &out)
			return out.JobID
		}
		if res.Status != http.StatusUnprocessableEntity || !strings.Contains(res.Body, "worker") || time.Now().After(deadline) {
			t.Fatalf("launching %v: %d %s", body["stage"], res.Status, res.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReal waits (up to three minutes) for a job to succeed.
func waitReal(t *testing.T, s *webtest.Server, key, id string) localJob {
	t.Helper()
	var job localJob
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		s.API(key, http.MethodGet, "/api/fine-tuning/jobs/"+id, nil).Must(t, http.StatusOK).JSON(t, &job)
		switch job.Status {
		case "succeeded":
			return job
		case "failed", "cancelled":
			b, _ := os.ReadFile(filepath.Join(s.App.Config.DataDir, "runs", "train_"+id, "stderr.log"))
			t.Fatalf("job %s %s: %s\n%s", id, job.Status, job.Error, tail(string(b), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("job %s still %s after three minutes", id, job.Status)
	return job
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type registeredVersion struct {
	ID              string `json:"id"`
	Version         string `json:"version"`
	Kind            string `json:"kind"`
	ModelID         string `json:"model_id"`
	FineTuningJobID string `json:"fine_tuning_job_id"`
}

// registered is the registry's version a job trained.
func registered(t *testing.T, s *webtest.Server, key, jobID string) registeredVersion {
	t.Helper()
	var list struct {
		Data []registeredVersion `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/models?limit=100", nil).Must(t, http.StatusOK).JSON(t, &list)
	for _, v := range list.Data {
		if v.FineTuningJobID == jobID {
			return v
		}
	}
	t.Fatalf("no registered version of job %s among %+v", jobID, list.Data)
	return registeredVersion{}
}
