package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	evaluation "github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/web/webtest"
)

// A run whose worker was killed reads as running, and its page offers an
// admin Resume, saying why; resuming puts its job back in the queue. A
// run whose worker beats offers nothing, and a viewer is never offered
// it.
func TestResumeStalledEvaluationPage(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	set, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	cand := chattest.New(func(r chattest.Request) chattest.Reply { return chattest.Reply{Content: "About: " + r.Last()} })
	t.Cleanup(cand.Close)
	svc := s.App.Services
	if _, err := svc.Endpoints.Create(ctx, audit.System, seeded.OrgID, endpoints.NewEndpoint{Name: "cand", BaseURL: cand.URL + "/v1", Model: "cand"}); err != nil {
		t.Fatal(err)
	}
	run, err := svc.Eval.Start(ctx, audit.System, seeded.OrgID, evaluation.Config{GoldenSetVersionID: set.ID, Candidate: evaluation.Candidate{Endpoint: "cand"},
		Scorers: []scorers.Config{{Preset: "reference_f1"}}, RewardFormula: json.RawMessage(`{"reference_f1": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	s.User(seeded.OrgID, "ad@demo.test", "admin")
	s.User(seeded.OrgID, "vi@demo.test", "viewer")
	admin, viewer := s.SignedIn("ad@demo.test"), s.SignedIn("vi@demo.test")
	page := "/evaluations/runs/" + run.ID.String()
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, sql, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE evaluation_runs SET status = 'running' WHERE id = $1`)
	exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '5 seconds' WHERE id = (SELECT river_job_id FROM evaluation_runs WHERE id = $1)`)
	if body := admin.Get(page).Must(t, http.StatusOK).Body; strings.Contains(body, `id="resume-form"`) {
		t.Error("a run whose worker has just started is offered Resume")
	}
	admin.PostForm(page+"/resume", url.Values{}).Must(t, http.StatusConflict)

	exec(`UPDATE river_job SET attempted_at = now() - interval '3 minutes' WHERE id = (SELECT river_job_id FROM evaluation_runs WHERE id = $1)`)
	body := admin.Get(page).Must(t, http.StatusOK).Body
	if !strings.Contains(body, `id="resume-form"`) || !strings.Contains(body, `id="run-stalled"`) {
		t.Errorf("a stalled run's page: %s", body)
	}
	if strings.Contains(viewer.Get(page).Must(t, http.StatusOK).Body, `id="resume-form"`) {
		t.Error("a viewer is offered Resume")
	}
	viewer.PostForm(page+"/resume", url.Values{}).Must(t, http.StatusForbidden)
	admin.PostForm(page+"/resume", url.Values{}).Must(t, http.StatusSeeOther)
	var status, jobState string
	if err := s.Pool.QueryRow(ctx, `SELECT r.status::text, j.state::text FROM evaluation_runs r JOIN river_job j ON j.id = r.river_job_id WHERE r.id = $1`,
		run.ID).Scan(&status, &jobState); err != nil || status != "queued" || jobState != "available" {
		t.Errorf("after resuming: run %s, job %s (%v)", status, jobState, err)
	}
	assertAudit(t, s, "evaluation.resume")
}
