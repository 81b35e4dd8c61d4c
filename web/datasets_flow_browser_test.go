package web_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/views"
	"github.com/curate/curate/web/webtest"
)

// The "done when" in a real browser: corrected feedback and an
// imported HH-RLHF file become one preference dataset; the curator reads
// its report, drops what OpenAI's preference format refuses, freezes it and
// downloads OpenAI preference, TRL and Bedrock exports, each line of which
// meets its format's rules.
func TestBrowserDatasetFlow(t *testing.T) {
	sample := flowSample(t)
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	uid := s.User(org, "cora@acme.test", "curator")
	imported := flowMaterial(t, s, org, uid, sample)
	multi := multiTurn(t, s, org)
	total := len(imported) + flowCorrections
	count := func(n int) string {
		return `document.querySelector('#sample-count')?.textContent === '` + strconv.Itoa(n) + `'`
	}

	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "cora@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Click(`nav.tabs a[href="/datasets"]`),
		chromedp.WaitVisible(`#new-dataset`),
		chromedp.SendKeys(`#new-dataset input[name=name]`, "Support + HH harmless"),
		chromedp.SetValue(`#new-dataset select[name=dataset_type]`, "preference_pairs"),
		chromedp.Submit(`#new-dataset`),
		chromedp.WaitVisible(`#add-by-filter`),
		chromedp.SetValue(`#add-by-filter select[name=method]`, "import"),
		chromedp.Click(`#add-filter`),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, count(len(imported)))
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`#add-by-filter select[name=method]`, "correction"),
		chromedp.Click(`#add-filter`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, count(total))

	// The report for OpenAI's preference format: each multi-turn prompt is
	// an error, and export is blocked.
	check := func(format string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(`#report select[name=format]`, format),
			chromedp.Click(`#check-report`),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `document.querySelector('#report strong')?.textContent === '`+views.Label(format)+`' && !!document.querySelector('#report-verdict')`)
	}
	check("openai_preference")
	if v := text(t, ctx, `#report-verdict`); !strings.Contains(v, "export to OpenAI preference is blocked") {
		t.Fatalf("verdict %q", v)
	}
	if n := text(t, ctx, `#findings tr[data-code=not_one_turn] td.num`); n != strconv.Itoa(len(multi)) {
		t.Fatalf("not_one_turn count %s, want the %d multi-turn pairs", n, len(multi))
	}
	webtest.Screenshot(t, ctx, "flow-report-blocked")

	// The curator ticks the multi-turn pairs in the member list and removes
	// them (the list shows only the newest members, so the ticked boxes are
	// added to the form as a curator's selection would be).
	ids := "['" + strings.Join(multi, "','") + "']"
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const form = document.querySelector('#member-list');
		for (const id of `+ids+`) {
			const box = document.createElement('input');
			box.type = 'checkbox'; box.name = 'ids'; box.value = id; box.checked = true; box.hidden = true;
			form.appendChild(box);
		}
		form.querySelector('button.danger').click();
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	total -= len(multi)
	waitFor(t, ctx, count(total))
	// A preference dataset is offered the preference formats only.
	if offered := eval[string](t, ctx, `Array.from(document.querySelectorAll('#report select[name=format] option')).map(o => o.value).join(',')`); strings.Contains(offered, "bedrock_chat") {
		t.Errorf("a preference dataset offers %s", offered)
	}
	for _, f := range []string{"openai_preference", "trl_preference"} {
		check(f)
		if v := text(t, ctx, `#report-verdict`); !strings.Contains(v, "No errors: ready to export to "+views.Label(f)) {
			t.Fatalf("%s verdict %q", f, v)
		}
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(`#lifecycle button[data-to=ready]`),
		chromedp.WaitVisible(`#versions tr[data-version="1"]`),
	); err != nil {
		t.Fatal(err)
	}
	if n := text(t, ctx, `#versions tr[data-version="1"] td.num`); n != strconv.Itoa(total) {
		t.Fatalf("version 1 holds %s items, want %d", n, total)
	}

	for _, f := range []export.Format{export.OpenAIPreference, export.TRLPreference} {
		row := fmt.Sprintf(`[...document.querySelectorAll('#export-rows tr[data-status=succeeded]')].find(r => r.cells[1].textContent.trim() === '%s')`, views.Label(string(f)))
		if err := chromedp.Do(ctx,
			chromedp.SetValue(`#export-form select[name=format]`, string(f)),
			chromedp.Click(`#start-export`),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `!!`+row)
		// Download every data file through the app with the browser's session.
		files, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(async () => {
			const out = {};
			for (const a of `+row+`.querySelectorAll('a.download')) {
				const name = a.textContent.trim();
				if (name === 'manifest.json') continue;
				const r = await fetch(a.href);
				out[name] = r.ok ? await r.text() : 'status ' + r.status;
			}
			return out;
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		rows, corrections := 0, 0
		for name, body := range files {
			sft, _ := checkExportFile(t, f, name, body)
			rows += len(sft)
			for _, ex := range sft {
				if strings.HasSuffix(ex.Messages[len(ex.Messages)-1].Content, "and choose Rotate.") {
					corrections++
				}
			}
		}
		if len(files) != 2 || rows != total || corrections != flowCorrections {
			t.Fatalf("%s: %d files, %d rows (want %d), %d corrections (want %d)", f, len(files), rows, total, corrections, flowCorrections)
		}
	}
	webtest.Screenshot(t, ctx, "flow-exported")
}
