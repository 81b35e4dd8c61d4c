package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// The A/B panel in the browser: status, traffic, units per arm, the
// metrics table with live numbers, the recommendation and the effect
// chart; Full Deploy (confirmed) runs the registry's deploy, and the
// version page then shows the treatment in production.
func TestBrowserABPanel(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	for _, d := range []struct{ id, alias string }{{v1.ID, "production"}, {v2.ID, "staging"}} {
		var dep map[string]any
		s.API(admin, http.MethodPost, "/api/models/"+d.id+"/deploy", map[string]any{"alias": d.alias, "target": "gpu-1", "reason": "r"}).
			Must(t, http.StatusAccepted).JSON(t, &dep)
		for deadline := time.Now().Add(30 * time.Second); dep["status"] != "succeeded"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) || dep["status"] == "failed" {
				t.Fatalf("deployment %v", dep)
			}
			s.API(admin, http.MethodGet, "/api/deployments/"+dep["id"].(string), nil).Must(t, http.StatusOK).JSON(t, &dep)
		}
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-v3", "name": "Support model v2 vs v3",
		"control_model_id": v1.ID, "treatment_model_id": v2.ID, "traffic_split": 0.5, "metrics": []string{"thumbs_up_rate", "avg_rating"}}).
		Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/support-v3/start", nil).Must(t, http.StatusOK)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("u-%d", i)
	}
	var out struct {
		Data []assignmentDoc `json:"data"`
	}
	s.API(assistant, http.MethodPost, "/api/experiments/support-v3/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
	var items []map[string]any
	ups, ns := [2]float64{}, [2]float64{}
	for i, a := range out.Data {
		up := 5
		if a.ArmIndex == 1 {
			up = 8
		}
		kind := "thumbs_down"
		ns[a.ArmIndex]++
		if i%10 < up {
			kind = "thumbs_up"
			ups[a.ArmIndex]++
		}
		items = append(items, map[string]any{"query": "q", "response": a.UnitID, "feedback_type": kind, "user_id": a.UnitID, "experiment": "support-v3"})
	}
	control, treatment := ups[0]/ns[0], ups[1]/ns[1]
	s.API(assistant, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)

	b := webtest.Browser(t)
	dialogs := webtest.AcceptDialogs(t, b)
	err := chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/models"),
		chromedp.Click(`#experiments-link`),
		chromedp.Click(`#experiments a[href="/experiments/support-v3"]`),
		chromedp.WaitVisible(`#metrics`),
		chromedp.WaitVisible(`.chart[data-chart=ab-effect] canvas`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b, "ab-panel")
	if got := text(t, b, `#experiment-status`); got != "Running" {
		t.Errorf("status %q", got)
	}
	if got := text(t, b, `#traffic`); !strings.HasPrefix(got, "50% to the treatment") {
		t.Errorf("traffic %q", got)
	}
	row := text(t, b, `#metrics tr[data-metric=thumbs_up_rate]`)
	for _, want := range []string{"Thumbs-up rate", fmt.Sprintf("%.3f (n %.0f)", control, ns[0]), fmt.Sprintf("%.3f (n %.0f)", treatment, ns[1]),
		fmt.Sprintf("%+.1f%%", 100*(treatment/control-1)), "Significantly better"} {
		if !strings.Contains(row, want) {
			t.Errorf("the thumbs-up row %q lacks %q", row, want)
		}
	}
	if got := text(t, b, `#recommendation h2`); got != "Recommendation: Deploy the treatment" {
		t.Errorf("recommendation %q", got)
	}
	if got := text(t, b, `#srm`); !strings.Contains(got, "Sound") {
		t.Errorf("sample ratio %q", got)
	}
	err = chromedp.Do(b,
		chromedp.Click(`#full-deploy`),
		chromedp.WaitVisible(`#deployments [data-status=succeeded]`),
	)
	if err != nil {
		t.Fatalf("full deploy: %v", err)
	}
	if dialogs.Load() != 1 {
		t.Errorf("%d confirmations, want 1", dialogs.Load())
	}
	if got := text(t, b, `h1`); !strings.Contains(got, "1.1.0") {
		t.Errorf("after the full deploy the page shows %q", got)
	}
	var r struct {
		Version string `json:"version"`
	}
	// The page lists the staging deployment, already succeeded: wait for
	// the production one.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.API(admin, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &r)
		if r.Version == "1.1.0" || time.Now().After(deadline) {
			break
		}
	}
	if r.Version != "1.1.0" {
		t.Errorf("production resolves to %q", r.Version)
	}
}
