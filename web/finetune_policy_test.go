package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/web/webtest"
)

type policyStatus struct {
	Stage  string `json:"stage"`
	State  string `json:"state"`
	Detail struct {
		Metrics struct {
			AvgReward       *float64           `json:"avg_reward"`
			KL              *float64           `json:"kl"`
			ClipFraction    *float64           `json:"clip_fraction"`
			HeldOutScore    *float64           `json:"heldout_score"`
			RewardBreakdown map[string]float64 `json:"reward_breakdown"`
		} `json:"metrics"`
		StoppedEarly string `json:"stopped_early"`
	} `json:"detail"`
}

// attr is the unescaped value of the first name="..." attribute of the
// element with the given id.
func attr(t *testing.T, body, id, name string) string {
	t.Helper()
	return html.UnescapeString(regexpFind(t, `id="`+id+`"[^>]*?\s`+name+`="([^"]*)"`, body))
}

// POST /api/train with stage GRPO starts a local GRPO job with the
// request's grpo_config; the status gives the last step's reward, KL and
// clip fraction and the last held-out score; the job page charts them by
// step (the held-out check before training at step 0). Bad settings are
// refused under the request's names.
func TestTrainAPIGRPO(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	model := localModel(t, s)
	writeModel(t, filepath.Join(s.App.Config.ModelsDir, "rm-v1"))

	grpo := map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String(),
		"grpo_config": map[string]any{"group_size": 8, "kl_max": 1.5, "kl_coef": 0, "reward_model": "rm-v1", "weights": map[string]any{"rm": 1, "conc": 0.5}}}
	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", grpo).Must(t, http.StatusCreated).JSON(t, &started)
	waitTrain(t, s, admin, started.JobID)
	var st policyStatus
	s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &st)
	// The fake's step 4: reward 0.2 + 0.4, KL 0.04, clip fraction 0.2; held-out 0.6 after it.
	m := st.Detail.Metrics
	if st.Stage != "GRPO" || m.AvgReward == nil || !near(*m.AvgReward, 0.6) || m.KL == nil || !near(*m.KL, 0.04) ||
		m.ClipFraction == nil || !near(*m.ClipFraction, 0.2) || m.HeldOutScore == nil || *m.HeldOutScore != 0.6 || st.Detail.StoppedEarly != "" {
		t.Errorf("status %+v", st)
	}
	run := filepath.Join(s.App.Config.DataDir, "runs", "train_"+started.JobID)
	var cfg struct {
		Method string         `json:"method"`
		Policy map[string]any `json:"policy"`
	}
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("config.json: %v %s", err, b)
	}
	want := map[string]any{"group_size": 8.0, "kl_max": 1.5, "kl_coef": 0.0, "reward_model": filepath.Join(s.App.Config.ModelsDir, "rm-v1"),
		"weights": map[string]any{"rm": 1.0, "conc": 0.5}}
	if cfg.Method != "grpo" || !reflect.DeepEqual(cfg.Policy, want) {
		t.Errorf("config.json %s", b)
	}

	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "GRPO: reward, KL and clipping by step") || !strings.Contains(page.Body, `id="ft-method">GRPO<`) {
		t.Errorf("the page names the method otherwise: %s", regexpFind(t, `(?s)(<section id="ft-policy">.{0,300})`, page.Body))
	}
	var series struct {
		Step    []int      `json:"step"`
		Reward  []*float64 `json:"reward"`
		HeldOut []*float64 `json:"heldout"`
		KL      []*float64 `json:"kl"`
		Clip    []*float64 `json:"clip"`
	}
	if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-policy-reward-chart", "data-policy")), &series); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(series.Step, []int{0, 1, 2, 3, 4}) || series.Reward[0] != nil || !near(*series.Reward[1], 0.3) ||
		*series.HeldOut[0] != 0.5 || series.HeldOut[1] != nil || *series.HeldOut[4] != 0.6 || !near(*series.KL[4], 0.04) || !near(*series.Clip[2], 0.1) {
		t.Errorf("series %+v", series)
	}
	for id, want := range map[string]string{"ft-policy-reward": "0.6", "ft-policy-kl": "0.04", "ft-policy-clip": "20.0%", "ft-policy-heldout": "0.6"} {
		if got := regexpFind(t, `id="`+id+`">([^<]*)<`, page.Body); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	if n := strings.Count(regexpFind(t, `(?s)<table class="table" id="ft-policy-steps">(.*?)</table>`, page.Body), "<tr>"); n != 6 {
		t.Errorf("%d rows in the steps table, want a header and 5 steps", n)
	}

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String(), "grpo_config": map[string]any{"group_size": 1}}, "grpo_config.group_size"},
		{map[string]any{"stage": "PPO", "model_id": model, "dataset_version_id": chats.ID.String(), "grpo_config": map[string]any{"kl_max": 0.0, "clip_epsilon": 1.5}}, "grpo_config.clip_epsilon"},
		{map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String(), "grpo_config": map[string]any{"weights": map[string]any{"rm": 1}}}, "grpo_config.weights.rm"},
		{map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String(), "grpo_config": map[string]any{"reward_model": "../rm-v1"}}, "grpo_config.reward_model"},
		{map[string]any{"stage": "DPO", "model_id": model, "dataset_version_id": pairs.ID.String(), "grpo_config": map[string]any{"group_size": 4}}, "grpo_config"},
		{map[string]any{"stage": "RLHF", "model_id": model, "dataset_version_id": chats.ID.String()}, "stage"},
	} {
		res := s.API(admin, http.MethodPost, "/api/train", tc.body).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `"field":"`+tc.field+`"`) {
			t.Errorf("%v: no message for %s in %s", tc.body, tc.field, res.Body)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A PPO run the trainer stopped early (the KL bound) succeeds, and its
// status and page say why.
func TestTrainAPIStoppedEarly(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond, "FAKE_TRAINER_MODE=stop")
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "PPO", "model_id": localModel(t, s), "dataset_version_id": chats.ID.String()}).
		Must(t, http.StatusCreated).JSON(t, &started)
	waitTrain(t, s, admin, started.JobID)
	var st policyStatus
	s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &st)
	reason := "KL divergence from the reference reached 0.8 after step 2, above the bound 0.5; the adapter from step 1, the last within it, is kept"
	if st.Stage != "PPO" || st.State != "succeeded" || st.Detail.StoppedEarly != reason {
		t.Errorf("status %+v", st)
	}
	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
	if got := regexpFind(t, `(?s)<p class="banner banner-warn ft-stopped" role="status"><strong>Stopped early:</strong> ([^<]*)</p>`, page.Body); got != reason {
		t.Errorf("banner %q", got)
	}
	if !strings.Contains(page.Body, `class="event-warn"`) || !strings.Contains(page.Body, "stopped early at step 2: KL divergence") {
		t.Errorf("no warning in the events")
	}
	// PPO's table has the value loss.
	if !strings.Contains(page.Body, "<th class=\"num\">Value loss</th>") {
		t.Error("no value loss column")
	}
}

// A reward model job's page shows its evaluation: the kept epoch's
// pairwise accuracy, MSE, MAE, Pearson and calibration error, a row per
// epoch with the kept one marked, and the calibration bins as chart data
// and as a table.
func TestRewardModelEvaluationPage(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	var started struct {
		JobID string `json:"job_id"`
	}
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "REWARD", "model_id": localModel(t, s), "dataset_version_id": pairs.ID.String(),
		"hyperparameters": map[string]any{"early_stopping_patience": 1}}).Must(t, http.StatusCreated).JSON(t, &started)
	waitTrain(t, s, admin, started.JobID)

	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
	// The fake evaluates epoch 1 (accuracy 0.75, calibration error 0.05) and epoch 2
	// (0.7, 0.1), then keeps epoch 1.
	for id, want := range map[string]string{"ft-rm-accuracy": "75.0%", "ft-rm-mse": "0.04", "ft-rm-mae": "0.15", "ft-rm-pearson": "0.82", "ft-rm-ece": "0.05"} {
		if got := regexpFind(t, `id="`+id+`">([^<]*)<`, page.Body); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	if got := regexpFind(t, `id="ft-reward-kept">([^<]*)<`, page.Body); got != "The model keeps the weights of epoch 1, whose validation loss (0.5) was the lowest." {
		t.Errorf("kept %q", got)
	}
	epochs := regexpFind(t, `(?s)<table class="table" id="ft-reward-epochs">(.*?)</table>`, page.Body)
	if strings.Count(epochs, "<tr") != 3 || strings.Count(epochs, `class="ft-kept"`) != 1 || !strings.Contains(epochs, "70.0%") {
		t.Errorf("epochs table %s", epochs)
	}
	var cal struct {
		Bin       []float64  `json:"bin"`
		Observed  []*float64 `json:"observed"`
		Predicted []*float64 `json:"predicted"`
	}
	if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-calibration", "data-calibration")), &cal); err != nil {
		t.Fatal(err)
	}
	// Ten bins; the fake fills 2 to 7 with the bin's middle as the prediction and
	// that plus 0.05 (epoch 1's shift) as the observed rate.
	if len(cal.Bin) != 10 || !near(cal.Bin[0], 0.05) || cal.Observed[0] != nil || !near(*cal.Predicted[2], 0.25) || !near(*cal.Observed[2], 0.3) {
		t.Errorf("calibration %+v", cal)
	}
	bins := regexpFind(t, `(?s)<table class="table" id="ft-calibration-bins">(.*?)</table>`, page.Body)
	if !strings.Contains(bins, "<td>0.2–0.3</td><td class=\"num\">4</td><td class=\"num\">0.25</td><td class=\"num\">30.0%</td>") {
		t.Errorf("bins table %s", bins)
	}
	if !strings.Contains(page.Body, "Stopped early:</strong> validation loss has not improved") {
		t.Error("no stopped-early banner")
	}
	// The recipe's 5 epochs are the estimate for auto epochs.
	if got := regexpFind(t, `(?s)<td>Epochs</td>\s*<td class="num">(\d+)</td>`, page.Body); got != "5" {
		t.Errorf("estimated epochs %s, want the recipe's 5", got)
	}
}

// The launch form offers GRPO with a line saying what it does and its own
// settings, puts a bad setting's message beside it, and stores the good ones.
func TestLaunchFormGRPO(t *testing.T) {
	s, src := localServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	c := s.SignedIn("ada@acme.test")

	page := c.Get("/fine-tuning/new?provider=local&method=grpo").Must(t, http.StatusOK)
	for _, want := range []string{`<option value="grpo" selected>GRPO: policy optimisation against a reward (local only)</option>`,
		`id="ft-method-grpo" data-methods="grpo ppo">GRPO samples several answers to each prompt`, `<fieldset id="ft-local-policy" data-methods="grpo ppo">`,
		`name="local.policy.group_size" value="" placeholder="4"`, `name="local.policy.kl_max" value="" placeholder="0.5"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("launch form lacks %s", want)
		}
	}
	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"local"}, "base_model": {localModel(t, s)}, "method": {"grpo"},
		"local.policy.group_size": {"6"}, "local.policy.kl_coef": {"0.1"}}
	bad := cloneForm(form)
	bad.Set("local.policy.group_size", "1")
	res := c.PostForm("/fine-tuning/jobs", bad).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-local-policy-group-size">must be at least 2 for grpo`) {
		t.Errorf("no inline message: %s", regexpFind(t, `(?s)(id="ft-local-policy".{0,1500})`, res.Body))
	}
	res = c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusSeeOther)
	id := strings.TrimPrefix(res.Header.Get("Location"), "/fine-tuning/jobs/")
	var raw []byte
	if err := s.Pool.QueryRow(t.Context(), "SELECT local_settings FROM fine_tuning_jobs WHERE id = $1", id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Policy struct {
			GroupSize int      `json:"group_size"`
			KLCoef    *float64 `json:"kl_coef"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil || stored.Policy.GroupSize != 6 || stored.Policy.KLCoef == nil || *stored.Policy.KLCoef != 0.1 {
		t.Errorf("stored settings %s (%v)", raw, err)
	}
}

// In a browser, the pages of a reward model job and of a GRPO job draw
// their charts with uPlot: the calibration, and reward and KL by step.
func TestBrowserRewardAndPolicyCharts(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	s.User(org, "vic@acme.test", "viewer")
	model := localModel(t, s)
	ids := map[string]string{}
	for stage, v := range map[string]string{"REWARD": src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2).ID.String(),
		"GRPO": src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2).ID.String()} {
		var started struct {
			JobID string `json:"job_id"`
		}
		s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": stage, "model_id": model, "dataset_version_id": v}).
			Must(t, http.StatusCreated).JSON(t, &started)
		waitTrain(t, s, admin, started.JobID)
		ids[stage] = started.JobID
	}
	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "vic@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
	)
	if err != nil {
		t.Fatal(err)
	}
	for stage, charts := range map[string][]string{"REWARD": {"ft-calibration"}, "GRPO": {"ft-policy-reward", "ft-policy-kl"}} {
		err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/fine-tuning/jobs/"+ids[stage]), chromedp.WaitVisible(`#ft-live`))
		for _, kind := range charts {
			if err == nil {
				err = chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.querySelector('.chart[data-chart="`+kind+`"] canvas') !== null`,
					chromedp.WithPollingTimeout(20*time.Second)))
			}
		}
		if err != nil {
			t.Fatalf("%s charts: %v", stage, err)
		}
		webtest.Screenshot(t, ctx, "finetune-"+strings.ToLower(stage)+"-charts")
	}
}
