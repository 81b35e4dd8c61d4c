package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// A reward model in the browser: an admin adds a vLLM server running it
// with the pooling runner, registers the model by hand as a reward model,
// reads its kind in words on its page, is offered only the pooling target
// to deploy it to, and deploys it; the page says how to score with it in
// place of the promotion gate.
func TestBrowserRewardModel(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	seeded, err := s.App.Demo.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rm := vllmtest.NewPooling(t, "support-rm", "/runs/7f3a/final", func([]vllmtest.Message) float64 { return 0 })
	gen := vllmtest.New(t, "tiny-llama")

	b := webtest.Browser(t)
	webtest.AcceptDialogs(t, b)
	addTarget := func(name, kind, url string) {
		t.Helper()
		err := chromedp.Do(b,
			chromedp.Navigate(s.URL+"/models/targets"),
			chromedp.WaitVisible(`#target-form`),
			chromedp.SendKeys(`#target-form input[name=name]`, name),
			chromedp.Click(`#target-form input[name=kind][value=`+kind+`]`),
			chromedp.SendKeys(`#target-form input[name=base_url]`, url),
			chromedp.Click(`#target-form button[type=submit]`),
			chromedp.WaitVisible(`#targets tr[data-target=`+name+`]`),
		)
		if err != nil {
			t.Fatalf("adding %s: %v", name, err)
		}
	}
	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, seeded.Email),
		chromedp.SendKeys(`input[name=password]`, seeded.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
	)
	if err != nil {
		t.Fatal(err)
	}
	addTarget("rm-1", "vllm_pooling", rm.URL)
	addTarget("gpu-1", "vllm", gen.URL)
	if got := text(t, b, `#targets tr[data-target=rm-1]`); !strings.Contains(got, "vLLM pooling runner") {
		t.Errorf("the pooling target reads %q", got)
	}

	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/models"),
		chromedp.WaitVisible(`#register-form`),
		chromedp.SendKeys(`#register-form input[name=name]`, "support-rm"),
		chromedp.SendKeys(`#register-form input[name=model_id]`, "/runs/7f3a/final"),
		chromedp.Click(`#register-form input[name=kind][value=reward]`),
		chromedp.Click(`#register-form button[type=submit]`),
		chromedp.WaitVisible(`#deploy-form`),
	)
	if err != nil {
		t.Fatalf("registering: %v", err)
	}
	if got := text(t, b, `.item-grid .dl`); !strings.Contains(got, "Reward model") {
		t.Errorf("the version's kind reads %q", got)
	}
	options, err := chromedp.Run(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#deploy-form select[name=target] option')].map(o => o.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(options) != 1 || options[0] != "rm-1 (vLLM pooling runner)" {
		t.Errorf("deploy targets offered %q", options)
	}
	if got := text(t, b, `#targets-left-out`); !strings.Contains(got, "pooling runner") {
		t.Errorf("the hint on targets left out reads %q", got)
	}
	if got := text(t, b, `#scorer-best-of-n`); !strings.Contains(got, `"reward_model_version_id"`) {
		t.Errorf("how to score with it: %q", got)
	}
	err = chromedp.Do(b,
		chromedp.SendKeys(`#deploy-form textarea[name=reason]`, "scores best-of-N"),
		chromedp.Click(`#deploy-form button[type=submit]`),
		chromedp.WaitVisible(`#deployments [data-status=succeeded]`),
	)
	if err != nil {
		t.Fatalf("deploying: %v", err)
	}
	webtest.Screenshot(t, b, "reward-model-version")
}
