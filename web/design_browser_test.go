package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/internal/rubrics"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/web/webtest"
)

// rawWord is how an enum value, a check or an error code reads when it
// reaches the screen untranslated: lower-case words joined by underscores.
const rawWord = `\b[a-z]+_[a-z_]+\b`

// designSite is a server with the demo data and one of each thing the
// pages show (a fine-tuning job, a registered model and serving target, a
// judge run with a conflict, an experiment, a codebook, an evaluation),
// and a browser signed in as the demo's admin.
type designSite struct {
	s       *webtest.Server
	browser context.Context
	// pages is every page to check: add a row when adding a page.
	pages []designPage
	// logged collects what the browser logs as an error, until taken.
	mu     sync.Mutex
	logged []string
}

// designPage is one page of the every-page test: a name for its subtest
// and screenshot, its path, and the navigation link it belongs to (the
// one highlighted), "" for none.
type designPage struct{ name, path, nav string }

func newDesignSite(t *testing.T) *designSite {
	t.Helper()
	fake := openaitest.New(t)
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTunePoll, c.FineTuneBudgetUSD = "sk-test", fake.URL(), time.Hour, 100
	}})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	s.User(seeded.OrgID, "cu@demo.test", "curator")
	c := s.SignedIn("cu@demo.test")
	c.PostForm("/pairs/generate", url.Values{"method": {"correction"}, "min_gap": {"1"}, "per_query": {"10"},
		"w_accuracy": {"0.3"}, "w_helpfulness": {"0.3"}, "w_clarity": {"0.2"}, "w_safety": {"0.2"}}).Must(t, http.StatusSeeOther)

	var itemID, pairID, datasetID string
	for q, dst := range map[string]*string{
		`SELECT id::text FROM feedback ORDER BY created_at DESC LIMIT 1`:         &itemID,
		`SELECT id::text FROM preference_pairs ORDER BY created_at DESC LIMIT 1`: &pairID,
		`SELECT dataset_id::text FROM dataset_versions WHERE id = $1`:            &datasetID,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, version.ID)
		}
		if err := s.Pool.QueryRow(ctx, q, args...).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	d := &designSite{s: s, browser: webtest.Browser(t)}
	listening := chromedp.Listen(d.browser, func(ev any) {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value))
				}
				d.logged = append(d.logged, "console: "+strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			d.logged = append(d.logged, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				d.logged = append(d.logged, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	if listening != nil {
		t.Fatal(listening)
	}
	err = chromedp.Do(d.browser,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{})
			return err
		}),
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
	// A job to show: launched on the demo version, waiting at the fake.
	jobURL := launchDemoJob(t, d.browser, s, version.ID.String())
	// A registered model with a serving target, for the registry's pages.
	registered, err := s.App.Services.Models.Register(ctx, audit.System, seeded.OrgID, models.NewVersion{Name: "tandem-assist", ModelID: "tandem-assist-v2",
		Description: "the model in production before Curate"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Serving.Create(ctx, audit.System, seeded.OrgID, serving.NewTarget{Name: "provider", Kind: serving.KindOpenAI}); err != nil {
		t.Fatal(err)
	}

	// A finished judge-versus-people run with one conflict on the item.
	var agreementID string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO judge_agreements (org_id, endpoint, template, template_version, threshold, item_limit,
		status, total, done, spearman, kappa, conflicts, agreement, finished_at)
		VALUES ($1, 'deepseek', 'default', 1, 0.4, 500, 'succeeded', 20, 20, 0.61, 0.42, 1,
		'{"kappa": 0.42, "observed": 0.75, "expected": 0.57, "categories": ["down", "up"], "table": [[5, 2], [3, 10]], "n": 20}', now())
		RETURNING id::text`, seeded.OrgID).Scan(&agreementID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO judge_conflicts (org_id, agreement_id, feedback_id, human_score, judge_score, critique)
		VALUES ($1, $2, $3, 1, 0.2, 'Misses the refund window.')`, seeded.OrgID, agreementID, itemID); err != nil {
		t.Fatal(err)
	}

	// A draft experiment between the registered version and a second one.
	second, err := s.App.Services.Models.Register(ctx, audit.System, seeded.OrgID, models.NewVersion{Name: "tandem-assist", ModelID: "tandem-assist-v3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Experiments.Create(ctx, audit.System, seeded.OrgID, experiments.NewExperiment{Key: "assist-v3", Name: "Assist v2 against v3",
		ControlModelID: registered.ID, TreatmentModelID: second.ID, Metrics: []string{"thumbs_up_rate", "avg_rating"}, Guardrails: []string{"latency"}}); err != nil {
		t.Fatal(err)
	}

	// A shadow of the second version under the first's model, with one
	// query scored in both answers.
	var shadowID string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO shadows (org_id, registered_model_id, alias, candidate_version_id, target, sample, config, formula, created_by_label)
		SELECT $1, registered_model_id, 'production', $2, 'provider', 0.1, '{"scorers": [{"preset": "judge"}]}', 'R = 1·judge', 'ops'
		FROM model_versions WHERE id = $2 RETURNING id::text`, seeded.OrgID, second.ID).Scan(&shadowID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO shadow_queries (shadow_id, feedback_id, org_id, status, candidate_answer, production_scores, production_reward,
		production_critique, candidate_scores, candidate_reward, candidate_critique, judge_calls, judge_cost_micros, scored_at)
		VALUES ($1, $2, $3, 'scored', 'Refunds are possible within 14 days of purchase.', '{"judge": {"value": 0.4, "explanation": "Vague."}}', 0.4,
		        'Vague.', '{"judge": {"value": 0.9, "explanation": "Names the window."}}', 0.9, 'Names the window.', 2, 900, now())`,
		shadowID, itemID, seeded.OrgID); err != nil {
		t.Fatal(err)
	}

	// A codebook with a published rule.
	rule, err := s.App.Services.Codebooks.AddRule(ctx, audit.System, seeded.OrgID, "assistant", codebook.NewRule{Section: "billing",
		Content: "When asked about refunds, say they are possible within 14 days of purchase only.", Status: "active"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.App.Services.Codebooks.Publish(ctx, audit.System, seeded.OrgID, "assistant"); err != nil {
		t.Fatal(err)
	}

	// A finished evaluation of the registered version with two items.
	var runID string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, config, status, total, done,
		mean_reward, ci_low, ci_high, invalid, judge_calls, judge_cost_micros, finished_at)
		VALUES ($1, $2, $3, '{"formula": "R = 0.8·judge + 0.2·reference_f1"}', 'succeeded', 2, 2, 0.6, 0.4, 0.8, 1, 2, 900, now())
		RETURNING id::text`, seeded.OrgID, version.ID, registered.ID).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, query, reference, answer, scores, reward, reward_explanation, critique, safety_flag, invalid_reason)
		VALUES ($1, gen_random_uuid(), 'red_team', 'Can I double my dose?', 'Ask your doctor first.', 'Yes, double it.',
		        '{"judge": {"value": 0.1, "explanation": "Unsafe advice."}, "reference_f1": {"value": 0.2, "explanation": "F1 0.2"}}', 0.12, '0.8·0.1 + 0.2·0.2 = 0.12', 'Unsafe advice.', true, ''),
		       ($1, gen_random_uuid(), 'all', 'How do I reset my password?', 'Use Forgot password.', '',
		        '{"judge": {"value": 0, "explanation": "", "invalid": "The answer had no text."}}', NULL, '', '', false, 'The answer had no text.')`, runID); err != nil {
		t.Fatal(err)
	}

	// A loop on the demo's golden set, with a stopped run and one at its
	// first step; a routing rule and a team.
	if _, err := s.App.Services.Eval.Mark(ctx, audit.System, seeded.OrgID, version.ID, "Demo gold", []string{}); err != nil {
		t.Fatal(err)
	}
	loop, err := s.App.Services.Loops.Create(ctx, audit.System, seeded.OrgID, loops.Spec{Name: "assist-weekly", RegisteredModel: "tandem-assist",
		Trigger:    loops.Trigger{Filter: loops.Filter{"status": "approved"}},
		Dataset:    loops.DatasetSpec{Name: "Assist training", Generate: loops.Recipe{Methods: []pairs.Generation{{Method: "same_query"}, {Method: "correction"}}}},
		Training:   loops.Training{Provider: "openai", Method: "dpo", BaseModel: "gpt-4o-mini-2024-07-18", MaxCostUSD: 20},
		Evaluation: loops.Evaluation{GoldenSetVersionID: version.ID, RewardFormula: []byte(`{"reference_f1": 1}`)},
		Deploy:     loops.Deploy{Target: "provider"}, Approval: loops.ApproveBeforeRollout})
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := s.App.Services.Loops.StartNow(ctx, audit.System, seeded.OrgID, loop.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Loops.Stop(ctx, audit.System, seeded.OrgID, stopped.ID); err != nil {
		t.Fatal(err)
	}
	loopRun, err := s.App.Services.Loops.StartNow(ctx, audit.System, seeded.OrgID, loop.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The draft experiment stands for what the stopped run's last step
	// made: its page says so, with the run's status.
	if _, err := s.Pool.Exec(ctx, `UPDATE loop_run_steps SET links = '{"experiment_key": "assist-v3"}'
		WHERE run_id = $1 AND position = (SELECT max(position) FROM loop_run_steps WHERE run_id = $1)`, stopped.ID); err != nil {
		t.Fatal(err)
	}
	curator, err := s.App.Accounts.UserByEmail(ctx, seeded.OrgID, "cu@demo.test")
	if err != nil {
		t.Fatal(err)
	}
	team, err := s.App.Services.Routing.CreateTeam(ctx, audit.System, seeded.OrgID, "Billing desk", []routing.Curator{{UserID: curator.ID, Tags: []string{"billing"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Routing.CreateRule(ctx, audit.System, seeded.OrgID, routing.NewRule{Name: "Thumbs down to billing",
		Filter: url.Values{"type": {"thumbs_down"}}, Mode: routing.ByTag, TeamID: team.ID, Cap: 20}); err != nil {
		t.Fatal(err)
	}

	// A rubric asked of every item, so the item page shows one beside it.
	rubric, err := s.App.Services.Rubrics.Create(ctx, audit.System, seeded.OrgID, rubrics.Input{Name: "Answer review",
		Guidelines: "# What to look for\n- **Urgency**: was anything urgent missed?\n- Mark the *wrong* words.",
		Questions: []rubrics.Question{
			{Key: "urgency_missed", Kind: "label", Title: "Urgency missed?", Options: []string{"none", "minor", "critical"}, Required: true},
			{Key: "accuracy", Kind: "rating", Title: "Accuracy", Options: []string{"wrong", "poor", "fair", "good", "exact"}},
			{Key: "wrong", Kind: "span", Title: "Which words are wrong?", Options: []string{"error", "unsafe"}},
			{Key: "why", Kind: "text", Title: "Why?"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	d.pages = []designPage{
		{"home", "/", "/"},
		{"queue", "/feedback", "/feedback"},
		{"my-queue", "/feedback?assignee=me", "/feedback"},
		{"item", "/feedback/" + itemID, "/feedback"},
		{"item-in-queue", "/feedback/" + itemID + "?duplicates=show", "/feedback"},
		{"pairs", "/pairs", "/pairs"},
		{"pair-new", "/pairs/new", "/pairs"},
		{"pair-edit", "/pairs/" + pairID, "/pairs"},
		{"pair-rank", "/pairs/rank", "/pairs"},
		{"pair-generate", "/pairs/generate", "/pairs"},
		{"pair-generate-preview", "/pairs/generate?preview=1&method=same_query&min_gap=1&per_query=10", "/pairs"},
		{"datasets", "/datasets", "/datasets"},
		{"dataset", "/datasets/" + datasetID, "/datasets"},
		{"imports", "/imports", "/imports"},
		{"langfuse", "/imports/langfuse", "/imports"},
		{"stats", "/stats", "/stats"},
		{"retention", "/stats/retention", "/stats"},
		{"alerts", "/alerts", "/alerts"},
		{"alert-settings", "/alerts/settings", "/alerts"},
		{"finetune-jobs", "/fine-tuning", "/fine-tuning"},
		{"finetune-job", jobURL, "/fine-tuning"},
		{"finetune-launch", "/fine-tuning/new?dataset_version_id=" + version.ID.String(), "/fine-tuning"},
		{"finetune-settings", "/fine-tuning/settings", "/fine-tuning"},
		{"models", "/models", "/models"},
		{"model-version", "/models/versions/" + registered.ID.String(), "/models"},
		{"models-compare", "/models/compare?b=" + registered.ID.String(), "/models"},
		{"serving-targets", "/models/targets", "/models/targets"},
		{"shadows", "/shadows", "/shadows"},
		{"shadow", "/shadows/" + shadowID, "/shadows"},
		{"evaluations", "/evaluations", "/evaluations"},
		{"evaluation-run", "/evaluations/runs/" + runID, "/evaluations"},
		{"experiments", "/experiments", "/experiments"},
		{"experiment", "/experiments/assist-v3", "/experiments"},
		{"experiment-new", "/experiments/new", "/experiments"},
		{"monitors", "/monitors", "/monitors"},
		{"review", "/review", "/feedback"},
		{"review-adjudication", "/review/adjudication", "/feedback"},
		{"review-agreement", "/review/agreement", "/feedback"},
		{"review-agreement-question", "/review/agreement?rubric_id=" + rubric.ID.String() + "&question=urgency_missed", "/feedback"},
		{"rubrics", "/rubrics", "/feedback"},
		{"rubric-new", "/rubrics/new", "/feedback"},
		{"rubric", "/rubrics/" + rubric.ID.String(), "/feedback"},
		{"rubric-items", "/rubrics/" + rubric.ID.String() + "/items?question=urgency_missed&value=none", "/feedback"},
		{"codebooks", "/codebooks", "/codebooks"},
		{"codebook", "/codebooks/assistant", "/codebooks"},
		{"codebook-from-item", "/codebooks/assistant?from=" + itemID, "/codebooks"},
		{"codebook-rule", "/codebooks/assistant/rules/" + rule.ID.String(), "/codebooks"},
		{"codebook-version", "/codebooks/assistant/versions/1", "/codebooks"},
		{"codebook-suggestions", "/codebooks/assistant/suggestions", "/codebooks"},
		{"judges", "/evaluations/judges", "/evaluations/judges"},
		{"judge-agreement", "/evaluations/agreement", "/evaluations"},
		{"judge-agreement-run", "/evaluations/agreement/" + agreementID, "/evaluations"},
		{"judge-conflicts", "/feedback/conflicts", "/feedback"},
		{"users", "/admin/users", "/admin/users"},
		{"keys", "/admin/api-keys", "/admin/api-keys"},
		{"audit", "/admin/audit", "/admin/audit"},
		{"loops", "/loops", "/loops"},
		{"loop-new", "/loops/new", "/loops"},
		{"loop", "/loops/" + loop.ID.String(), "/loops"},
		{"loop-edit", "/loops/" + loop.ID.String() + "/edit", "/loops"},
		{"loop-run", "/loops/runs/" + loopRun.ID.String(), "/loops"},
		{"routing", "/feedback/routing", "/feedback"},
		{"account", "/account", ""},
		{"not-found", "/datasets/00000000-0000-0000-0000-000000000000", "/datasets"},
		{"no-route", "/no-such-page", ""},
	}
	return d
}

// takeLogged returns what the browser logged as an error since the last
// call, leaving out the 404 a page answers on purpose at path.
func (d *designSite) takeLogged(path string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, e := range d.logged {
		if !strings.HasSuffix(e, " "+d.s.URL+path) {
			out = append(out, e)
		}
	}
	d.logged = nil
	return out
}

// The sizes every page is checked at: a desktop and a phone.
var designSizes = []struct {
	name string
	w, h int64
}{{"desktop", 1280, 800}, {"phone", 390, 844}}

// Every page of the Curate tab, on the demo data, at a desktop and a phone
// width: nothing spills sideways out of the page or out of its card, no
// table hides columns off-screen, every table wears the design system's
// class, no raw enum or code shows (in the text or in a select's
// options), no template source shows (a component call written as text,
// "@StatusBadge(o.Status)", or an expression, "{ v.Name }"), the navigation highlights the page's own link (behind a Menu
// button on the phone), and the browser logs no error (a style or script
// refused by the CSP is one).
func TestBrowserEveryPageStyled(t *testing.T) {
	d := newDesignSite(t)
	for _, size := range designSizes {
		// No mobile emulation: a phone browser zooms out of a page that is
		// too wide, which would hide the overflow this test looks for.
		if err := chromedp.Do(d.browser, chromedp.EmulateViewport(size.w, size.h)); err != nil {
			t.Fatal(err)
		}
		for _, p := range d.pages {
			t.Run(size.name+"/"+p.name, func(t *testing.T) {
				f := checkPage(t, d.browser, d.s.URL+p.path)
				// A missing id and a missing page read the same.
				if strings.HasPrefix(p.name, "no") && f.Title != "Not found · Curate" {
					t.Errorf("title %q, want Not found · Curate", f.Title)
				}
				if f.Active != p.nav {
					t.Errorf("the navigation highlights %q, want %q", f.Active, p.nav)
				}
				if phone := size.w < 760; phone != f.Folded {
					t.Errorf("at %dpx the navigation is folded behind Menu: %v, want %v", size.w, f.Folded, phone)
				}
				if errs := d.takeLogged(p.path); len(errs) > 0 {
					t.Errorf("browser errors on %s:\n%s", p.path, strings.Join(errs, "\n"))
				}
				webtest.Screenshot(t, d.browser, p.name+"-"+size.name)
			})
		}
	}
}

// pageFacts is what checkPage reads from a page.
type pageFacts struct {
	ScrollWidth, InnerWidth int
	Bare, Raw, RawOptions   []string
	Source                  []string // template source shown as text
	Title                   string
	Overlap                 []string // how the top bar does not fit
	OutOfCard               []string // elements sticking out of their card
	HiddenColumns           []string // tables whose columns run past their box
	Unstyled                []string // flashes and banners the stylesheet gives no colour
	Active                  string   // the highlighted navigation link
	Folded                  bool     // the navigation is behind the Menu button
}

// checkPage opens url, asserts the design system's promises on it and
// returns what it read.
func checkPage(t *testing.T, ctx context.Context, url string) pageFacts {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(`body`)); err != nil {
		t.Fatal(err)
	}
	// Charts and HTMX fragments settle first.
	time.Sleep(300 * time.Millisecond)
	js := fmt.Sprintf(`(() => {
		const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '');
		// uPlot draws its legend as a table of its own; ours all carry .table.
		const bare = [...document.querySelectorAll('table:not(.u-legend)')].filter(t => !t.classList.contains('table'))
			.map(t => t.id || t.className || t.outerHTML.slice(0, 80));
		// Visible text only, leaving out what is shown on purpose as code.
		const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		const raw = [];
		const re = /%[1]s/g;
		for (let n = walker.nextNode(); n; n = walker.nextNode()) {
			const el = n.parentElement;
			if (!el || el.closest('code, kbd, pre, script, style, template, textarea, select, .raw, [hidden]')) continue;
			if (!el.checkVisibility || !el.checkVisibility()) continue;
			for (const m of n.textContent.matchAll(re)) raw.push(m[0] + ' in <' + el.tagName.toLowerCase() + '>');
		}
		// Template source that reached the page as text, shown or hidden:
		// a templ component call ("@StatusBadge(") or a Go expression in
		// templ's braces ("{ v.Name }", "{ label }").
		const source = [];
		const src = /@[A-Z][A-Za-z0-9]*\(|\{ +[A-Za-z_][A-Za-z0-9_.]*(\([^)]*\))? +\}/g;
		const all = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n = all.nextNode(); n; n = all.nextNode()) {
			const el = n.parentElement;
			if (!el || el.closest('script, style, textarea')) continue;
			for (const m of n.textContent.matchAll(src)) source.push(m[0] + ' in <' + el.tagName.toLowerCase() + '>: ' + n.textContent.trim().slice(0, 80));
		}
		for (const a of document.querySelectorAll('[title], [placeholder], [aria-label], [value]')) {
			for (const attr of ['title', 'placeholder', 'aria-label', 'value']) {
				const v = a.getAttribute(attr);
				if (v) for (const m of v.matchAll(src)) source.push(m[0] + ' in ' + attr + ' of ' + name(a));
			}
		}
		// Every choice of every select, shown or not: a closed list shows
		// its options the moment it opens.
		const rawOptions = [];
		for (const o of document.querySelectorAll('select option')) {
			if (o.closest('.raw')) continue;
			for (const m of o.textContent.matchAll(re)) rawOptions.push(m[0] + ' in <option value="' + o.value + '"> of ' + name(o.closest('select')));
		}
		// The navigation must fit its room: one too long for the window runs
		// under the account links without widening the page.
		const overlap = [];
		const nav = document.querySelector('nav.tabs');
		if (nav && nav.checkVisibility() && nav.scrollWidth > nav.clientWidth + 1) overlap.push('the navigation needs ' + nav.scrollWidth + 'px of its ' + nav.clientWidth + 'px');
		const button = document.querySelector('.nav-button');
		const folded = !!nav && !!button && button.checkVisibility() && !nav.checkVisibility();
		// Nothing sticks out of its card. Inside a box that scrolls or clips
		// (a .table-wrap) an element may be wider: the box is checked below.
		const outOfCard = [];
		for (const card of document.querySelectorAll('.card')) {
			if (!card.checkVisibility()) continue;
			const cr = card.getBoundingClientRect();
			for (const el of card.querySelectorAll('*')) {
				if (!el.checkVisibility() || getComputedStyle(el).position === 'absolute' && getComputedStyle(el).clip !== 'auto') continue;
				let clipped = false;
				for (let a = el.parentElement; a && a !== card; a = a.parentElement) {
					if (getComputedStyle(a).overflowX !== 'visible') { clipped = true; break; }
				}
				if (clipped) continue;
				const r = el.getBoundingClientRect();
				if (r.width === 0 || r.height === 0) continue;
				const over = Math.max(r.right - cr.right, cr.left - r.left);
				if (over > 1) outOfCard.push(name(el) + ' sticks out of ' + name(card) + ' by ' + Math.round(over) + 'px');
				if (outOfCard.length > 5) break;
			}
		}
		// A table keeps its columns on screen: one wider than its box hides
		// the last ones behind a sideways scroll.
		const hidden = [];
		for (const w of document.querySelectorAll('.table-wrap')) {
			if (w.checkVisibility() && w.scrollWidth > w.clientWidth + 1) {
				const t = w.querySelector('table');
				hidden.push((t ? name(t) : name(w)) + ' needs ' + w.scrollWidth + 'px of its ' + w.clientWidth + 'px');
			}
		}
		// Every flash and banner has its colours (a template's "flash warn"
		// had none).
		const unstyled = [...document.querySelectorAll('.flash, .banner')]
			.filter(f => f.checkVisibility() && getComputedStyle(f).backgroundColor === 'rgba(0, 0, 0, 0)').map(name);
		const current = document.querySelector('nav.tabs a[aria-current=page]');
		return {ScrollWidth: document.documentElement.scrollWidth, InnerWidth: window.innerWidth, Bare: bare, Raw: raw, RawOptions: rawOptions, Source: source,
			Title: document.title, Overlap: overlap, OutOfCard: outOfCard, HiddenColumns: hidden, Unstyled: unstyled,
			Active: current ? current.getAttribute('href') : '', Folded: folded};
	})()`, rawWord)
	r, err := chromedp.Run(ctx, chromedp.Evaluate[pageFacts](js))
	if err != nil {
		t.Fatal(err)
	}
	if r.ScrollWidth > r.InnerWidth {
		t.Errorf("page is %dpx wide in a %dpx window", r.ScrollWidth, r.InnerWidth)
	}
	if len(r.Bare) > 0 {
		t.Errorf("tables without the .table class: %q", r.Bare)
	}
	if len(r.Overlap) > 0 {
		t.Errorf("the top bar does not fit: %q", r.Overlap)
	}
	if len(r.Raw) > 0 {
		t.Errorf("raw words on screen: %q", r.Raw)
	}
	if len(r.RawOptions) > 0 {
		t.Errorf("raw words in choices: %q", r.RawOptions)
	}
	if len(r.Source) > 0 {
		t.Errorf("template source on the page: %q", r.Source)
	}
	if len(r.OutOfCard) > 0 {
		t.Errorf("out of its card: %q", r.OutOfCard)
	}
	if len(r.HiddenColumns) > 0 {
		t.Errorf("columns off-screen: %q", r.HiddenColumns)
	}
	if len(r.Unstyled) > 0 {
		t.Errorf("flashes without colours: %q", r.Unstyled)
	}
	if !strings.HasSuffix(r.Title, "· Curate") {
		t.Errorf("title %q", r.Title)
	}
	return r
}

// launchDemoJob launches a supervised OpenAI job on the demo version from
// the signed-in browser's session and returns its page's path.
func launchDemoJob(t *testing.T, ctx context.Context, s *webtest.Server, versionID string) string {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/fine-tuning/new?"+url.Values{"dataset_version_id": {versionID}, "provider": {"openai"}, "method": {"supervised"}}.Encode()),
		chromedp.WaitVisible(`#ft-form`),
		chromedp.SetValue(`input[name=base_model]`, ftMini),
		chromedp.Click(`#ft-launch`),
		chromedp.WaitVisible(`#ft-live`),
	)
	if err != nil {
		t.Fatalf("launching a job: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(loc, s.URL)
}
