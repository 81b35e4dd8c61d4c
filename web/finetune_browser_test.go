package web_test

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/web/webtest"
)

// In a real browser an admin launches an OpenAI DPO job (at the fake),
// sees the estimate as they type, and watches the job page: the progress
// bar and the loss move while it runs, and it ends with its model id. Then,
// with the month's budget spent, the next launch is refused beside the
// form.
func TestBrowserFineTuneDPO(t *testing.T) {
	s, fake, src := fineTuneServer(t, 400*time.Millisecond)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	form := "/fine-tuning/new?" + url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "method": {"dpo"}}.Encode()

	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Click(`nav.tabs a[href="/fine-tuning"]`),
		chromedp.WaitVisible(`#launch-link`),
		chromedp.Navigate(s.URL+form),
		chromedp.WaitVisible(`#ft-form`),
		chromedp.SetValue(`input[name=base_model]`, ftMini),
		chromedp.SendKeys(`input[name="hyperparameters.beta"]`, "0.1"),
		// 4 pairs × 18 tokens × 25 auto epochs at $3 per million.
		chromedp.Poll[chromedp.Void](`document.querySelector('#est-cost')?.textContent.trim() === '$0.0054'`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil {
		t.Fatalf("estimate: %v", err)
	}
	// A bad number is flagged under its field while typing.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(`input[name="hyperparameters.epochs"]`, "99"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#err-hyperparameters-epochs').textContent.includes('from 1 to 50')`, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector('input[name="hyperparameters.epochs"]'); e.value = ''; e.dispatchEvent(new Event("input", {bubbles: true})); })()`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#err-hyperparameters-epochs').textContent === '' && document.querySelector('#est-cost')`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil {
		t.Fatalf("inline validation: %v", err)
	}
	webtest.Screenshot(t, ctx, "finetune-launch")

	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Click(`#ft-launch`), chromedp.WaitVisible(`#ft-live`)); err != nil {
		t.Fatalf("launch: %v", err)
	}
	var statuses, losses []string
	var progress []int
	for time.Since(start) < 90*time.Second {
		// The badge's data-status is the stored status; its text is the label.
		st := eval[string](t, ctx, `document.querySelector('#ft-status')?.dataset.status || ''`)
		if st != "" && !slices.Contains(statuses, st) {
			statuses = append(statuses, st)
		}
		val := eval[string](t, ctx, `document.querySelector('#ft-progress').getAttribute('value') || ''`)
		if n, err := strconv.Atoi(val); err == nil && !slices.Contains(progress, n) {
			progress = append(progress, n)
		}
		if l := eval[string](t, ctx, `document.querySelector('#ft-loss')?.textContent || ''`); l != "" && !slices.Contains(losses, l) {
			losses = append(losses, l)
		}
		if st == "succeeded" || st == "failed" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("a full run at the fake took %s in the browser; statuses %v, progress %v, losses %v", time.Since(start).Round(100*time.Millisecond), statuses, progress, losses)
	if statuses[len(statuses)-1] != "succeeded" {
		t.Fatalf("the job ended %v", statuses)
	}
	if !slices.Contains(statuses, "running") || !slices.ContainsFunc(progress, func(n int) bool { return n > 0 && n < 100 }) {
		t.Errorf("no progress seen while running: statuses %v, progress %v", statuses, progress)
	}
	if len(losses) < 2 {
		t.Errorf("the loss did not move: %v", losses)
	}
	model := text(t, ctx, `#ft-model`)
	if !strings.HasPrefix(model, "ft:"+ftMini) {
		t.Errorf("model id %q", model)
	}
	// The loss chart is drawn by uPlot from the 4 steps' data: training
	// loss at each, validation loss at steps 2 and 4, both in the legend.
	waitFor(t, ctx, `document.querySelector('.chart[data-chart="ft-loss"] canvas') !== null`)
	if got := eval[string](t, ctx, `(() => { const d = JSON.parse(document.querySelector('#ft-chart').getAttribute('data-loss')); return JSON.stringify([d.step, d.train, d.valid]); })()`); got != `[[1,2,3,4],[1.5,1.25,0.75,0.5],[null,1.375,null,0.625]]` {
		t.Errorf("loss chart data %s", got)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll('#ft-chart .u-legend .u-label')].map(e => e.textContent).join(',')`); got != "Step,Training loss,Validation loss" {
		t.Errorf("chart legend %q", got)
	}
	// The next step: the model id, with a button that copies it.
	if got := eval[string](t, ctx, `document.querySelector('#ft-copy')?.getAttribute('data-copy') || ''`); got != "#ft-model" {
		t.Errorf("copy button copies %q, want #ft-model", got)
	}
	// Billed: 4 pairs × 18 tokens × the fake's 2 epochs, where "auto" was
	// estimated at 25, and the page says so.
	if got := text(t, ctx, `#ft-trained`); got != "144" {
		t.Errorf("trained tokens shown %q, want 144", got)
	}
	if got := text(t, ctx, `#ft-gap`); !strings.Contains(got, "ran 2 epochs where the estimate assumed 25") {
		t.Errorf("gap explained as %q", got)
	}
	if fake.JobsCreated() != 1 {
		t.Errorf("%d jobs at the provider", fake.JobsCreated())
	}
	webtest.Screenshot(t, ctx, "finetune-job")

	// $0.000432 was spent; a $0.001 budget leaves $0.000568, short of
	// the $0.0054 this launch would cost.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/fine-tuning/settings"),
		chromedp.WaitVisible(`#ft-budget`),
		chromedp.SetValue(`input[name=monthly_budget]`, "0.001"),
		chromedp.Submit(`input[name=monthly_budget]`),
		chromedp.WaitVisible(`.flash-ok`),
		chromedp.Navigate(s.URL+form),
		chromedp.WaitVisible(`#ft-form`),
		chromedp.SetValue(`input[name=base_model]`, ftMini),
		chromedp.WaitVisible(`#est-over`),
		chromedp.Click(`#ft-launch`),
	)
	if err != nil {
		t.Fatalf("over budget: %v", err)
	}
	waitFor(t, ctx, `document.querySelector('#err-budget')?.textContent.includes('exceeds the $0.0006 left')`)
	// The refused form keeps its estimate: the cost, not $0.00 of $0.00.
	if got := text(t, ctx, `#est-cost`); got != "$0.0054" {
		t.Errorf("estimate after the refusal shows %q, want $0.0054", got)
	}
	webtest.Screenshot(t, ctx, "finetune-over-budget")
	if fake.JobsCreated() != 1 {
		t.Errorf("the refused launch reached the provider")
	}
}

// In a real browser an admin launches a local DPO job (the fake trainer,
// one step every 2 seconds): the form shows the device and the local
// settings, the estimate says there is no charge, and the job page shows
// progress and loss while it runs and the adapter directory at the end.
func TestBrowserLocalFineTune(t *testing.T) {
	s, src := localServer(t, 100*time.Millisecond, "FAKE_TRAINER_DELAY=2s")
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	model := localModel(t, s)
	form := "/fine-tuning/new?" + url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"local"}, "method": {"dpo"}}.Encode()

	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+form),
		chromedp.WaitVisible(`#ft-device`),
		chromedp.SendKeys(`input[name=base_model]`, model),
		chromedp.SendKeys(`input[name="local.lora_r"]`, "999"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#err-local-lora-r').textContent.includes('from 1 to 256')`, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.SetValue(`input[name="local.lora_r"]`, "16"),
		chromedp.SendKeys(`input[name="hyperparameters.beta"]`, "0.1"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#est-cost')?.textContent.trim() === 'local: no charge' && document.querySelector('#err-local-lora-r').textContent === ''`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil {
		t.Fatalf("launch form: %v", err)
	}
	webtest.Screenshot(t, ctx, "finetune-local-launch")

	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Click(`#ft-launch`), chromedp.WaitVisible(`#ft-live`)); err != nil {
		t.Fatalf("launch: %v", err)
	}
	var statuses, losses []string
	var progress []int
	for time.Since(start) < 90*time.Second {
		// Read with optional chaining: the live section is swapped every 2s.
		st := eval[string](t, ctx, `document.querySelector('#ft-status')?.dataset.status || ''`)
		if st != "" && !slices.Contains(statuses, st) {
			statuses = append(statuses, st)
		}
		val := eval[string](t, ctx, `document.querySelector('#ft-progress')?.getAttribute('value') || ''`)
		if n, err := strconv.Atoi(val); err == nil && !slices.Contains(progress, n) {
			progress = append(progress, n)
		}
		if l := eval[string](t, ctx, `document.querySelector('#ft-loss')?.textContent || ''`); l != "" && !slices.Contains(losses, l) {
			losses = append(losses, l)
		}
		if st == "succeeded" || st == "failed" || st == "cancelled" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("statuses %v, progress %v, losses %v in %s", statuses, progress, losses, time.Since(start).Round(100*time.Millisecond))
	if statuses[len(statuses)-1] != "succeeded" {
		t.Fatalf("the job ended %v", statuses)
	}
	if !slices.Contains(statuses, "running") || !slices.ContainsFunc(progress, func(n int) bool { return n > 0 && n < 100 }) {
		t.Errorf("no progress seen while running: statuses %v, progress %v", statuses, progress)
	}
	// The fake's losses are 2, 1.5 and 1.25; at least two are seen live.
	if len(losses) < 2 || losses[len(losses)-1] != "1.25" {
		t.Errorf("losses seen %v, want at least two ending in 1.25", losses)
	}
	if model := text(t, ctx, `#ft-model`); !strings.HasSuffix(model, "/final") || !strings.Contains(model, "/runs/train_") {
		t.Errorf("model %q, want the run's final/ directory", model)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll('.ft-local-setting')].map(e => e.textContent).join(',')`); got != "16" {
		t.Errorf("local settings shown %q, want the LoRA rank 16", got)
	}
	// The learning rate and the gradient norm are drawn beside the loss,
	// on whole steps.
	waitFor(t, ctx, `document.querySelector('.chart[data-chart="ft-lr"] canvas') !== null && document.querySelector('.chart[data-chart="ft-grad-norm"] canvas') !== null`)
	for id, want := range map[string]string{"#ft-lr-chart": "Step,Learning rate", "#ft-grad-norm-chart": "Step,Gradient norm"} {
		if got := eval[string](t, ctx, `[...document.querySelectorAll('`+id+` .u-legend .u-label')].map(e => e.textContent).join(',')`); got != want {
			t.Errorf("%s legend %q, want %q", id, got, want)
		}
	}
	webtest.Screenshot(t, ctx, "finetune-local-job")
}
