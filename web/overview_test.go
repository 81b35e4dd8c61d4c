package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

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
