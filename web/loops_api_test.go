package web_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/web/webtest"
)

// The loops API as other programs call it: who may do what, another
// organisation's loop answering 404, refusals naming each field as sent,
// and a run's fields by the contract's names. No worker runs here: a run
// stays at its first step until stopped.
func TestLoopsAPI(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(t)
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) { c.OpenAIAPIKey, c.OpenAIBaseURL = "sk-test", fake.URL() }})
	ctx := context.Background()
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	curator := s.APIKey(org, "widget", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	other := s.APIKey(s.Org("globex"), "theirs", "admin")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "judge", "base_url": "http://127.0.0.1:9/v1", "model": "j"}).
		Must(t, http.StatusCreated)
	res, err := s.App.Services.Feedback.IngestBatch(ctx, org, "api", []feedback.Item{{Query: "Q?", Response: "A.", FeedbackType: "correction", Correction: "B."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, "UPDATE feedback SET status = 'corrected' WHERE id = ANY($1)", res.IDs); err != nil {
		t.Fatal(err)
	}
	d, err := s.App.Services.Datasets.Create(ctx, audit.System, org, datasets.NewDataset{Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{Name: "gold"}, Members: res.IDs})
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.App.Services.Datasets.Freeze(ctx, audit.System, org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Eval.Mark(ctx, audit.System, org, set.ID, "gold", []string{}); err != nil {
		t.Fatal(err)
	}

	// The issue's own example.
	policy := `{"name": "support-weekly", "registered_model": "support", "trigger":
		{"min_new_items": 1000, "filter": {"status": "approved"}}, "dataset": {"name":
		"support-training", "generate": ["same_query", "correction"]}, "training": {"provider":
		"openai", "method": "dpo", "base_model": "gpt-4o-mini-2024-07-18", "hyperparameters":
		{"n_epochs": 1}, "max_cost_usd": 20}, "evaluation": {"golden_set_version_id": "` + set.ID.String() + `", "judge":
		{"endpoint": "judge", "template": "default"}, "reward_formula": {"judge": 1.0}}, "deploy":
		{"target": "openai-prod", "alias": "candidate"}, "promote_alias": "production", "approval": "none"}`
	post := func(key, path, body string) webtest.Response {
		return s.Client().Do(http.MethodPost, path, strings.NewReader(body), http.Header{"Authorization": {"Bearer " + key},
			"Content-Type": {"application/json"}})
	}
	post(curator, "/api/loops", policy).Must(t, http.StatusForbidden)
	var loop map[string]any
	post(admin, "/api/loops", policy).Must(t, http.StatusCreated).JSON(t, &loop)
	id, _ := loop["id"].(string)
	if id == "" || loop["status"] != "active" || loop["name"] != "support-weekly" || loop["promote_alias"] != "production" {
		t.Fatalf("created %v", loop)
	}
	training := loop["training"].(map[string]any)
	if h := training["hyperparameters"].(map[string]any); h["n_epochs"] != 1.0 {
		t.Errorf("hyperparameters as sent: %v", h)
	}
	var got map[string]any
	s.API(viewer, http.MethodGet, "/api/loops/"+id, nil).Must(t, http.StatusOK).JSON(t, &got)
	if got["id"] != id || got["registered_model"] != "support" {
		t.Errorf("read %v", got)
	}
	s.API(other, http.MethodGet, "/api/loops/"+id, nil).Must(t, http.StatusNotFound)
	s.API(other, http.MethodPost, "/api/loops/"+id+"/run", nil).Must(t, http.StatusNotFound)
	s.API(other, http.MethodGet, "/api/loops/"+id+"/runs", nil).Must(t, http.StatusNotFound)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	s.API(other, http.MethodGet, "/api/loops", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Errorf("another organisation lists %v", list.Data)
	}

	// Refusals name each field as the request did.
	var p problemDoc
	post(admin, "/api/loops", `{"name": "x", "colour": "red"}`).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "colour" {
		t.Errorf("an unknown field: %s", p.fields())
	}
	bad := strings.NewReplacer(`"n_epochs": 1`, `"n_epochs": "many"`, `"name": "support-weekly"`, `"name": "support weekly"`,
		`"approval": "none"`, `"approval": "often"`, `"same_query", "correction"`, `"same_query", "astrology"`).Replace(policy)
	post(admin, "/api/loops", bad).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if f := sortedFields(p); f != "approval,dataset.generate[1].method,name,training.hyperparameters.n_epochs" {
		t.Errorf("refused fields %s", f)
	}
	post(admin, "/api/loops", strings.Replace(policy, `"support-training"`, `"support\u0000training"`, 1)).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "dataset.name" {
		t.Errorf("a NUL in the dataset's name: %s", p.fields())
	}
	post(admin, "/api/loops", policy).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "name" {
		t.Errorf("a second loop of the name: %s", p.fields())
	}

	// A run now: 202 with it, in the contract's fields; one at a time.
	s.API(curator, http.MethodPost, "/api/loops/"+id+"/run", nil).Must(t, http.StatusForbidden)
	var run map[string]any
	s.API(admin, http.MethodPost, "/api/loops/"+id+"/run", nil).Must(t, http.StatusAccepted).JSON(t, &run)
	for _, key := range []string{"id", "loop_id", "status", "reason", "steps", "model_version_id"} {
		if _, ok := run[key]; !ok {
			t.Errorf("the run lacks %q: %v", key, run)
		}
	}
	steps := run["steps"].([]any)
	var names []string
	for _, raw := range steps {
		st := raw.(map[string]any)
		for _, key := range []string{"name", "status", "started_at", "finished_at", "detail", "links"} {
			if _, ok := st[key]; !ok {
				t.Errorf("a step lacks %q: %v", key, st)
			}
		}
		names = append(names, st["name"].(string))
	}
	if run["status"] != "running" || run["loop_id"] != id || !slices.Equal(names,
		[]string{"collect", "dataset", "freeze", "train", "register", "stage", "evaluate", "gate", "promote"}) {
		t.Errorf("run %v with steps %v", run["status"], names)
	}
	runID := run["id"].(string)
	s.API(admin, http.MethodPost, "/api/loops/"+id+"/run", nil).Must(t, http.StatusConflict)
	s.API(other, http.MethodGet, "/api/loop-runs/"+runID, nil).Must(t, http.StatusNotFound)
	s.API(viewer, http.MethodGet, "/api/loop-runs/"+runID, nil).Must(t, http.StatusOK)
	s.API(viewer, http.MethodPost, "/api/loop-runs/"+runID+"/stop", nil).Must(t, http.StatusForbidden)
	s.API(admin, http.MethodPost, "/api/loop-runs/"+runID+"/approve", nil).Must(t, http.StatusConflict)
	s.API(admin, http.MethodPost, "/api/loop-runs/"+runID+"/stop", nil).Must(t, http.StatusOK).JSON(t, &run)
	if run["status"] != "stopped" || run["reason"] != "Stopped by ops." {
		t.Errorf("stopped %v: %v", run["status"], run["reason"])
	}
	s.API(admin, http.MethodPost, "/api/loop-runs/"+runID+"/stop", nil).Must(t, http.StatusConflict)

	// Runs list newest first, a page at a time.
	s.API(admin, http.MethodPost, "/api/loops/"+id+"/run", nil).Must(t, http.StatusAccepted)
	var page struct {
		Data []struct {
			ID     string `json:"id"`
			Number int    `json:"number"`
		} `json:"data"`
		Next string `json:"next_cursor"`
	}
	s.API(viewer, http.MethodGet, "/api/loops/"+id+"/runs?limit=1", nil).Must(t, http.StatusOK).JSON(t, &page)
	if len(page.Data) != 1 || page.Data[0].Number != 2 || page.Next == "" {
		t.Fatalf("first page %+v", page)
	}
	next := page.Next
	page.Data, page.Next = nil, ""
	s.API(viewer, http.MethodGet, "/api/loops/"+id+"/runs?limit=1&cursor="+next, nil).Must(t, http.StatusOK).JSON(t, &page)
	if len(page.Data) != 1 || page.Data[0].ID != runID || page.Next != "" {
		t.Errorf("second page %+v", page)
	}
	s.API(viewer, http.MethodGet, "/api/loops/"+id+"/runs?colour=red", nil).Must(t, http.StatusBadRequest)

	// Pausing: the loop says so; a bad status is refused.
	s.API(admin, http.MethodPatch, "/api/loops/"+id, map[string]any{"status": "paused"}).Must(t, http.StatusOK).JSON(t, &got)
	if got["status"] != "paused" {
		t.Errorf("paused %v", got["status"])
	}
	s.API(admin, http.MethodPatch, "/api/loops/"+id, map[string]any{"status": "asleep"}).Must(t, http.StatusUnprocessableEntity)

	// An item's training-data decision.
	var st map[string]any
	s.API(curator, http.MethodPost, "/api/feedback/"+res.IDs[0].String()+"/training-data", map[string]any{"is_training_data": false}).
		Must(t, http.StatusOK).JSON(t, &st)
	if st["is_training_data"] != false || st["decided_by"] != "widget" {
		t.Errorf("decided %v", st)
	}
	var item map[string]any
	s.API(viewer, http.MethodGet, "/api/feedback/"+res.IDs[0].String(), nil).Must(t, http.StatusOK).JSON(t, &item)
	if item["is_training_data"] != false {
		t.Errorf("the item says %v", item["is_training_data"])
	}
	s.API(viewer, http.MethodPost, "/api/feedback/"+res.IDs[0].String()+"/training-data", map[string]any{"is_training_data": true}).
		Must(t, http.StatusForbidden)
	s.API(curator, http.MethodPost, "/api/feedback/"+res.IDs[0].String()+"/training-data", map[string]any{"is_training_data": "yes"}).
		Must(t, http.StatusUnprocessableEntity)
	s.API(other, http.MethodPost, "/api/feedback/"+res.IDs[0].String()+"/training-data", map[string]any{"is_training_data": true}).
		Must(t, http.StatusNotFound)
}

// sortedFields are a refusal's fields in order.
func sortedFields(p problemDoc) string {
	f := strings.Split(p.fields(), ",")
	slices.Sort(f)
	return strings.Join(f, ",")
}
