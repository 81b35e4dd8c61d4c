package web_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/web/webtest"
)

// options lists the values of a page's <select name=…> inside the element
// whose id is given, in order, and which of them is selected.
func options(t *testing.T, body, id, name string) (values []string, selected string) {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no #%s on the page", id)
	}
	body = body[i:]
	j := strings.Index(body, `name="`+name+`"`)
	if j < 0 {
		t.Fatalf("no select %s in #%s", name, id)
	}
	body = body[j:]
	body = body[:strings.Index(body, "</select>")]
	for _, m := range regexp.MustCompile(`<option value="([^"]*)"( selected)?`).FindAllStringSubmatch(body, -1) {
		values = append(values, m[1])
		if m[2] != "" {
			selected = m[1]
		}
	}
	return values, selected
}

// A version's way to an evaluation without a dead end: the form opens
// with the version chosen and, while no target Curate calls serves it,
// offers to stage it on a target that can take it and that Curate calls
// (a vLLM server for an adapter, a provider for a full model); a refused
// start says so in a sentence; the
// deploy form offers only targets that take the version's kind, and a
// refusal comes back beside its button, as a fragment for htmx.
func TestEvaluateFromVersionPages(t *testing.T) {
	t.Parallel()
	f := newEvalFixture(t, webtest.Options{})
	s := f.s
	ctx := context.Background()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	if _, err := s.App.Services.Serving.Create(ctx, audit.System, f.seeded.OrgID, serving.NewTarget{Name: "pipeline", Kind: serving.KindWebhook,
		BaseURL: "http://127.0.0.1:9/deploy", APIKey: secret}); err != nil {
		t.Fatal(err)
	}
	s.User(f.seeded.OrgID, "ad@demo.test", "admin")
	s.User(f.seeded.OrgID, "vi@demo.test", "viewer")
	admin, viewer := s.SignedIn("ad@demo.test"), s.SignedIn("vi@demo.test")
	fresh, full := f.fresh.ID.String(), f.full.ID.String()

	// From the version's page, the form with the version chosen.
	page := admin.Get("/models/versions/"+fresh).Must(t, http.StatusOK).Body
	evaluate := "/evaluations?candidate_version_id=" + fresh + "#start-evaluation"
	if !strings.Contains(page, `id="evaluate-version"`) || !strings.Contains(page, `href="`+evaluate+`"`) {
		t.Errorf("the version page does not link to its evaluation: %s", page)
	}
	if strings.Contains(viewer.Get("/models/versions/"+fresh).Must(t, http.StatusOK).Body, `id="evaluate-version"`) {
		t.Error("a viewer, who cannot start one, is offered an evaluation")
	}
	body := admin.Get("/evaluations?candidate_version_id="+fresh).Must(t, http.StatusOK).Body
	if _, chosen := options(t, body, "evaluation-form", "candidate_version_id"); chosen != fresh {
		t.Errorf("the form chose %q, want %s", chosen, fresh)
	}
	if !strings.Contains(body, `data-reach="unserved"`) || !strings.Contains(body, "support 1.2.0 is not served anywhere Curate can call") {
		t.Errorf("the form does not say the version is not served: %s", body)
	}
	// Staged only where Curate can call it and the adapter can go: the
	// vLLM server, neither the provider nor the webhook.
	if targets, _ := options(t, body, "stage-form", "target"); strings.Join(targets, ",") != "gpu-1" {
		t.Errorf("staging offers %q", targets)
	}
	// A full model is staged where a provider serves it, which Curate
	// calls by the model's id: the provider target alone.
	body = admin.Get("/evaluations?candidate_version_id="+full).Must(t, http.StatusOK).Body
	if targets, _ := options(t, body, "stage-form", "target"); !strings.Contains(body, `data-reach="unserved"`) || strings.Join(targets, ",") != "provider" {
		t.Errorf("the offer for a full model: %q in %s", targets, body)
	}
	// An id that names no version of the organisation chooses nothing.
	for _, id := range []string{"00000000-0000-0000-0000-000000000001", "not-an-id"} {
		body = admin.Get("/evaluations?candidate_version_id="+id).Must(t, http.StatusOK).Body
		if _, chosen := options(t, body, "evaluation-form", "candidate_version_id"); chosen != "" || strings.Contains(body, `id="candidate-reach"`) {
			t.Errorf("candidate_version_id=%s chose %q", id, chosen)
		}
	}

	// Started while not served: refused in a sentence beside the field,
	// with the offer to stage it.
	start := url.Values{"golden_set_version_id": {f.goldenSet.String()}, "candidate_version_id": {fresh},
		"formula_scorer": {"reference_f1", ""}, "formula_weight": {"1", ""}}
	res := admin.PostForm("/evaluations/runs", start).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `<p class="field-error" id="err-candidate.model_version_id">The model version is not deployed`) ||
		!strings.Contains(res.Body, `id="stage-form"`) {
		t.Errorf("starting an unserved version: %s", res.Body)
	}

	// The deploy form takes only targets that take the version's kind.
	if targets, _ := options(t, page, "deploy-form", "target"); strings.Join(targets, ",") != "gpu-1,pipeline" || !strings.Contains(page, `id="targets-left-out"`) {
		t.Errorf("a LoRA adapter's deploy form offers %q", targets)
	}
	fullPage := admin.Get("/models/versions/"+full).Must(t, http.StatusOK).Body
	if targets, _ := options(t, fullPage, "deploy-form", "target"); strings.Join(targets, ",") != "pipeline,provider" {
		t.Errorf("a full model's deploy form offers %q", targets)
	}
	// A target typed in anyway is refused beside the target.
	res = admin.PostForm("/models/versions/"+full+"/deploy", url.Values{"alias": {"staging"}, "target": {"gpu-1"}, "reason": {"try"}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-target"`) || !strings.Contains(res.Body, "gpu-1 loads LoRA adapters at runtime") {
		t.Errorf("a full model sent to vLLM: %s", res.Body)
	}

	// Refused by the gate: htmx gets the deploy card alone, the message
	// beside the button and what was typed kept; a plain post the page.
	deploy := url.Values{"alias": {"production"}, "target": {"gpu-1"}, "reason": {"ship it"}, "_csrf": {admin.CSRF()}}
	res = admin.Do(http.MethodPost, "/models/versions/"+fresh+"/deploy", strings.NewReader(deploy.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Hx-Request": {"true"}}).Must(t, http.StatusUnprocessableEntity)
	card := strings.TrimSpace(res.Body)
	actions := card[strings.Index(card, `class="form-actions"`):]
	if !strings.HasPrefix(card, `<section class="card" id="deploy">`) || strings.Contains(card, "<html") ||
		!strings.Contains(actions, `id="err-deploy"`) || !strings.Contains(actions, "Evaluate it on Support gold first") ||
		!strings.Contains(card, ">ship it</textarea>") {
		t.Errorf("the deploy card refused through htmx: %s", card)
	}
	res = admin.PostForm("/models/versions/"+fresh+"/deploy", deploy).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, "<html") || !strings.Contains(res.Body, `id="err-deploy"`) {
		t.Errorf("the deploy form refused without a script: %s", res.Body)
	}

	// Staged from the form's offer: back to the form, which says the
	// deployment is under way (no worker runs here).
	res = admin.PostForm("/models/versions/"+fresh+"/deploy", url.Values{"alias": {"staging"}, "target": {"gpu-1"},
		"reason": {"Staged to be evaluated"}, "then": {"evaluate"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != evaluate {
		t.Errorf("staged, sent to %q", loc)
	}
	body = admin.Get("/evaluations?candidate_version_id="+fresh).Must(t, http.StatusOK).Body
	if !strings.Contains(body, `data-reach="deploying"`) || !strings.Contains(body, `under &#34;staging&#34; on gpu-1`) {
		t.Errorf("the form while the version is staged: %s", body)
	}
}

// The reward formula as rows round-trips: rows refused keep what was
// typed with the message beside the row; "Add a scorer" without a script
// shows one more row; accepted, the run holds the formula the rows wrote,
// its weighted scorers scored.
func TestRewardFormulaRows(t *testing.T) {
	t.Parallel()
	f := newEvalFixture(t, webtest.Options{})
	s := f.s
	key := s.APIKey(f.seeded.OrgID, "ops", "admin")
	candidate := chattest.New(func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: "Open Billing and choose Refund."}
	})
	t.Cleanup(candidate.Close)
	s.API(key, http.MethodPost, "/api/endpoints", map[string]any{"name": "assistant", "base_url": candidate.URL + "/v1", "model": "assistant-v2"}).
		Must(t, http.StatusCreated)
	s.User(f.seeded.OrgID, "ad@demo.test", "admin")
	admin := s.SignedIn("ad@demo.test")
	form := func(names, weights []string) url.Values {
		return url.Values{"golden_set_version_id": {f.goldenSet.String()}, "candidate_endpoint": {"assistant"},
			"formula_scorer": names, "formula_weight": weights}
	}
	rows := func(body string) int { return strings.Count(body, "data-formula-row") }

	// A weight that is no number: the row keeps it, with the message.
	res := admin.PostForm("/evaluations/runs", form([]string{"reference_f1", "concise", ""}, []string{"0.7", "lots", ""})).
		Must(t, http.StatusUnprocessableEntity)
	if !regexp.MustCompile(`<option value="reference_f1" selected[^>]*>Reference F1</option>`).MatchString(res.Body) ||
		!strings.Contains(res.Body, `value="0.7"`) || !strings.Contains(res.Body, `value="lots"`) ||
		!strings.Contains(res.Body, `id="err-formula-1">The weight must be a number`) ||
		!strings.Contains(res.Body, `<code id="formula-written">R = 0.7·reference_f1</code>`) {
		t.Errorf("a weight that is no number: %s", res.Body)
	}
	// A scorer given twice: the second row says so.
	res = admin.PostForm("/evaluations/runs", form([]string{"concise", "concise"}, []string{"0.5", "0.2"})).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-formula-1">Concise is given twice.`) || strings.Contains(res.Body, `id="err-formula-0">C`) {
		t.Errorf("a scorer given twice: %s", res.Body)
	}
	// Not finite, or a weight without its scorer.
	res = admin.PostForm("/evaluations/runs", form([]string{"judge", ""}, []string{"NaN", "2"})).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-formula-0">The weight must be a number`) || !strings.Contains(res.Body, `id="err-formula-1">Choose the scorer`) {
		t.Errorf("NaN and a weight without a scorer: %s", res.Body)
	}
	// "Add a scorer" without a script: one row more than the form had.
	res = admin.PostForm("/evaluations/runs", url.Values{"formula_scorer": {"judge", "", ""}, "formula_weight": {"1", "", ""},
		"formula_add": {"1"}}).Must(t, http.StatusOK)
	if n := rows(res.Body); n != 4 {
		t.Errorf("%d rows after adding one to three", n)
	}
	if rows(admin.Get("/evaluations").Must(t, http.StatusOK).Body) != 3 {
		t.Error("the form does not open with its row and two blank ones")
	}

	// Accepted: the rows, in order, are the run's formula; the scorers
	// weighed but not ticked are scored.
	res = admin.PostForm("/evaluations/runs", form([]string{"reference_f1", "", "concise"}, []string{"0.7", "", "-0.3"})).Must(t, http.StatusSeeOther)
	loc := res.Header.Get("Location")
	if !strings.HasPrefix(loc, "/evaluations/runs/") {
		t.Fatalf("started, sent to %q", loc)
	}
	var run evaluationDoc
	s.API(key, http.MethodGet, "/api/evaluations/"+strings.TrimPrefix(loc, "/evaluations/runs/"), nil).Must(t, http.StatusOK).JSON(t, &run)
	if run.Summary.Formula != "R = 0.7·reference_f1 − 0.3·concise" {
		t.Errorf("the run's formula %q", run.Summary.Formula)
	}
	var scored string
	if err := s.Pool.QueryRow(context.Background(), `SELECT config->>'scorers' FROM evaluation_runs WHERE id = $1`, run.ID).Scan(&scored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(scored, "reference_f1") || !strings.Contains(scored, "concise") {
		t.Errorf("the run scores %s", scored)
	}
	// And the form with the version chosen writes the default formula's
	// rows out too.
	if body := admin.Get("/evaluations").Body; !strings.Contains(body, `<code id="formula-written">R = 1·judge</code>`) {
		t.Error("the form does not write its formula out")
	}
}

// A run's items read as a report: one column per scorer, headed by its
// name in words; ordered by reward either way with the items not scored
// last; narrowed to regressions against production (with production's
// reward beside each) or to the items not scored. A run with more
// scorers than fit shows them as chips.
func TestEvaluationRunReport(t *testing.T) {
	t.Parallel()
	f := newEvalFixture(t, webtest.Options{})
	s := f.s
	ctx := context.Background()
	s.User(f.seeded.OrgID, "vi@demo.test", "viewer")
	viewer := s.SignedIn("vi@demo.test")
	run := "/evaluations/runs/" + f.runID
	itemsOf := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<tr class="run-item" data-item="[^"]+"[^>]*>\s*<td><code>[^<]*</code></td>\s*<td class="qa"><div class="qa-question"><span class="fold-text">([^<]*)</span>`).
			FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	body := viewer.Get(run).Must(t, http.StatusOK).Body
	for _, want := range []string{`<th class="num score" title="Word overlap with the curated answer`, `data-scorer="reference_f1">Reference F1</th>`,
		`data-filter="all"`, `data-filter="invalid"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if strings.Contains(body, `data-filter="regressions"`) {
		t.Error("regressions offered with no production run to compare with")
	}
	refund, dose, reset := "How do I get a refund for my annual plan?", "Can I double my dose?", "How do I reset my password?"
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?sort=reward", []string{dose, refund, reset}},
		{"?sort=-reward", []string{refund, dose, reset}},
		{"?show=invalid", []string{reset}},
		{"?show=invalid&sort=-reward", []string{reset}},
	} {
		body := viewer.Get(run+tc.query).Must(t, http.StatusOK).Body
		if got := itemsOf(body); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s lists %q, want %q", tc.query, got, tc.want)
		}
	}
	if body := viewer.Get(run + "?sort=reward").Body; !strings.Contains(body, `aria-sort="ascending"`) || !strings.Contains(body, `href="`+run+`?sort=-reward#run-items"`) {
		t.Errorf("sorted by reward, the header does not say so or turn it")
	}

	// Production: an earlier version with its own run, better on the two
	// rewarded items.
	prod, err := s.App.Services.Models.Register(ctx, audit.System, f.seeded.OrgID, models.NewVersion{Name: "support", Version: "1.0.0",
		ModelID: "/adapters/support-1.0.0", BaseModel: "meta-llama/Llama-3.1-8B-Instruct", Kind: models.KindLoRA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id) VALUES ($1, $2, 'production', $3)`,
		f.seeded.OrgID, prod.RegisteredModelID, prod.ID); err != nil {
		t.Fatal(err)
	}
	var baseRun string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, total, done, mean_reward, finished_at)
		VALUES ($1, $2, $3, 'succeeded', 3, 3, 0.9, now() - interval '1 hour') RETURNING id::text`, f.seeded.OrgID, f.goldenSet, prod.ID).Scan(&baseRun); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, query, answer, reward)
		SELECT $1, source_id, split, query, 'Production says so.', 0.9 FROM evaluation_items WHERE run_id = $2`, baseRun, f.runID); err != nil {
		t.Fatal(err)
	}
	// The gate's margin is 0.1: 0.7686 and 0.14 fall more than that below
	// 0.9; the item not scored cannot regress.
	body = viewer.Get(run+"?show=regressions&sort=-reward").Must(t, http.StatusOK).Body
	if got := itemsOf(body); strings.Join(got, "|") != refund+"|"+dose {
		t.Errorf("regressions %q", got)
	}
	if strings.Count(body, "data-regressed") != 2 || !strings.Contains(body, "production 0.900") ||
		!strings.Contains(body, `data-filter="regressions" aria-current="true">Regressions <span class="num">2</span>`) {
		t.Errorf("the regressions shown: %s", body)
	}

	// Five scorers: chips, one column for them all.
	var wide string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, config, status, total, done, finished_at)
		VALUES ($1, $2, $3, '{}', 'succeeded', 1, 1, now()) RETURNING id::text`, f.seeded.OrgID, f.goldenSet, f.full.ID).Scan(&wide); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, query, answer, scores, reward)
		VALUES ($1, gen_random_uuid(), 'all', 'Q', 'A', '{"a": {"value": 1}, "b": {"value": 0.5}, "chain": {"value": 1}, "risk": {"value": 0}, "refusal": {"value": 0}}', 0.5)`, wide); err != nil {
		t.Fatal(err)
	}
	body = viewer.Get("/evaluations/runs/"+wide).Must(t, http.StatusOK).Body
	if strings.Count(body, `class="score-chip"`) != 5 || strings.Contains(body, `<th class="num score"`) || !strings.Contains(body, `<span class="chip-name">Risky advice</span>`) {
		t.Errorf("five scorers: %s", body)
	}
}
