package web_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// The registry in the browser: from a finished local job an admin opens
// the version it registered, deploys it to a vLLM server, reads the
// history, rolls back to the version before, and follows the lineage to a
// feedback item that trained it.
func TestBrowserRegistryFlow(t *testing.T) {
	command := strings.Join([]string{"env", fakeTrainer(t), "run"}, " ")
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *cfgT) {
		c.TrainerCommand, c.FineTunePoll, c.FineTuneBudgetUSD, c.GPUSlots, c.ModelsDir = command, 20*time.Millisecond, 100, 1, t.TempDir()
	}})
	writeModel(t, filepath.Join(s.App.Config.ModelsDir, "tiny-llama"))
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
	key := s.APIKey(seeded.OrgID, "ops", "admin")
	vllm := vllmtest.New(t, "tiny-llama")
	s.API(key, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL, "unload_grace_seconds": 0}).
		Must(t, http.StatusCreated)
	// Two trainings on the demo data: the first goes to production, the
	// second replaces it and is rolled back.
	var jobs []string
	for range 2 {
		var job ftJob
		s.API(key, http.MethodPost, "/api/fine-tuning/jobs", map[string]any{"dataset_version_id": version.ID.String(), "provider": "local",
			"base_model": "tiny-llama", "method": "supervised"}).Must(t, http.StatusCreated).JSON(t, &job)
		waitJob(t, s, key, job.ID, "succeeded")
		jobs = append(jobs, job.ID)
	}

	b := webtest.Browser(t)
	// Deploy and Roll back ask to confirm; the admin agrees.
	dialogs := webtest.AcceptDialogs(t, b)
	deploy := func(reason string) {
		t.Helper()
		err := chromedp.Do(b, chromedp.WaitVisible(`#deploy-form`))
		if err != nil {
			t.Fatalf("deploying: %v", err)
		}
		here, err := chromedp.Run(b, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		err = chromedp.Do(b,
			chromedp.SendKeys(`#deploy-form textarea[name=reason]`, reason),
			chromedp.Click(`#deploy-form button[type=submit]`),
		)
		if err != nil {
			t.Fatalf("deploying: %v", err)
		}
		// The page reloads itself once the deployment ends, but a loaded
		// machine can take longer than a query's patience: load the
		// version's page until it shows the deployment done and offers the
		// rollback, and say what it showed last if it never does.
		var seen string
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			state, err := chromedp.Run(b, chromedp.Evaluate[string](`JSON.stringify({
				href: location.href, ready: document.readyState,
				deployments: [...document.querySelectorAll('#deployments [data-status]')].map(e => e.dataset.status),
				rollback: !!document.querySelector('#rollback-form'),
				errors: [...document.querySelectorAll('.flash-error, .field-error')].map(e => e.textContent.trim())})`))
			if err == nil {
				seen = state
				if strings.Contains(state, `"href":"`+here+`"`) && strings.Contains(state, `"succeeded"`) && strings.Contains(state, `"rollback":true`) && strings.Contains(state, `"ready":"complete"`) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("deploying %q: %s never showed the deployment done; last seen %s (%v)", reason, here, seen, err)
			}
			// Once the deployment is listed the form has done its work, and
			// loading the page again cannot cut its request short.
			if strings.Contains(seen, `"deployments":["`) {
				_ = chromedp.Do(b, chromedp.Navigate(here))
			}
		}
	}
	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, seeded.Email),
		chromedp.SendKeys(`input[name=password]`, seeded.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Navigate(s.URL+"/fine-tuning/jobs/"+jobs[0]),
		chromedp.Click(`#registered-version`),
	)
	if err != nil {
		t.Fatal(err)
	}
	deploy("first adapter from the demo data")
	// The heading's status is the page's at load: the deployments list
	// polls on its own, so it can show the deployment done first.
	err = chromedp.Do(b,
		chromedp.Reload(),
		chromedp.Poll[chromedp.Void](`document.querySelector('#version-status')?.textContent.trim() === 'Deployed'`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil {
		t.Errorf("status after the deployment: %q (%v)", text(t, b, `#version-status`), err)
	}

	err = chromedp.Do(b,
		chromedp.Navigate(s.URL+"/fine-tuning/jobs/"+jobs[1]),
		chromedp.Click(`#registered-version`),
	)
	if err != nil {
		t.Fatal(err)
	}
	deploy("second run on the same data")
	if got := text(t, b, `#history .timeline li[data-action=alias_moved]`); !strings.Contains(got, "1.0.0 → 1.0.1") || !strings.Contains(got, "second run") {
		t.Errorf("newest history entry: %q", got)
	}
	webtest.Screenshot(t, b, "model-version")

	err = chromedp.Do(b,
		chromedp.SendKeys(`#rollback-form textarea[name=reason]`, "answers got longer"),
		chromedp.Click(`#rollback-form button[type=submit]`),
	)
	if err != nil {
		t.Fatalf("rolling back: %v", err)
	}
	// The page being left lists a succeeded deployment too: wait for the
	// version the rollback goes to before looking for one.
	waitFor(t, b, `(document.querySelector('h1') || {textContent: ''}).textContent.includes('1.0.0')`)
	waitFor(t, b, `!!document.querySelector('#deployments [data-status=succeeded]')`)
	// The rollback lands on the version production went back to.
	if got := text(t, b, `h1`); !strings.Contains(got, "1.0.0") {
		t.Errorf("after the rollback the page shows %q", got)
	}
	var r struct {
		Version string `json:"version"`
		Model   string `json:"model"`
	}
	// The version page already lists 1.0.0's first, succeeded deployment:
	// the rollback's own may still be running. Wait for the alias to move.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.API(key, http.MethodGet, "/api/models/resolve?name="+resolveName(t, s, key)+"&alias=production", nil).Must(t, http.StatusOK).JSON(t, &r)
		if r.Version == "1.0.0" || time.Now().After(deadline) {
			break
		}
	}
	if r.Version != "1.0.0" || len(vllm.Loaded()) == 0 {
		t.Errorf("resolved after rollback %+v; vLLM serves %v", r, vllm.Loaded())
	}

	// Lineage: the dataset version, then a feedback item that trained it.
	href, err := chromedp.Run(b, chromedp.AttributeValue(`#lineage-items li a`, "href"))
	if err != nil || !strings.HasPrefix(href.Value, "/feedback/") {
		t.Fatalf("the first training item links to %q (%v)", href.Value, err)
	}
	err = chromedp.Do(b,
		chromedp.WaitVisible(`#lineage-dataset`),
		chromedp.Click(`#lineage-items li a`),
		chromedp.WaitVisible(`#item-status`),
	)
	if err != nil {
		t.Fatalf("following the lineage: %v", err)
	}
	// The item says where it went: the model trained on it, serving now.
	if got := text(t, b, `#item-models`); !strings.Contains(got, "1.0.0") || !strings.Contains(got, "production") {
		t.Errorf("the item's models: %q", got)
	}
	if n := dialogs.Load(); n != 3 {
		t.Errorf("%d confirmations asked, want 3 (two deployments, one rollback)", n)
	}
}

// resolveName is the name the demo dataset's jobs registered under.
func resolveName(t *testing.T, s *webtest.Server, key string) string {
	t.Helper()
	var list struct {
		Data []modelDoc `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/models?limit=1", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) == 0 {
		t.Fatal("nothing registered")
	}
	return list.Data[0].Name
}
