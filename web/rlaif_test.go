package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/web/webtest"
)

// A GRPO run on the tiny model takes its reward from Curate: each step's
// samples are scored through POST /api/train/:id/rewards with the
// organisation's formula, a judge stand-in as the teacher and the rule
// presets; the run's page shows the reward and each component by step and
// the teacher's spend, and a teacher-versus-rules disagreement is in the
// judge-conflicts queue, linked to the run. A bad batch is refused on its
// fields; a finished run scores nothing more.
func TestTrainRLAIFRewards(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond, "FAKE_TRAINER_MODE=wait")
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	curator := s.APIKey(org, "trainer", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	teacher := chattest.New(func(r chattest.Request) chattest.Reply {
		score := "0.9"
		if strings.Contains(r.Last(), "911") {
			score = "0.2"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "Graded by the teacher."}`,
			PromptTokens: 1000, CompletionTokens: 200}
	})
	t.Cleanup(teacher.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "teacher", "base_url": teacher.URL + "/v1", "model": "deepseek-chat",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)

	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "GRPO", "model_id": localModel(t, s), "dataset_version_id": chats.ID.String()}).
		Must(t, http.StatusCreated).JSON(t, &started)
	waitJob(t, s, admin, started.JobID, "running")

	cfg := map[string]any{"judge": map[string]any{"endpoint": "teacher"}, "conflict_threshold": 0.5}
	step := func(n int, samples ...map[string]any) []map[string]any {
		t.Helper()
		var out struct {
			Data []map[string]any `json:"data"`
		}
		s.API(curator, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": n, "samples": samples, "rlaif": cfg}).
			Must(t, http.StatusOK).JSON(t, &out)
		return out.Data
	}
	// By hand, with the default formula R = 0.35·chain + 0.25·emergency −
	// 0.15·risk + 0.25·judge: the first answer's rules all pass (1) and the
	// teacher gives 0.2, R = 0.65, a conflict; the second's risk fires
	// (rules 0) and the teacher gives 0.9, R = 0.075, a conflict.
	got := step(1, map[string]any{"prompt": "I have chest pain and I am sweating",
		"completion": "<think>Chest pain with sweating can be a heart attack.</think> Call 911 immediately, and if the pain gets worse do not wait."},
		map[string]any{"prompt": "My sugar is low", "completion": "Stop taking your insulin and rest.", "red_team": true})
	if len(got) != 2 || got[0]["reward"] != 0.65 || got[0]["conflict"] != true || got[1]["conflict"] != true || got[0]["teacher_cost_micros"] != 490.0 {
		t.Fatalf("step 1 rewards %v", got)
	}
	if r := got[1]["reward"].(float64); r < 0.075-1e-9 || r > 0.075+1e-9 {
		t.Errorf("second reward %v, want 0.075", r)
	}
	step(2, map[string]any{"prompt": "I have a mild headache", "completion": "<think>Likely tension.</think> Drink water; see a doctor if it gets worse."})

	// The run's page: the reward and each component by step, the teacher's spend.
	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID+"/live").Must(t, http.StatusOK)
	var series struct {
		Step       []int      `json:"step"`
		Reward     []*float64 `json:"reward"`
		Components []struct {
			Name   string     `json:"name"`
			Values []*float64 `json:"values"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-rlaif-chart", "data-rlaif")), &series); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, c := range series.Components {
		names = append(names, c.Name)
	}
	if len(series.Step) != 2 || series.Step[1] != 2 || strings.Join(names, ",") != "chain,emergency,judge,risk" ||
		*series.Components[2].Values[0] != (0.2+0.9)/2 || *series.Components[3].Values[0] != 0.5 || *series.Components[0].Values[1] != 1 {
		t.Errorf("RLAIF series %+v", series)
	}
	for id, want := range map[string]string{"ft-rlaif-samples": "3", "ft-rlaif-cost": "$0.0015", "ft-rlaif-conflicts": "2", "ft-rlaif-redteam": "1"} {
		if got := regexpFind(t, `id="`+id+`">([^<]*)<`, page.Body); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	// In a browser the chart draws the reward and each component.
	bctx := webtest.Browser(t)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "vic@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/fine-tuning/jobs/"+started.JobID),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, bctx, `document.querySelector('.chart[data-chart="ft-rlaif"] canvas') !== null`)
	if got := eval[string](t, bctx, `[...document.querySelectorAll('#ft-rlaif-chart .u-legend .u-label')].map(e => e.textContent).join(',')`); got != "Step,Reward,chain,emergency,judge,risk" {
		t.Errorf("RLAIF legend %q", got)
	}
	webtest.Screenshot(t, bctx, "rlaif-run")

	// The conflicts, for experts, link to the run.
	conflicts := s.SignedIn("vic@acme.test").Get("/feedback/conflicts").Must(t, http.StatusOK)
	if n := strings.Count(conflicts.Body, `href="/fine-tuning/jobs/`+started.JobID+`" class="conflict-training"`); n != 2 ||
		!strings.Contains(conflicts.Body, "rules 0.00") || !strings.Contains(conflicts.Body, "rules 1.00") {
		t.Errorf("%d training conflicts on the queue page: %s", n, regexpFind(t, `(?s)(<table class="table" id="conflicts">.*?</table>)`, conflicts.Body))
	}

	// Refusals: a viewer, a bad batch, a teacher nobody registered.
	s.API(viewer, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": 1, "samples": []any{}}).Must(t, http.StatusForbidden)
	res := s.API(curator, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": -1,
		"samples": []any{map[string]any{"prompt": "", "completion": "x"}}, "rlaif": map[string]any{"judge": map[string]any{"endpoint": "nobody"}}}).
		Must(t, http.StatusUnprocessableEntity)
	for _, f := range []string{`"field":"step"`, `"field":"samples[0].prompt"`} {
		if !strings.Contains(res.Body, f) {
			t.Errorf("no %s in %s", f, res.Body)
		}
	}
	res = s.API(curator, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": 3,
		"samples": []any{map[string]any{"prompt": "q", "completion": "a"}}, "rlaif": map[string]any{"judge": map[string]any{"endpoint": "nobody"}}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `"field":"rlaif.judge.endpoint"`) {
		t.Errorf("unknown teacher: %s", res.Body)
	}

	// Released, the run finishes and scores nothing more.
	if err := os.WriteFile(filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitTrain(t, s, admin, started.JobID)
	res = s.API(curator, http.MethodPost, "/api/train/"+started.JobID+"/rewards", map[string]any{"step": 5,
		"samples": []any{map[string]any{"prompt": "q", "completion": "a"}}, "rlaif": cfg}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `"field":"job"`) {
		t.Errorf("a finished run: %s", res.Body)
	}
}
