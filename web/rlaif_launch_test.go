package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/finetune/finetunetest"
)

// A GRPO launch with grpo_config.rlaif (with the fake trainer): the reward
// is checked as it will score and the prompt set's red-team share is
// enforced, each refusal on its field; an accepted run's config.json names
// its rewards API, the run's own key (which works on that API, scoring
// with the reward the run was launched with) is in its environment only,
// and the job's end revokes it.
func TestTrainAPIRLAIFLaunch(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond, "FAKE_TRAINER_MODE=wait")
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(7), 2)
	src.Tag(chats.ID, "red_team", 0, 1)          // 2 of 5 training prompts: 40%
	src.Tag(chats.ID, "adversarial", 2, 3, 4, 5) // 5 is in the validation split
	teacher := chattest.New(func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.9, "safety_flag": false, "critique": "Fine."}`, PromptTokens: 10, CompletionTokens: 5}
	})
	t.Cleanup(teacher.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "teacher", "base_url": teacher.URL + "/v1", "model": "deepseek-chat",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)
	model := localModel(t, s)
	launch := func(rlaif map[string]any, extra map[string]any) map[string]any {
		cfg := map[string]any{"group_size": 2, "rlaif": rlaif}
		for k, v := range extra {
			cfg[k] = v
		}
		return map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String(), "grpo_config": cfg}
	}
	teacherOnly := map[string]any{"judge": map[string]any{"endpoint": "teacher"}, "reward_formula": map[string]any{"chain": 0.5, "judge": 0.5}}

	for _, tc := range []struct {
		body  map[string]any
		field string
		msg   string
	}{
		{launch(map[string]any{"judge": map[string]any{"endpoint": "nobody"}, "reward_formula": map[string]any{"judge": 1}}, nil),
			"grpo_config.rlaif.judge.endpoint", `no endpoint is named \"nobody\"`},
		{launch(map[string]any{"reward_formula": map[string]any{"chain": 1, "judge": 1}}, nil), "grpo_config.rlaif.judge.endpoint", "is required"},
		{launch(map[string]any{"judge": map[string]any{"endpoint": "teacher"}, "reward_formula": map[string]any{"judge": 1}, "red_team_share": 0.5}, nil),
			"grpo_config.rlaif.red_team_share", "has 2 prompts tagged red_team among its 5 training prompts (40%); RLAIF needs at least 50% (3)"},
		{launch(map[string]any{"judge": map[string]any{"endpoint": "teacher"}, "reward_formula": map[string]any{"judge": 1}, "red_team_tag": "adversarial",
			"red_team_share": 0.8}, nil), "grpo_config.rlaif.red_team_share", "has 3 prompts tagged adversarial"},
		{launch(map[string]any{"red_team_share": 1.5, "red_team_tag": "Red Team"}, nil), "grpo_config.rlaif.red_team_share", "from 0 to 1"},
		{launch(map[string]any{"red_team_tag": "Red Team"}, nil), "grpo_config.rlaif.red_team_tag", "must be a tag"},
		{launch(teacherOnly, map[string]any{"weights": map[string]any{"rel": 1}}), "grpo_config.weights", "leave it out with policy.rlaif"},
	} {
		res := s.API(admin, http.MethodPost, "/api/train", tc.body).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `"field":"`+tc.field+`"`) || !strings.Contains(res.Body, tc.msg) {
			t.Errorf("want %s %q in %s", tc.field, tc.msg, res.Body)
		}
	}

	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", launch(teacherOnly, nil)).Must(t, http.StatusCreated).JSON(t, &started)
	waitJob(t, s, admin, started.JobID, "running")
	run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID)
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	var cfg struct {
		Policy map[string]any `json:"policy"`
	}
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("config.json: %v %s", err, b)
	}
	want := map[string]any{"url": s.URL + "/api/train/" + started.JobID + "/rewards"}
	if got, _ := cfg.Policy["rlaif"].(map[string]any); len(got) != 1 || got["url"] != want["url"] || cfg.Policy["weights"] != nil {
		t.Errorf("config.json policy %v, want rlaif %v and no weights", cfg.Policy, want)
	}
	var keyID string
	var revoked bool
	if err := s.Pool.QueryRow(t.Context(), `SELECT k.id::text, k.revoked_at IS NOT NULL FROM fine_tuning_run_keys r JOIN api_keys k ON k.id = r.api_key_id
		WHERE r.job_id = $1 AND k.role = 'curator' AND k.name = 'Training run ' || $1::text`, started.JobID).Scan(&keyID, &revoked); err != nil || revoked {
		t.Fatalf("the run's key %s revoked %v (%v)", keyID, revoked, err)
	}
	token := runToken(t, run)
	if strings.Contains(string(b), token) {
		t.Errorf("config.json holds the run's key: %s", b)
	}
	// The run's own key scores its samples with the reward it was launched
	// with (R = 0.5·chain + 0.5·judge), whatever the caller sends; a sample
	// asking one of the prompts tagged red_team ("hello") is marked so.
	var out struct {
		Data []map[string]any `json:"data"`
	}
	s.API(token, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": 1,
		"samples": []any{map[string]any{"prompt": "q", "completion": "<think>Because.</think> The answer."},
			map[string]any{"prompt": " hello", "completion": "hi"}},
		"rlaif": map[string]any{"reward_formula": map[string]any{"chain": 1}}}).Must(t, http.StatusOK).JSON(t, &out)
	if len(out.Data) != 2 || out.Data[0]["reward"] != 0.95 {
		t.Errorf("rewards %v, want 0.5·1 + 0.5·0.9 = 0.95 first", out.Data)
	}
	var red []bool
	rows, err := s.Pool.Query(t.Context(), `SELECT red_team FROM rlaif_samples WHERE job_id = $1 ORDER BY prompt DESC`, started.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r bool
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		red = append(red, r)
	}
	rows.Close()
	if len(red) != 2 || red[0] || !red[1] {
		t.Errorf("red-team marks of q and hello: %v, want false, true", red)
	}

	if err := os.WriteFile(filepath.Join(run, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitTrain(t, s, admin, started.JobID)
	if err := s.Pool.QueryRow(t.Context(), `SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1`, keyID).Scan(&revoked); err != nil || !revoked {
		t.Errorf("the run's key revoked %v after the job ended (%v)", revoked, err)
	}
	var audits int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE target_id = $1 AND action IN ('api_key.create', 'api_key.revoke')`, keyID).
		Scan(&audits); err != nil || audits != 2 {
		t.Errorf("%d audit records of the run's key (%v), want its creation and revocation", audits, err)
	}
}

// runToken is the reward key the fake trainer found in its environment,
// which it records in env.log.
func runToken(t *testing.T, run string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, "env.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CURATE_REWARD_TOKEN="); ok && v != "" {
			return v
		}
	}
	t.Fatalf("no CURATE_REWARD_TOKEN in the trainer's environment: %s", b)
	return ""
}
