package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/curate/curate/handlers"
	"github.com/curate/curate/web"
	"github.com/curate/curate/web/webtest"
)

// Every /api route refuses a query parameter it does not take with a 400
// problem naming it: a misspelt filter never silently widens a list. The
// routes come from the routes table, so a route added later is held to the
// same rule.
func TestAPIRefusesUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	admin := s.APIKey(s.Org("acme"), "ops", "admin")
	id := uuid.NewString()
	n := 0
	for _, r := range web.Routes(&handlers.Handlers{}) {
		if !strings.HasPrefix(r.Path, "/api/") {
			continue
		}
		n++
		path := strings.NewReplacer(":id", id, ":eid", id, ":name", "train.jsonl").Replace(r.Path)
		h := http.Header{"Authorization": {"Bearer " + admin}, "Content-Type": {"application/json"}}
		res := s.Client().Do(r.Method, path+"?bogus=1", strings.NewReader("{}"), h)
		var p problemDoc
		if res.Status != http.StatusBadRequest || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s %s?bogus=1: %d %s, want a 400 problem", r.Method, r.Path, res.Status, res.Body)
			continue
		}
		res.JSON(t, &p)
		if p.fields() != "bogus" {
			t.Errorf("%s %s?bogus=1 names %q, want bogus", r.Method, r.Path, p.fields())
		}
	}
	if n < 25 {
		t.Fatalf("only %d API routes checked", n)
	}
	// What a route takes still works beside it.
	res := s.API(admin, http.MethodGet, "/api/preference-pairs?limit=5&method=manual&colour=red", nil).Must(t, http.StatusBadRequest)
	var p problemDoc
	res.JSON(t, &p)
	if p.fields() != "colour" {
		t.Errorf("fields %q, want colour alone", p.fields())
	}
	s.API(admin, http.MethodGet, "/api/preference-pairs?limit=5&method=manual", nil).Must(t, http.StatusOK)
}

// newPair stores a pair through the API and returns it as created.
func newPair(t *testing.T, s *webtest.Server, key, query, chosen string) pairObject {
	t.Helper()
	var p pairObject
	s.API(key, http.MethodPost, "/api/preference-pairs", map[string]any{
		"query": query, "chosen_response": chosen, "rejected_response": "Ask someone else.",
	}).Must(t, http.StatusCreated).JSON(t, &p)
	return p
}

// Lists answer each row in the shape GET /:id answers it, filter by the
// relations a user expects (pairs and feedback by dataset), and refuse a
// cursor from another list.
func TestAPIListsShowObjectsAndFilterByDataset(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "curation", "curator")
	other := s.APIKey(s.Org("globex"), "theirs", "curator")

	long := strings.Repeat("Open Settings, then Billing. ", 20) // 580 characters
	var made []pairObject
	for i, q := range []string{"Cancel?", "Refund?", "Upgrade?", "Invoice?"} {
		chosen := "Settings → Billing."
		if i == 1 {
			chosen = long
		}
		made = append(made, newPair(t, s, key, q, chosen))
	}
	newDataset := func(key, name, typ string) string {
		var d datasetDoc
		s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": name, "dataset_type": typ}).Must(t, http.StatusCreated).JSON(t, &d)
		return d.ID
	}
	a, b := newDataset(key, "A", "dpo"), newDataset(key, "B", "dpo")
	theirs := newDataset(other, "Theirs", "dpo")
	s.API(key, http.MethodPost, "/api/training-datasets/"+a+"/members", map[string]any{"add": []string{made[0].ID, made[1].ID}}).Must(t, http.StatusOK)
	s.API(key, http.MethodPost, "/api/training-datasets/"+b+"/members", map[string]any{"add": []string{made[1].ID, made[2].ID}}).Must(t, http.StatusOK)

	type pairList struct {
		Data       []pairObject `json:"data"`
		NextCursor *string      `json:"next_cursor"`
	}
	var got pairList
	s.API(key, http.MethodGet, "/api/preference-pairs?dataset_id="+a, nil).Must(t, http.StatusOK).JSON(t, &got)
	if len(got.Data) != 2 || got.NextCursor != nil {
		t.Fatalf("dataset A lists %d pairs (next %v), want its 2 and no next_cursor", len(got.Data), got.NextCursor)
	}
	for _, row := range got.Data {
		var one pairObject
		s.API(key, http.MethodGet, "/api/preference-pairs/"+row.ID, nil).Must(t, http.StatusOK).JSON(t, &one)
		if mustJSON(t, row) != mustJSON(t, one) {
			t.Errorf("list row %s differs from GET /:id %s", mustJSON(t, row), mustJSON(t, one))
		}
		if row.ID != made[0].ID && row.ID != made[1].ID {
			t.Errorf("dataset A lists pair %s (%q), not one of its members", row.ID, row.Query)
		}
	}
	// The full texts, unless a preview is asked for.
	for _, row := range got.Data {
		if row.ID == made[1].ID && row.Chosen != long {
			t.Errorf("chosen_response cut to %d characters without preview=1", len(row.Chosen))
		}
	}
	s.API(key, http.MethodGet, "/api/preference-pairs?preview=1&dataset_id="+b, nil).Must(t, http.StatusOK).JSON(t, &got)
	if len(got.Data) != 2 {
		t.Fatalf("dataset B lists %d pairs, want 2", len(got.Data))
	}
	for _, row := range got.Data {
		if row.ID == made[1].ID && (utf8.RuneCountInString(row.Chosen) != 301 || !strings.HasSuffix(row.Chosen, "…") || !strings.HasPrefix(long, strings.TrimSuffix(row.Chosen, "…"))) {
			t.Errorf("preview of a long answer: %q", row.Chosen)
		}
	}
	// Another organisation's dataset holds none of ours; a malformed id is
	// refused, not ignored.
	s.API(key, http.MethodGet, "/api/preference-pairs?dataset_id="+theirs, nil).Must(t, http.StatusOK).JSON(t, &got)
	if len(got.Data) != 0 {
		t.Errorf("another organisation's dataset lists %d of our pairs", len(got.Data))
	}
	var p problemDoc
	s.API(key, http.MethodGet, "/api/preference-pairs?dataset_id=all", nil).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "dataset_id" {
		t.Errorf("fields %q, want dataset_id", p.fields())
	}

	// Feedback by dataset: approved items in an instruction-tuning set.
	var items []feedbackObject
	for _, q := range []string{"Where is my order?", "Opening hours?", "Do you ship abroad?"} {
		var it feedbackObject
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": q, "response": "Let me check.", "feedback_type": "thumbs_up"}).
			Must(t, http.StatusCreated).JSON(t, &it)
		items = append(items, it)
	}
	for _, it := range items[:2] {
		s.Client().Do(http.MethodPatch, "/api/feedback/"+it.ID, strings.NewReader(`{"status":"approved"}`),
			http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "If-Match": {`W/"1"`}}).Must(t, http.StatusOK)
	}
	sft := newDataset(key, "SFT", "instruction_tuning")
	s.API(key, http.MethodPost, "/api/training-datasets/"+sft+"/members", map[string]any{"add": []string{items[0].ID, items[1].ID}}).Must(t, http.StatusOK)
	var fl struct {
		Data []feedbackObject `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/feedback?dataset_id="+sft, nil).Must(t, http.StatusOK).JSON(t, &fl)
	ids := []string{}
	for _, it := range fl.Data {
		ids = append(ids, it.ID)
		if it.Query == "" || it.Response != "Let me check." || it.Status != "approved" {
			t.Errorf("feedback row %+v is not the whole item", it)
		}
	}
	slices.Sort(ids)
	want := []string{items[0].ID, items[1].ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("dataset lists feedback %v, want %v", ids, want)
	}

	// A cursor belongs to its list.
	var page pairList
	s.API(key, http.MethodGet, "/api/preference-pairs?limit=1", nil).Must(t, http.StatusOK).JSON(t, &page)
	if page.NextCursor == nil {
		t.Fatal("no next_cursor on the first of 4 pages")
	}
	cursor := url.QueryEscape(*page.NextCursor)
	s.API(key, http.MethodGet, "/api/preference-pairs?limit=1&cursor="+cursor, nil).Must(t, http.StatusOK)
	for _, list := range []string{"/api/feedback", "/api/training-datasets", "/api/fine-tuning/jobs"} {
		var p problemDoc
		s.API(key, http.MethodGet, list+"?cursor="+cursor, nil).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != "cursor" {
			t.Errorf("%s with a pairs cursor: fields %q, want cursor", list, p.fields())
		}
	}

	// If-Match: a version number, or a refusal naming it; a stale one is
	// a 409 carrying the object as it is now.
	patch := func(ifMatch string) webtest.Response {
		return s.Client().Do(http.MethodPatch, "/api/preference-pairs/"+made[3].ID, strings.NewReader(`{"swap":true}`),
			http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "If-Match": {ifMatch}})
	}
	patch("latest").Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "If-Match" {
		t.Errorf("fields %q, want If-Match", p.fields())
	}
	var conflict struct {
		Current pairObject `json:"current"`
	}
	patch(`W/"9"`).Must(t, http.StatusConflict).JSON(t, &conflict)
	if mustJSON(t, conflict.Current) != mustJSON(t, made[3]) {
		t.Errorf("409 carries %s, want the pair as it is: %s", mustJSON(t, conflict.Current), mustJSON(t, made[3]))
	}
}

type feedbackObject struct {
	ID       string `json:"id"`
	Query    string `json:"query"`
	Response string `json:"response"`
	Status   string `json:"status"`
}

// The seed's own words launch a fine-tune: dataset_id (its newest frozen
// version) and OpenAI's n_epochs, no base model. The job reports n_epochs
// back; the list filters by dataset and status; two spellings of one
// setting, an unfrozen dataset and an unknown one are refused naming the
// field, and nothing is stored.
func TestFineTuneLaunchByDatasetInProviderNames(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTuneBudgetUSD = "sk-test", "http://127.0.0.1:1/v1", 100
	}})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	pairs := storePairs(t, s, org, 12)
	newDataset := func(name string) string {
		var d datasetDoc
		s.API(admin, http.MethodPost, "/api/training-datasets", map[string]any{"name": name, "dataset_type": "dpo", "export_format": "openai_preference"}).
			Must(t, http.StatusCreated).JSON(t, &d)
		s.API(admin, http.MethodPost, "/api/training-datasets/"+d.ID+"/members", map[string]any{"add": pairs}).Must(t, http.StatusOK)
		return d.ID
	}
	frozen, draft := newDataset("Support DPO"), newDataset("Not frozen")
	var d datasetDoc
	s.API(admin, http.MethodPatch, "/api/training-datasets/"+frozen, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &d)
	var withVersion struct {
		Current struct {
			ID string `json:"id"`
		} `json:"current_version"`
	}
	s.API(admin, http.MethodGet, "/api/training-datasets/"+frozen, nil).Must(t, http.StatusOK).JSON(t, &withVersion)

	type jobDoc struct {
		ID               string             `json:"id"`
		Status           string             `json:"status"`
		BaseModel        string             `json:"base_model"`
		DatasetVersionID string             `json:"dataset_version_id"`
		Hyperparameters  map[string]float64 `json:"hyperparameters"`
	}
	var job jobDoc
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", rawJSON(`{"dataset_id": "`+frozen+`", "provider": "openai", "method": "dpo", "hyperparameters": {"n_epochs": 1}}`)).
		Must(t, http.StatusCreated).JSON(t, &job)
	if job.DatasetVersionID != withVersion.Current.ID || job.BaseModel != ftMini || len(job.Hyperparameters) != 1 || job.Hyperparameters["n_epochs"] != 1 {
		t.Fatalf("launched %+v, want version %s, model %s, hyperparameters {n_epochs: 1}", job, withVersion.Current.ID, ftMini)
	}
	var again jobDoc
	s.API(admin, http.MethodGet, "/api/fine-tuning/jobs/"+job.ID, nil).Must(t, http.StatusOK).JSON(t, &again)
	if again.Hyperparameters["n_epochs"] != 1 || len(again.Hyperparameters) != 1 {
		t.Errorf("GET reports hyperparameters %v, want {n_epochs: 1}", again.Hyperparameters)
	}

	var list struct {
		Data []jobDoc `json:"data"`
	}
	s.API(admin, http.MethodGet, "/api/fine-tuning/jobs?status=pending&dataset_id="+frozen, nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != job.ID || list.Data[0].Hyperparameters["n_epochs"] != 1 {
		t.Errorf("jobs of the dataset: %+v", list.Data)
	}
	for _, q := range []string{"dataset_id=" + draft, "status=succeeded&dataset_id=" + frozen} {
		s.API(admin, http.MethodGet, "/api/fine-tuning/jobs?"+q, nil).Must(t, http.StatusOK).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Errorf("?%s lists %d jobs, want none", q, len(list.Data))
		}
	}

	for _, bad := range []struct{ body, field, says string }{
		{`{"dataset_id": "` + frozen + `", "provider": "openai", "method": "dpo", "hyperparameters": {"n_epochs": 1, "epochs": 2}}`,
			"hyperparameters.n_epochs", `same hyperparameter as "epochs"`},
		{`{"dataset_id": "` + draft + `", "provider": "openai", "method": "dpo"}`, "dataset_id", "no frozen version"},
		{`{"dataset_id": "` + uuid.NewString() + `", "provider": "openai", "method": "dpo"}`, "dataset_id", "no such dataset"},
		{`{"dataset_id": "` + frozen + `", "provider": "openai", "method": "dpo", "hyperparameters": {"n_epochs": 80}}`,
			"hyperparameters.n_epochs", "from 1 to 50"},
		{`{"dataset_id": "` + frozen + `", "provider": "openai", "method": "dpo", "hyperparameters": {"epochCount": 2}}`,
			"hyperparameters.epochCount", "n_epochs"},
	} {
		res := s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", rawJSON(bad.body)).Must(t, http.StatusUnprocessableEntity)
		var p struct {
			Errors []struct{ Field, Message string } `json:"errors"`
		}
		if err := json.Unmarshal([]byte(res.Body), &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Errors) != 1 || p.Errors[0].Field != bad.field || !strings.Contains(p.Errors[0].Message, bad.says) {
			t.Errorf("%s: %s, want one error on %s saying %q", bad.body, res.Body, bad.field, bad.says)
		}
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM fine_tuning_jobs").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d jobs stored (%v), want the one launched", n, err)
	}
}
