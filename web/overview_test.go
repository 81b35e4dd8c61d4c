package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/web/webtest"
)

// The start page counts the work waiting, each count a link to the list
// that holds it: the user's assignments, the queue by status, datasets
// frozen but not exported, unfinished fine-tuning jobs and open alerts.
// Another organisation's work is not counted, and with nothing waiting
// every card says so.
func TestOverviewCountsAndLinks(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	acme, other := s.Org("acme"), s.Org("other")
	me := s.User(acme, "cu@acme.test", "curator")
	s.User(acme, "vi@acme.test", "viewer")
	colleague := s.User(acme, "co@acme.test", "curator")
	key, otherKey := s.APIKey(acme, "k", "curator"), s.APIKey(other, "k", "curator")
	c := s.SignedIn("cu@acme.test")

	// Nothing yet: every card has its empty state.
	empty := c.Get("/").Must(t, http.StatusOK).Body
	for _, want := range []string{"Nothing is assigned to you.", "No feedback yet.", "No frozen dataset is waiting for an export.",
		"No job is running.", "No open alerts."} {
		if !strings.Contains(empty, want) {
			t.Errorf("the empty overview lacks %q", want)
		}
	}

	ids := map[string]uuid.UUID{}
	for _, q := range []string{"a", "b", "c", "d", "e", "f"} {
		var fb struct {
			ID uuid.UUID `json:"id"`
		}
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Question " + q + "?", "response": "Answer.", "feedback_type": "thumbs_up"}).
			Must(t, http.StatusCreated).JSON(t, &fb)
		ids[q] = fb.ID
	}
	s.API(otherKey, http.MethodPost, "/api/feedback", map[string]any{"query": "Elsewhere?", "response": "Yes.", "feedback_type": "thumbs_up"}).Must(t, http.StatusCreated)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Mine: a pending, a needs-correction and an approved item; one of the
	// colleague's.
	exec(`UPDATE feedback SET assignee_id = $1 WHERE id = ANY($2)`, me, []uuid.UUID{ids["a"], ids["b"], ids["c"]})
	exec(`UPDATE feedback SET assignee_id = $1 WHERE id = $2`, colleague, ids["d"])
	exec(`UPDATE feedback SET status = 'needs_correction' WHERE id = $1`, ids["b"])
	exec(`UPDATE feedback SET status = 'approved' WHERE id = ANY($1)`, []uuid.UUID{ids["c"], ids["e"]})
	for org, statuses := range map[uuid.UUID][]string{acme: {"ready", "ready", "exported", "draft"}, other: {"ready"}} {
		for _, st := range statuses {
			exec(`INSERT INTO training_datasets (org_id, name, dataset_type, status, export_format) VALUES ($1, 'd', 'dpo', $2, 'openai_preference')`, org, st)
		}
	}
	for org, statuses := range map[uuid.UUID][]string{acme: {"running", "uploading", "succeeded", "failed"}, other: {"running"}} {
		for _, st := range statuses {
			exec(`INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind, provider, base_model, method, export_format,
				status, train_examples, estimated_tokens, estimated_epochs, price_per_million, price_date, estimated_cost)
				VALUES ($1, gen_random_uuid(), 'd v1', 'preference', 'openai', 'gpt-4.1-mini', 'dpo', 'openai_preference', $2, 10, 1000, 1, 1, '2025-01-01', 1)`, org, st)
		}
	}
	for i, a := range []struct {
		org                 uuid.UUID
		resolved, dismissed bool
	}{{acme, false, false}, {acme, true, false}, {acme, false, true}, {other, false, false}} {
		exec(`INSERT INTO alerts (org_id, kind, severity, dedup_key, title, message, opened_at, last_seen_at, resolved_at, dismissed_at)
			VALUES ($1, 'safety', 'bad', $2, 'Safety reports', 'Two reports.', now(), now(),
			        CASE WHEN $3 THEN now() END, CASE WHEN $4 THEN now() END)`, a.org, "k"+string(rune('0'+i)), a.resolved, a.dismissed)
	}

	home := c.Get("/").Must(t, http.StatusOK).Body
	card := func(id string) string {
		return regexpFind(t, `(?s)<section class="card" id="`+id+`">(.*?)</section>`, home)
	}
	mine := card("card-mine")
	for _, want := range []string{`href="/feedback?assignee=` + me.String() + `"`, `<span class="num">2</span> items wait for your review`, "3 items assigned to you in all."} {
		if !strings.Contains(mine, want) {
			t.Errorf("my assignments card lacks %q:\n%s", want, mine)
		}
	}
	queue := card("card-queue")
	for status, n := range map[string]string{"pending": "3", "needs_correction": "1", "approved": "2", "rejected": "0", "corrected": "0"} {
		want := `<li data-status="` + status + `"><a href="/feedback?status=` + status + `">`
		if !strings.Contains(queue, want) {
			t.Errorf("the queue card has no link for %s:\n%s", status, queue)
		}
		if got := regexpFind(t, `data-status="`+status+`"><a [^>]*>.*?<span class="num">(\d+)</span>`, queue); got != n {
			t.Errorf("queue card: %s %s, want %s", status, got, n)
		}
	}
	if !strings.Contains(queue, ">Needs correction</span>") {
		t.Errorf("the queue card does not name statuses in words:\n%s", queue)
	}
	for id, want := range map[string]string{
		"card-datasets": `<a class="stat" href="/datasets?status=ready"><span class="num">2</span> datasets frozen, not exported yet</a>`,
		"card-jobs":     `<a class="stat" href="/fine-tuning"><span class="num">2</span> jobs not finished yet</a>`,
		"card-alerts":   `<a class="stat" href="/alerts"><span class="num">1</span> open alert</a>`,
	} {
		if got := card(id); !strings.Contains(got, want) {
			t.Errorf("%s: want %s in\n%s", id, want, got)
		}
	}

	// A viewer with nothing assigned sees the organisation's counts and an
	// empty card of their own; every link opens for them.
	v := s.SignedIn("vi@acme.test")
	vh := v.Get("/").Must(t, http.StatusOK).Body
	if !strings.Contains(vh, "Nothing is assigned to you.") || !strings.Contains(vh, `<span class="num">2</span> datasets`) {
		t.Errorf("the viewer's overview:\n%s", vh)
	}
	for _, link := range []string{"/feedback?status=needs_correction", "/datasets?status=ready", "/fine-tuning", "/alerts"} {
		v.Get(link).Must(t, http.StatusOK)
	}
}

// The start page's Models cards: what each alias serves (production
// first), deployments queued or running, running and paused experiments
// with the recommendation or the reason for the pause, and evaluations
// unfinished or failed this week, each a link to its page. Finished work,
// failures older than a week and another organisation's are left out.
func TestOverviewModelCards(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	acme, other := s.Org("acme"), s.Org("other")
	s.User(acme, "vi@acme.test", "viewer")
	c := s.SignedIn("vi@acme.test")

	empty := c.Get("/").Must(t, http.StatusOK).Body
	for _, want := range []string{"No alias names a version yet", "No deployment is under way.", "No experiment is running.",
		"No evaluation is running, and none failed this week."} {
		if !strings.Contains(empty, want) {
			t.Errorf("the empty overview lacks %q", want)
		}
	}

	v1, v2, v3 := seedModelCards(t, s, acme, other)

	home := c.Get("/").Must(t, http.StatusOK).Body
	card := func(id string) string {
		return regexpFind(t, `(?s)<section class="card" id="`+id+`">(.*?)</section>`, home)
	}
	production := card("card-production")
	first, second := strings.Index(production, "production</code>"), strings.Index(production, "candidate</code>")
	if first < 0 || second < 0 || first > second {
		t.Errorf("the production card does not list production, then candidate:\n%s", production)
	}
	for _, want := range []string{`href="/models/versions/` + v1.String() + `"><strong>support</strong> 1.0.0</a>`,
		`href="/models/versions/` + v2.String() + `"><strong>support</strong> 1.1.0</a>`} {
		if !strings.Contains(production, want) {
			t.Errorf("the production card lacks %s:\n%s", want, production)
		}
	}
	if strings.Contains(production, "theirs") {
		t.Error("the production card shows another organisation's model")
	}
	deployments := card("card-deployments")
	if !strings.Contains(deployments, `href="/models/versions/`+v3.String()+`"><strong>support</strong> 1.2.0</a>`) ||
		!strings.Contains(deployments, "to staging on provider") || !strings.Contains(deployments, `data-status="running"`) {
		t.Errorf("the deployments card:\n%s", deployments)
	}
	if strings.Contains(deployments, "candidate") || strings.Contains(deployments, "theirs") {
		t.Errorf("the deployments card shows a finished or another organisation's deployment:\n%s", deployments)
	}
	exps := card("card-experiments")
	for _, want := range []string{`href="/experiments/running-one"><strong>Support a against b</strong>`,
		// No unit yet: the analysis asks for 100 per arm first.
		`<span class="recommendation">Keep running</span>: The smallest arm has 0 units of the 100 wanted before deciding.`,
		`href="/experiments/paused-one"><strong>Support a against c</strong>`, "Paused: Latency is worse in the treatment."} {
		if !strings.Contains(exps, want) {
			t.Errorf("the experiments card lacks %s:\n%s", want, exps)
		}
	}
	if strings.Contains(exps, "Not started") {
		t.Error("the experiments card lists a draft")
	}
	evals := card("card-evaluations")
	for _, want := range []string{"<strong>support 1.2.0</strong> on Golden v1", "12 of 40 items", "The judge budget is spent.",
		"The endpoint answered 500."} {
		if !strings.Contains(evals, want) {
			t.Errorf("the evaluations card lacks %q:\n%s", want, evals)
		}
	}
	if n := strings.Count(evals, "<li "); n != 3 || strings.Contains(evals, "An old failure.") {
		t.Errorf("the evaluations card lists %d runs, want the running, the paused and this week's failure:\n%s", n, evals)
	}
	// Every link of the cards opens for the viewer.
	for _, id := range []string{"card-production", "card-deployments", "card-experiments", "card-evaluations"} {
		for _, l := range links(card(id)) {
			c.Get(l).Must(t, http.StatusOK)
		}
	}
}

// seedModelCards gives org what the Models cards show: versions 1.0.0,
// 1.1.0 and 1.2.0 of "support" (production names the first, candidate
// the second), a deployment of the third to staging under way and one
// finished, experiments running, paused and in draft, and evaluations
// running, paused, failed a day and ten days ago, and finished. other gets
// a model in production and a deployment of its own.
func seedModelCards(t *testing.T, s *webtest.Server, acme, other uuid.UUID) (v1, v2, v3 uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	register := func(org uuid.UUID, name, modelID string) uuid.UUID {
		t.Helper()
		v, err := s.App.Services.Models.Register(ctx, audit.System, org, models.NewVersion{Name: name, ModelID: modelID})
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	v1, v2, v3 = register(acme, "support", "support-a"), register(acme, "support", "support-b"), register(acme, "support", "support-c")
	elsewhere := register(other, "theirs", "theirs-a")
	target, err := s.App.Services.Serving.Create(ctx, audit.System, acme, serving.NewTarget{Name: "provider", Kind: serving.KindOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	alias := func(org, version uuid.UUID, name string) {
		exec(`INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id)
			SELECT org_id, registered_model_id, $3, id FROM model_versions WHERE org_id = $1 AND id = $2`, org, version, name)
	}
	alias(acme, v2, "candidate")
	alias(acme, v1, "production")
	alias(other, elsewhere, "production")
	deploy := func(org, version uuid.UUID, aliasName, status string) {
		exec(`INSERT INTO deployments (org_id, registered_model_id, version_id, target_id, alias, action, status)
			SELECT org_id, registered_model_id, id, $3, $4, 'deploy', $5 FROM model_versions WHERE org_id = $1 AND id = $2`,
			org, version, uuid.NullUUID{UUID: target.ID, Valid: org == acme}, aliasName, status)
	}
	deploy(acme, v3, "staging", "running")
	deploy(acme, v2, "candidate", "succeeded")
	deploy(other, elsewhere, "staging", "queued")

	experiment := func(org uuid.UUID, key, name string, control, treatment uuid.UUID) {
		if _, err := s.App.Services.Experiments.Create(ctx, audit.System, org, experiments.NewExperiment{Key: key, Name: name,
			ControlModelID: control, TreatmentModelID: treatment, Metrics: []string{"thumbs_up_rate"}}); err != nil {
			t.Fatal(err)
		}
	}
	experiment(acme, "running-one", "Support a against b", v1, v2)
	experiment(acme, "paused-one", "Support a against c", v1, v3)
	experiment(acme, "draft-one", "Not started", v2, v3)
	exec(`UPDATE experiments SET status = 'running', started_at = now() WHERE key = 'running-one'`)
	exec(`UPDATE experiments SET status = 'paused', started_at = now(), stop_reason = 'Latency is worse in the treatment.' WHERE key = 'paused-one'`)

	var golden uuid.UUID
	datasetID := newDataset(t, s, acme, "Golden", "instruction_tuning")
	if err := s.Pool.QueryRow(ctx, `INSERT INTO dataset_versions (org_id, dataset_id, number, kind, content_hash, item_count, train_count, validation_count,
		split_strategy, validation_percent, split_seed) SELECT org_id, id, 1, 'sft', 'h', 0, 0, 0, 'random', 0, 0
		FROM training_datasets WHERE id = $1 RETURNING id`, datasetID).Scan(&golden); err != nil {
		t.Fatal(err)
	}
	run := func(version uuid.UUID, status, problem, finished string) {
		exec(`INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, total, done, error, paused_reason, finished_at)
			VALUES ($1, $2, $3, $4::evaluation_status, 40, 12, CASE WHEN $4 = 'failed' THEN $5::text ELSE '' END,
			        CASE WHEN $4 = 'paused' THEN $5::text ELSE '' END, now() - $6::interval)`,
			acme, golden, version, status, problem, finished)
	}
	run(v3, "running", "", "0 s")
	run(v2, "paused", "The judge budget is spent.", "0 s")
	run(v1, "failed", "The endpoint answered 500.", "1 day")
	run(v1, "failed", "An old failure.", "10 days")
	run(v1, "succeeded", "", "0 s")

	return v1, v2, v3
}
