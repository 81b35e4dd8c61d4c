package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/web/webtest"
)

// The rough edges of the pages that HTTP shows, each on the site of the
// browser's test: the evaluation form's defaults from a version's page,
// the alert banners, refusals at addresses that open again, the loop
// form's methods, no template source on a loop's artefact, a free
// experiment key, a viewer's new-pair page, the assignee list, the
// fine-tune form's help, the gate's "Set one" link.
func TestRoughEdgePages(t *testing.T) {
	f := newEdgeSite(t)
	ctx := context.Background()
	admin := f.s.SignedIn(f.admin)
	fresh := f.fresh.ID.String()

	t.Run("1-evaluation-defaults", func(t *testing.T) {
		page := admin.Get("/models/versions/"+fresh).Must(t, http.StatusOK).Body
		evaluate := regexpFind(t, `href="([^"]*)" id="evaluate-version"`, page)
		body := admin.Get(strings.ReplaceAll(evaluate, "&amp;", "&")).Must(t, http.StatusOK).Body
		sets, set := options(t, body, "evaluation-form", "golden_set_version_id")
		if len(sets) < 2 || set != f.goldenSet.String() {
			t.Errorf("the form chooses golden set %q of %q, want the gate's %s", set, sets, f.goldenSet)
		}
		if _, judge := options(t, body, "evaluation-form", "judge_endpoint"); judge != "judge" ||
			!strings.Contains(body, `name="scorers" value="judge" checked`) {
			t.Errorf("the judge scorer is ticked with judge %q, want the organisation's only endpoint", judge)
		}
		// Asked for another golden set by the address, the form takes it.
		other := sets[0]
		if other == f.goldenSet.String() {
			other = sets[1]
		}
		body = admin.Get("/evaluations?candidate_version_id="+fresh+"&golden_set_version_id="+other).Must(t, http.StatusOK).Body
		if _, set := options(t, body, "evaluation-form", "golden_set_version_id"); set != other {
			t.Errorf("asked for golden set %s, the form chooses %s", other, set)
		}
	})

	t.Run("2-banners", func(t *testing.T) {
		body := admin.Get("/").Must(t, http.StatusOK).Body
		if n := strings.Count(body, `role="alert"`); n != 1 || !strings.Contains(body, `id="alerts-summary"`) ||
			!strings.Contains(body, "5 open alerts:</strong>") || !strings.Contains(body, "Safety reports") {
			t.Errorf("five alerts show %d banners: %s", n, regexpFind(t, `(?s)<main id="main">(.{0,600})`, body))
		}
		if _, err := f.s.Pool.Exec(ctx, `UPDATE alerts SET dismissed_at = now() WHERE org_id = $1 AND dedup_key LIKE 'low_rating:%'`, f.seeded.OrgID); err != nil {
			t.Fatal(err)
		}
		body = admin.Get("/").Must(t, http.StatusOK).Body
		if n := strings.Count(body, `class="banner-text"`); n != 2 || strings.Contains(body, `id="alerts-summary"`) {
			t.Errorf("two alerts show %d one-line banners", n)
		}
	})

	t.Run("3-refusals-at-addresses-that-open", func(t *testing.T) {
		res := admin.PostForm("/evaluations", url.Values{"golden_set_version_id": {f.goldenSet.String()}, "candidate_version_id": {fresh},
			"scorers": {"reference_f1"}, "formula_scorer": {"reference_f1"}, "formula_weight": {"1"}}).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `id="err-candidate.model_version_id"`) || !strings.Contains(res.Body, `action="/evaluations"`) {
			t.Errorf("the evaluation refused at its page's address: %q", regexp.MustCompile(`<p class="field-error"[^>]*>[^<]+`).FindAllString(res.Body, -1))
		}
		for path, to := range map[string]string{"/evaluations/runs": "/evaluations#start-evaluation", "/fine-tuning/jobs": "/fine-tuning"} {
			if loc := admin.Get(path).Must(t, http.StatusSeeOther).Header.Get("Location"); loc != to {
				t.Errorf("GET %s sends to %q, want %q", path, loc, to)
			}
		}
		form := admin.Get("/fine-tuning/new").Must(t, http.StatusOK).Body
		if !strings.Contains(form, `action="/fine-tuning/new" id="ft-form"`) {
			t.Error("the fine-tune form does not post to its own address")
		}
		res = admin.PostForm("/fine-tuning/new", url.Values{"provider": {"openai"}, "method": {"supervised"}}).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, `id="ft-form"`) {
			t.Error("a refused launch does not show the form again")
		}
	})

	t.Run("3-loop-form-supervised", func(t *testing.T) {
		form := admin.Get("/loops/new").Must(t, http.StatusOK).Body
		methods, _ := options(t, form, "loop-training", "method")
		if !strings.Contains(form, ">IRS (iterative rejection sampling)</option>") || strings.Contains(form, ">Irs<") || len(methods) < 2 {
			t.Errorf("the loop form's methods %q are not each named in words", methods)
		}
		// The defaults with Supervised chosen: the ticked pair methods are
		// left aside, not refused.
		values := url.Values{"name": {"support-sft"}, "registered_model": {"support"}, "min_new_items": {"1000"}, "filter_status": {"approved"},
			"dataset_name": {"Support SFT"}, "validation_percent": {"20"}, "split_strategy": {"random"}, "provider": {"openai"},
			"method": {"supervised"}, "base_model": {"gpt-4o-mini-2024-07-18"}, "n_epochs": {"auto"}, "max_cost_usd": {"20"},
			"reward_formula": {`{"reference_f1": 1}`}, "judge_template": {"default"}, "deploy_target": {"provider"},
			"deploy_alias": {"candidate"}, "promote_alias": {"production"}, "approval": {"none"}, "methods": {"same_query", "correction"}}
		res := admin.PostForm("/loops", values)
		if strings.Contains(res.Body, `id="err-methods"`) || res.Status != http.StatusSeeOther {
			t.Errorf("a supervised loop with the default methods ticked: %d %s", res.Status, regexpFind(t, `(?s)(class="field-error"[^<]*<|$)`, res.Body))
		}
	})

	t.Run("4-no-template-source", func(t *testing.T) {
		body := admin.Get("/experiments/"+f.experiment).Must(t, http.StatusOK).Body
		origin := regexpFind(t, `(?s)(Made by the loop.*?</p>)`, body)
		if strings.Contains(body, "@StatusBadge") || !strings.Contains(origin, `class="badge`) {
			t.Errorf("the loop's artefact: %s", origin)
		}
	})

	t.Run("7-free-experiment-key", func(t *testing.T) {
		if _, err := f.s.App.Services.Experiments.Create(ctx, audit.System, f.seeded.OrgID, experiments.NewExperiment{Key: "support-1.2.0",
			ControlModelID: f.version.ID, TreatmentModelID: f.fresh.ID, Metrics: []string{"thumbs_up_rate"}}); err != nil {
			t.Fatal(err)
		}
		body := admin.Get("/experiments/new?treatment="+fresh).Must(t, http.StatusOK).Body
		if key := regexpFind(t, `name="key" value="([^"]*)"`, body); key != "support-1.2.0-2" {
			t.Errorf("the form prefills key %q, want support-1.2.0-2 (support-1.2.0 is taken)", key)
		}
	})

	t.Run("8-viewer-new-pair", func(t *testing.T) {
		viewer := f.s.SignedIn(f.viewer)
		body := viewer.Get("/pairs/new").Must(t, http.StatusOK).Body
		if !strings.Contains(body, `id="pair-read-only"`) || !strings.Contains(body, `<fieldset class="plain" disabled>`) || strings.Contains(body, `id="save"`) {
			t.Errorf("a viewer's new-pair page: %s", regexpFind(t, `(?s)(<h1>.{0,900})`, body))
		}
		if body := admin.Get("/pairs/new").Must(t, http.StatusOK).Body; strings.Contains(body, `id="pair-read-only"`) || !strings.Contains(body, `id="save"`) {
			t.Error("an admin's new-pair page is read-only")
		}
	})

	t.Run("9-assignees-help-and-links", func(t *testing.T) {
		queue := admin.Get("/feedback").Must(t, http.StatusOK).Body
		if strings.Contains(queue, ">"+f.viewer+"</option>") {
			t.Error("the queue offers a viewer as an assignee")
		}
		form := admin.Get("/fine-tuning/new?method=dpo").Must(t, http.StatusOK).Body
		if !strings.Contains(form, `id="ft-method-grpo" data-methods="grpo ppo" hidden`) {
			t.Errorf("DPO chosen, GRPO's help: %s", regexpFind(t, `(<small id="ft-method-grpo"[^>]*>)`, form))
		}
		if err := f.s.App.Services.Eval.RemoveGate(ctx, audit.System, f.seeded.OrgID); err != nil {
			t.Fatal(err)
		}
		page := admin.Get("/models/versions/"+fresh).Must(t, http.StatusOK).Body
		if !strings.Contains(page, `<a href="/evaluations#golden-sets" id="gate-set-one">Set one</a>`) {
			t.Error("the gate's Set one link does not open the golden sets")
		}
		if !strings.Contains(admin.Get("/evaluations").Must(t, http.StatusOK).Body, `id="golden-sets"`) {
			t.Error("the evaluation page has no #golden-sets")
		}
	})
}

// Full Deploy from the A/B panel sends the treatment's adapter, loaded for
// the experiment, to production as it is: no second load, production
// served under the name the experiment used; the panel lands on the
// version's page with a confirmation, and the page reloaded when the
// deployment ends says how it ended.
func TestFullDeployReusesLoadedAdapter(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	adminKey := s.APIKey(org, "ops", "admin")
	viewerKey := s.APIKey(org, "dash", "viewer")
	vllm, v1, v2, staged := servedVersions(t, s, adminKey, viewerKey)
	s.API(adminKey, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "support-v2", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID, "metrics": []string{"thumbs_up_rate"}}).Must(t, http.StatusCreated)
	s.API(adminKey, http.MethodPost, "/api/experiments/support-v2/start", nil).Must(t, http.StatusOK)
	loads := vllm.Loads()

	s.User(org, "ad@acme.test", "admin")
	c := s.SignedIn("ad@acme.test")
	res := c.PostForm("/experiments/support-v2/deploy", url.Values{}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/models/versions/"+v2.ID {
		t.Fatalf("full deploy lands on %q", loc)
	}
	if page := c.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; !strings.Contains(page, "Full deploy of support-v2: the treatment is going to production on gpu-1") {
		t.Error("the version's page does not confirm the full deploy")
	}
	var status, served string
	for deadline := time.Now().Add(30 * time.Second); status != "succeeded"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the production deployment is %q", status)
		}
		if err := s.Pool.QueryRow(context.Background(), `SELECT status::text, served_name FROM deployments
			WHERE version_id = $1 AND alias = 'production'`, v2.ID).Scan(&status, &served); err != nil {
			t.Fatal(err)
		}
	}
	if vllm.Loads() != loads || served != staged["served_name"] {
		t.Errorf("full deploy loaded %d more adapters and serves production as %q, want none and %q", vllm.Loads()-loads, served, staged["served_name"])
	}
	var resolved map[string]any
	s.API(viewerKey, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &resolved)
	if resolved["model"] != staged["served_name"] {
		t.Errorf("production resolves to %v, want the adapter already loaded, %v", resolved["model"], staged["served_name"])
	}
	// The table's poll that sees the deployment over reloads the page,
	// which says how it ended.
	if h := c.Get("/models/versions/"+v2.ID+"/deployments").Must(t, http.StatusOK).Header.Get("HX-Refresh"); h != "true" {
		t.Errorf("the ended deployment's table answers HX-Refresh %q", h)
	}
	if page := c.Get("/models/versions/"+v2.ID).Must(t, http.StatusOK).Body; !strings.Contains(page, "now serves &#34;production&#34; on gpu-1") {
		t.Error("the reloaded page does not say the deployment is done")
	}
}
