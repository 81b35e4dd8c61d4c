package web_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/web/webtest"
)

// edgeSite is the evaluation fixture (a gated golden set, versions of
// "support", a vLLM target) with what the rough edges of the pages need:
// a second frozen dataset, listed before the gate's, the organisation's
// only judge endpoint, five open alerts, an experiment a loop's run made,
// a fine-tuning job with its loss at three steps, and a viewer.
type edgeSite struct {
	evalFixture
	experiment string // the key of the experiment the loop made
	job        string // the fine-tuning job's id
	viewer     string // the viewer's email
	admin      string // an admin's email, with webtest's password
}

func newEdgeSite(t *testing.T) edgeSite {
	t.Helper()
	fake := openaitest.New(t)
	f := newEvalFixture(t, webtest.Options{Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTunePoll, c.FineTuneBudgetUSD = "sk-test", fake.URL(), time.Hour, 100
	}})
	ctx := context.Background()
	svc, org := f.s.App.Services, f.seeded.OrgID
	// A newer frozen dataset: the form's list names it first.
	d, err := svc.Datasets.Create(ctx, audit.System, org, datasets.NewDataset{Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{Name: "Tandem extra"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Datasets.AddByFilter(ctx, audit.System, org, d.ID, url.Values{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Datasets.Freeze(ctx, audit.System, org, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Endpoints.Create(ctx, audit.System, org, endpoints.NewEndpoint{Name: "judge", BaseURL: "http://127.0.0.1:9/v1", Model: "judge"}); err != nil {
		t.Fatal(err)
	}
	// Whatever the demo's feedback opened gives way to these five.
	if _, err := f.s.Pool.Exec(ctx, `DELETE FROM alerts WHERE org_id = $1`, org); err != nil {
		t.Fatal(err)
	}
	for i, a := range []struct{ kind, severity, key, title, message string }{
		{"low_rating", "bad", "low_rating:a", "Low ratings for support 1.1.0", "average 2.10 over 40 ratings in the last 24 hours, below 3.50."},
		{"low_rating", "warn", "low_rating:b", "Low ratings for support 1.2.0", "average 3.10 over 22 ratings in the last 24 hours, below 3.50."},
		{"low_rating", "warn", "low_rating:c", "Low ratings for support-full 1.0.0", "average 3.30 over 12 ratings in the last 24 hours, below 3.50."},
		{"thumbs_down_spike", "warn", "thumbs_down_spike", "Thumbs-down spike", "31 thumbs-down in the last 24 hours against 9.0 expected from the previous 7 days."},
		{"safety", "bad", "safety", "Safety reports", "4 safety reports in the last 24 hours await review."},
	} {
		if _, err := f.s.Pool.Exec(ctx, `INSERT INTO alerts (org_id, kind, severity, dedup_key, title, message, opened_at)
			VALUES ($1, $2, $3, $4, $5, $6, now() - make_interval(mins => $7))`, org, a.kind, a.severity, a.key, a.title, a.message, i); err != nil {
			t.Fatal(err)
		}
	}
	// An experiment between the two versions of support, made by the
	// rollout step of a loop's (stopped) run.
	key := "support-trial"
	if _, err := svc.Experiments.Create(ctx, audit.System, org, experiments.NewExperiment{Key: key, Name: "Support 1.1.0 against 1.2.0",
		ControlModelID: f.version.ID, TreatmentModelID: f.fresh.ID, Metrics: []string{"thumbs_up_rate", "avg_rating"}}); err != nil {
		t.Fatal(err)
	}
	loop, err := svc.Loops.Create(ctx, audit.System, org, loops.Spec{Name: "support-weekly", RegisteredModel: "support",
		Trigger:    loops.Trigger{Filter: loops.Filter{"status": "approved"}},
		Dataset:    loops.DatasetSpec{Name: "Support training", Generate: loops.Recipe{Methods: []pairs.Generation{{Method: "same_query"}}}},
		Training:   loops.Training{Provider: "openai", Method: "dpo", BaseModel: "gpt-4o-mini-2024-07-18", MaxCostUSD: 20},
		Evaluation: loops.Evaluation{GoldenSetVersionID: f.goldenSet, RewardFormula: []byte(`{"reference_f1": 1}`)},
		Deploy:     loops.Deploy{Target: "provider"}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.Loops.StartNow(ctx, audit.System, org, loop.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Loops.Stop(ctx, audit.System, org, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Pool.Exec(ctx, `UPDATE loop_run_steps SET links = jsonb_build_object('experiment_key', $2::text)
		WHERE run_id = $1 AND position = (SELECT max(position) FROM loop_run_steps WHERE run_id = $1)`, run.ID, key); err != nil {
		t.Fatal(err)
	}
	// A fine-tuning job with its loss at steps 1 to 3.
	var job string
	if err := f.s.Pool.QueryRow(ctx, `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind, provider, base_model, method,
		export_format, train_examples, estimated_tokens, estimated_epochs, price_per_million, price_date, estimated_cost, suffix)
		VALUES ($1, $2, 'Support gold v1', 'preference', 'openai', 'gpt-4o-mini', 'dpo', 'openai_preference', 3, 100, 1, 1, '2026-01-01', 1, 'support')
		RETURNING id::text`, org, f.goldenSet).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Pool.Exec(ctx, `INSERT INTO fine_tuning_metrics (job_id, org_id, step, train_loss, valid_loss)
		VALUES ($1, $2, 1, 0.9, 0.95), ($1, $2, 2, 0.7, 0.8), ($1, $2, 3, 0.6, 0.7)`, job, org); err != nil {
		t.Fatal(err)
	}
	f.s.User(org, "vi@demo.test", "viewer")
	f.s.User(org, "ad@demo.test", "admin")
	return edgeSite{evalFixture: f, experiment: key, job: job, viewer: "vi@demo.test", admin: "ad@demo.test"}
}

// shot saves what the window shows (not the whole page) as a PNG named
// name when CURATE_SCREENSHOTS names a folder: where a refusal lands is
// what the window shows.
func shot(t *testing.T, b context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CURATE_SCREENSHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(b, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Log(err)
	}
}

// inView says where the first refusal of the page stands: whether it is
// inside the window, and which field has the focus.
const inView = `(() => {
	const err = [...document.querySelectorAll('form .field-error, form .form-error')].find(e => e.textContent.trim() !== '' && e.checkVisibility());
	if (!err) return {Found: false};
	const r = err.getBoundingClientRect();
	const a = document.activeElement;
	return {Found: true, Text: err.textContent.trim(), InView: r.top >= 0 && r.bottom <= window.innerHeight,
		Focused: a && a !== document.body ? a.tagName.toLowerCase() + '[name=' + (a.getAttribute('name') || '') + ']' : ''};
})()`

type refusalPlace struct {
	Found, InView bool
	Text, Focused string
}

// The rough edges a browser shows, each with its screenshot: the
// evaluation form opened from a version's page, the alert banners, form
// refusals in view and at addresses that open again, no template source
// on a loop's artefact, the loss chart's whole steps, the fine-tune form's
// help by method, and a viewer's new-pair page.
func TestBrowserRoughEdges(t *testing.T) {
	f := newEdgeSite(t)
	b := f.signIn(t)
	do := func(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b, actions...); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("1-evaluate-from-version", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/models/versions/"+f.fresh.ID.String()), chromedp.WaitVisible(`#gate-next`),
			chromedp.Click(`#evaluate-version`), chromedp.WaitVisible(`#evaluation-form`))
		set := eval[string](t, b, `document.querySelector('#evaluation-form select[name=golden_set_version_id]').value`)
		judge := eval[string](t, b, `document.querySelector('#evaluation-form select[name=judge_endpoint]').value`)
		ticked := eval[bool](t, b, `document.querySelector('#evaluation-form input[name=scorers][value=judge]').checked`)
		shot(t, b, "edge-1")
		if set != f.goldenSet.String() {
			t.Errorf("the form opens on golden set %s, want the gate's %s", set, f.goldenSet)
		}
		if ticked && judge != "judge" {
			t.Errorf("the judge scorer is ticked and the judge is %q, want the organisation's only one", judge)
		}
	})

	t.Run("2-alert-banners", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/"), chromedp.WaitVisible(`#main`))
		type banners struct {
			N      int
			Height float64
			Text   string
		}
		got := eval[banners](t, b, `(() => {
			const bs = [...document.querySelectorAll('#main > .banner')];
			const h = bs.length ? bs[bs.length - 1].getBoundingClientRect().bottom - bs[0].getBoundingClientRect().top : 0;
			return {N: bs.length, Height: h, Text: bs.map(b => b.innerText).join(' | ')};
		})()`)
		shot(t, b, "edge-2")
		t.Logf("%d alerts: %d banners, %.0f px", 5, got.N, got.Height)
		if got.N != 1 || got.Height > 48 {
			t.Errorf("five alerts take %d banners and %.0f px, want one summary of at most 48 px: %s", got.N, got.Height, got.Text)
		}
		if !strings.Contains(got.Text, "5 open alerts") {
			t.Errorf("the summary reads %q", got.Text)
		}
	})

	t.Run("3-experiment-refusal-in-view", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/experiments/new?treatment="+f.fresh.ID.String()), chromedp.WaitVisible(`#experiment-form`),
			chromedp.WaitReady(`body`), chromedp.Sleep(300*time.Millisecond),
			// The same version on both arms: refused at the top of the form.
			chromedp.SetValue(`#experiment-form select[name=control]`, f.fresh.ID.String()),
			chromedp.Click(`#experiment-form button[type=submit]`))
		waitFor(t, b, `!!document.querySelector('#experiment-form .field-error')`)
		time.Sleep(300 * time.Millisecond)
		got := eval[refusalPlace](t, b, inView)
		shot(t, b, "edge-3-experiment")
		if !got.Found || !got.InView || !strings.HasPrefix(got.Focused, "select") && !strings.HasPrefix(got.Focused, "input") {
			t.Errorf("the experiment form's refusal: %+v, want it in the window with its field focused", got)
		}
	})

	t.Run("3-evaluation-refusal-address", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/evaluations?candidate_version_id="+f.fresh.ID.String()+"#start-evaluation"),
			chromedp.WaitVisible(`#evaluation-form`), chromedp.Click(`#evaluation-form button.primary`))
		waitFor(t, b, `[...document.querySelectorAll('#evaluation-form .field-error')].some(e => e.textContent.trim() !== '')`)
		time.Sleep(300 * time.Millisecond)
		loc := eval[string](t, b, `location.pathname`)
		got := eval[refusalPlace](t, b, inView)
		shot(t, b, "edge-3-evaluation")
		if loc != "/evaluations" {
			t.Errorf("the evaluation's refusal is shown at %s, which answers no GET", loc)
		}
		if !got.InView {
			t.Errorf("the evaluation's refusal: %+v, want it in the window", got)
		}
	})

	t.Run("4-no-template-source", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/experiments/"+f.experiment), chromedp.WaitVisible(`#loop-origin-run`),
			chromedp.ScrollIntoView(`#loop-origin-run`))
		body := eval[string](t, b, `document.body.innerText`)
		shot(t, b, "edge-4")
		if strings.Contains(body, "@StatusBadge") {
			t.Errorf("the loop's artefact shows template source: %s", regexpFind(t, `(Made by the loop[^\n]*)`, body))
		}
	})

	t.Run("9-loss-steps-and-method-help", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/fine-tuning/jobs/"+f.job), chromedp.WaitVisible(`#ft-chart canvas`))
		ticks := eval[[]string](t, b, `(() => { const u = document.getElementById('ft-chart').uplot; return u ? u.axes[0]._values.map(String) : ['no chart']; })()`)
		for _, tick := range ticks {
			if strings.ContainsAny(tick, ".,") || tick == "no chart" {
				t.Errorf("the loss chart's step axis reads %q", ticks)
				break
			}
		}
		do(t, chromedp.Navigate(f.s.URL+"/fine-tuning/new"), chromedp.WaitVisible(`#ft-form`))
		help := func(method string) bool {
			return eval[bool](t, b, `(() => { const s = document.querySelector('#ft-form select[name=method]'); s.value = '`+method+`';
				s.dispatchEvent(new Event('change', {bubbles: true})); return document.getElementById('ft-method-grpo').checkVisibility(); })()`)
		}
		if help("dpo") {
			t.Error("DPO chosen, the form shows GRPO's help")
		}
		if !help("grpo") {
			t.Error("GRPO chosen, the form hides its help")
		}
	})

	t.Run("8-viewer-new-pair", func(t *testing.T) {
		do(t, chromedp.Navigate(f.s.URL+"/"), chromedp.WaitVisible(`#logout`), chromedp.Click(`#logout`), chromedp.WaitVisible(`input[name=email]`),
			chromedp.SendKeys(`input[name=email]`, f.viewer), chromedp.SendKeys(`input[name=password]`, webtest.Password),
			chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`nav.tabs`),
			chromedp.Navigate(f.s.URL+"/pairs/new"), chromedp.WaitVisible(`#pair-form`))
		editable := eval[int](t, b, `[...document.querySelectorAll('#pair-form textarea, #pair-form input:not([type=hidden])')].filter(e => !e.matches(':disabled') && !e.readOnly).length`)
		note := eval[string](t, b, `document.getElementById('pair-read-only')?.innerText ?? ''`)
		shot(t, b, "edge-8")
		if editable != 0 || note == "" {
			t.Errorf("a viewer's new-pair page has %d editable fields and says %q", editable, note)
		}
	})
}
