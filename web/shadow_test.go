package web_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/web/webtest"
)

type shadowDoc struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Scored     int    `json:"scored"`
	Open       int    `json:"open"`
	Failed     int    `json:"failed"`
	Skipped    int    `json:"skipped"`
	Formula    string `json:"formula"`
	Comparison struct {
		Difference struct {
			Mean *float64  `json:"mean"`
			CI   []float64 `json:"ci"`
			N    int       `json:"n"`
		} `json:"difference"`
		A struct {
			MeanReward *float64 `json:"mean_reward"`
		} `json:"a"`
		B struct {
			MeanReward *float64 `json:"mean_reward"`
		} `json:"b"`
		Total        int `json:"total_items"`
		Regressions  int `json:"regressions"`
		Improvements int `json:"improvements"`
		Items        []struct {
			Query      string   `json:"query"`
			Difference *float64 `json:"difference"`
			A          struct {
				Answer string `json:"answer"`
			} `json:"a"`
			B struct {
				Answer string `json:"answer"`
			} `json:"b"`
		} `json:"items"`
	} `json:"comparison"`
}

// A shadow of a candidate over 50 feedback queries answered under
// production: the candidate (an adapter on a vLLM stand-in) answers each
// once in the background, a judge stand-in (OpenAI chat shape) scores
// both answers, and the API, the shadow's page and the candidate's page
// show the paired result. Production's answers come from the feedback:
// the production adapter is never asked. The candidate never reaches
// resolve or an experiment's assignment. The expected difference is
// worked by hand: 40 queries move from 0.6 to 0.9 and 10 from 0.95 to
// 0.9, (40·0.3 − 10·0.05)/50 = 0.23.
func TestShadowOverFeedback(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	ctx := context.Background()
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	s.User(org, "ad@acme.test", "admin")
	page := s.SignedIn("ad@acme.test")

	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		score := "0.6"
		switch p := r.Last(); {
		case strings.Contains(p, "careful answer"):
			score = "0.9"
		case strings.Contains(p, "great answer"):
			score = "0.95"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "Graded."}`, PromptTokens: 500, CompletionTokens: 50}
	})
	t.Cleanup(judge.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1",
		"model": "deepseek-chat", "api_key": "sk-judge", "price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)

	vllm, v1, v2, staged := servedVersions(t, s, admin, viewer)
	candidate := staged["served_name"].(string)
	var mu sync.Mutex
	asked := map[string]int{} // served name → chat calls
	vllm.Answer = func(model, prompt string) string {
		mu.Lock()
		defer mu.Unlock()
		asked[model]++
		if model == candidate {
			return "A careful answer to: " + prompt
		}
		return "A plain answer."
	}
	// A third version in an A/B experiment against production.
	var v3 modelDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-3",
		"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, &v3)
	deployAndWait(t, s, admin, viewer, "/api/models/"+v3.ID+"/deploy", map[string]any{"alias": "canary", "target": "gpu-1", "reason": "ab"})
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-ab", "control_model_id": v1.ID, "treatment_model_id": v3.ID,
		"traffic_split": 0.5, "coverage": 1.0, "seed": "support-ab", "metrics": []string{"thumbs_up_rate"}}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/support-ab/start", nil).Must(t, http.StatusOK)

	var prod struct {
		Version string `json:"version"`
		Model   string `json:"model"`
	}
	s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &prod)
	if prod.Version != v1.Version || prod.Model == candidate {
		t.Fatalf("production resolves to %+v", prod)
	}

	// Refusals, by field.
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/shadow", map[string]any{"sample": 1.5, "judge": map[string]any{"endpoint": "deepseek"}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "alias,sample" {
		t.Errorf("a bad shadow named %q", p.fields())
	}
	s.API(admin, http.MethodPost, "/api/models/"+v1.ID+"/shadow", map[string]any{"alias": "production", "sample": 0.5}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "alias" {
		t.Errorf("shadowing production itself named %q", p.fields())
	}
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/shadow", map[string]any{"alias": "production", "target": "gpu-9", "sample": 0.5,
		"scorers": []string{"judge"}, "judge": map[string]any{"endpoint": "deepseek"}, "reward_formula": map[string]any{"judge": 1}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "target" {
		t.Errorf("a target that does not serve the candidate named %q", p.fields())
	}
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/shadow", map[string]any{"alias": "production", "sample": 0.5,
		"scorers": []string{"faithfulness"}, "reward_formula": map[string]any{"faithfulness": 1}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "judge.endpoint" {
		t.Errorf("a RAG scorer without its judge named %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/models/"+v2.ID+"/shadow", map[string]any{"alias": "production", "sample": 1}).Must(t, http.StatusForbidden)

	var sh shadowDoc
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/shadow", map[string]any{"alias": "production", "target": "gpu-1", "sample": 1,
		"scorers": []string{"judge"}, "judge": map[string]any{"endpoint": "deepseek"}, "reward_formula": map[string]any{"judge": 1}}).
		Must(t, http.StatusCreated).JSON(t, &sh)
	if sh.Status != "running" || sh.Formula != "R = 1·judge" {
		t.Fatalf("created %+v", sh)
	}

	// 50 answers of production arrive as feedback, each naming the model
	// it came from; every fifth was a great answer.
	for i := range 50 {
		answer := "A plain answer."
		if i%5 == 0 {
			answer = "A great answer."
		}
		s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": fmt.Sprintf("Question %d about billing?", i), "response": answer,
			"model": prod.Model, "feedback_type": "thumbs_up"}).Must(t, http.StatusCreated)
	}
	// The sampling stays a minute behind now; the test's clock runs two
	// minutes ahead of the feedback.
	s.App.Services.Shadows.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if err := s.App.Services.Shadows.SampleAll(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s.API(viewer, http.MethodGet, "/api/shadows/"+sh.ID, nil).Must(t, http.StatusOK).JSON(t, &sh)
		if sh.Scored == 50 && sh.Open == 0 {
			break
		}
		if time.Now().After(deadline) || sh.Failed > 0 || sh.Skipped > 0 {
			t.Fatalf("shadow %+v", sh)
		}
	}
	// Sampling and running again ask nobody anything more.
	if err := s.App.Services.Shadows.SampleAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.App.Services.Shadows.Run(ctx, uuid.MustParse(sh.ID)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if asked[candidate] != 50 || asked[prod.Model] != 0 {
		t.Errorf("the vLLM stand-in was asked %v: want 50 calls of the candidate %s and none of production", asked, candidate)
	}
	mu.Unlock()

	c := sh.Comparison
	if c.Difference.N != 50 || c.Difference.Mean == nil || math.Abs(*c.Difference.Mean-0.23) > 1e-9 || len(c.Difference.CI) != 2 ||
		c.Difference.CI[0] > 0.23 || c.Difference.CI[1] < 0.23 || c.Improvements != 40 || c.Regressions != 0 || c.Total != 50 {
		t.Errorf("paired result %+v", c.Difference)
	}
	if math.Abs(*c.A.MeanReward-0.67) > 1e-9 || math.Abs(*c.B.MeanReward-0.9) > 1e-9 {
		t.Errorf("means: production %v, candidate %v; want 0.67 and 0.9", *c.A.MeanReward, *c.B.MeanReward)
	}
	if first := c.Items[0]; first.Difference == nil || math.Abs(*first.Difference+0.05) > 1e-9 || first.A.Answer != "A great answer." ||
		!strings.HasPrefix(first.B.Answer, "A careful answer to: Question") {
		t.Errorf("first item %+v", first)
	}
	var list struct {
		Data []shadowDoc `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/shadows?candidate_version_id="+v2.ID, nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != sh.ID {
		t.Errorf("the candidate's shadows %+v", list.Data)
	}

	// The shadow's page and the candidate's page.
	body := page.Get("/shadows/"+sh.ID).Must(t, http.StatusOK).Body
	for _, want := range []string{"+0.230", "50 paired items", "A great answer.", "A careful answer to: Question", "Stop the shadow"} {
		if !strings.Contains(body, want) {
			t.Errorf("the shadow's page lacks %q", want)
		}
	}
	body = page.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body
	if !strings.Contains(body, "shadowed on 50 queries") || !strings.Contains(body, "+0.230") || !strings.Contains(body, "95% interval") {
		t.Errorf("the candidate's page says nothing of its shadow")
	}
	if !strings.Contains(page.Get("/shadows").Must(t, http.StatusOK).Body, "support "+v2.Version) {
		t.Errorf("the list of shadows lacks the candidate")
	}

	// In a browser: the paired result on the shadow's page, the item that
	// fell most first, and the page fits its cards.
	b := webtest.Browser(t)
	if err := chromedp.Do(b,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ad@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/shadows/"+sh.ID),
		chromedp.WaitVisible(`#compare-items li`),
	); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// The top of the page: the settings, the paired result and the first
	// items (the whole page holds all 50).
	if dir := os.Getenv("CURATE_SCREENSHOTS"); dir != "" {
		buf, err := chromedp.Run(b, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "after-shadow.png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := text(t, b, `#compare-difference`); got != "+0.230" {
		t.Errorf("the page's B − A reads %q", got)
	}
	if got := text(t, b, `#compare-items li .compare-query`); !strings.HasPrefix(got, "Question ") {
		t.Errorf("the first item reads %q", got)
	}
	fit, err := chromedp.Run(b, chromedp.Evaluate[cardFit](fitsCards))
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Wider) > 0 || len(fit.Overflow) > 0 {
		t.Errorf("the shadow page does not fit its cards at 1280 px: %q %q", fit.Wider, fit.Overflow)
	}

	// Best-of-N calls that sample production's version are queries
	// answered under the alias too: each is mirrored once, its selected
	// answer production's (0.6 against the candidate's 0.9), and feedback
	// on a call is left to the call. 40·0.3 − 10·0.05 + 10·0.3 over 60
	// queries is 14.5/60.
	var called []string
	for i := range 10 {
		var r struct {
			ResponseID string `json:"response_id"`
		}
		s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": fmt.Sprintf("Call %d about billing?", i),
			"model_version_id": v1.ID, "n": 2, "scorer": map[string]any{"judge": "deepseek"}}).Must(t, http.StatusOK).JSON(t, &r)
		called = append(called, r.ResponseID)
	}
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "Call 0 about billing?", "response": "A plain answer.",
		"model": prod.Model, "trace_id": called[0], "feedback_type": "thumbs_down"}).Must(t, http.StatusCreated)
	if err := s.App.Services.Shadows.SampleAll(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s.API(viewer, http.MethodGet, "/api/shadows/"+sh.ID, nil).Must(t, http.StatusOK).JSON(t, &sh)
		if sh.Open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shadow %+v", sh)
		}
	}
	if d := sh.Comparison.Difference; sh.Scored != 60 || d.N != 60 || math.Abs(*d.Mean-14.5/60) > 1e-9 {
		t.Errorf("with the best-of-N calls: %d scored, difference %+v; want 60 and %.4f", sh.Scored, d, 14.5/60)
	}
	mu.Lock()
	if asked[candidate] != 60 || asked[prod.Model] != 20 {
		t.Errorf("the vLLM stand-in was asked %v: want 60 calls of the candidate and production's 20 by the best-of-N calls alone", asked)
	}
	mu.Unlock()

	// Nothing of the candidate reaches resolve or assignment.
	s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &prod)
	if prod.Version != v1.Version || prod.Model == candidate {
		t.Errorf("production resolves to %+v after the shadow", prod)
	}
	for i := range 50 {
		var a assignmentDoc
		s.API(assistant, http.MethodPost, "/api/experiments/support-ab/assign", map[string]any{"unit_id": fmt.Sprintf("u-%d", i)}).
			Must(t, http.StatusOK).JSON(t, &a)
		if a.Version == v2.Version || a.Model == candidate {
			t.Fatalf("unit u-%d was assigned the shadowed candidate: %+v", i, a)
		}
	}

	// Stopping.
	s.API(viewer, http.MethodPost, "/api/shadows/"+sh.ID+"/stop", nil).Must(t, http.StatusForbidden)
	s.API(admin, http.MethodPost, "/api/shadows/"+sh.ID+"/stop", map[string]any{"reason": "Enough evidence."}).Must(t, http.StatusOK).JSON(t, &sh)
	if sh.Status != "stopped" {
		t.Errorf("stopped %+v", sh)
	}
	s.API(admin, http.MethodPost, "/api/shadows/"+sh.ID+"/stop", nil).Must(t, http.StatusConflict)
}
