package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/web/webtest"
)

// The seed's requests, in its own words (seeds/004_7a04a8632d962edc.txt's
// tables training_datasets, preference_pairs and ab_test_experiments, and
// seeds/003_8cd6d991c9e5fd8e.txt's POST /api/train), answer 201; Curate
// takes each alias for its own field and answers in its own names.

// approvedItems stores n feedback items and approves them: training
// material an instruction dataset may hold.
func approvedItems(t *testing.T, s *webtest.Server, key string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		var item struct {
			ID string `json:"id"`
		}
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": fmt.Sprintf("How do I check deployment status, case %d?", i),
			"response": "Navigate to Deployments > Status panel.", "feedback_type": "thumbs_up"}).Must(t, http.StatusCreated).JSON(t, &item)
		res := s.Client().Do(http.MethodPatch, "/api/feedback/"+item.ID, strings.NewReader(`{"status":"approved"}`),
			http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "If-Match": {"1"}})
		res.Must(t, http.StatusOK)
		ids = append(ids, item.ID)
	}
	return ids
}

func datasetCount(t *testing.T, s *webtest.Server) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM training_datasets`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// feedback_ids on POST /api/training-datasets: the items become the new
// instruction dataset's members in the same step. A bad item, or items
// given to a dataset of pairs, make no dataset and name the field.
func TestSeedDatasetFeedbackIDs(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "curation", "curator")
	items := approvedItems(t, s, key, 3)

	var d datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "AOMA Support Q4 2025", "description": "Approved answers",
		"dataset_type": "instruction_tuning", "feedback_ids": items}).Must(t, http.StatusCreated).JSON(t, &d)
	if d.Status != "curating" || d.SampleCount != 3 {
		t.Errorf("created %+v; want curating with 3 samples", d)
	}
	var got datasetDoc
	s.API(key, http.MethodGet, "/api/training-datasets/"+d.ID, nil).Must(t, http.StatusOK).JSON(t, &got)
	if got.SampleCount != 3 || got.Status != "curating" {
		t.Errorf("read back %+v", got)
	}

	before := datasetCount(t, s)
	var pending struct {
		ID string `json:"id"`
	}
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_down"}).
		Must(t, http.StatusCreated).JSON(t, &pending)
	var p problemDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "with a pending item", "dataset_type": "instruction_tuning",
		"feedback_ids": []string{items[0], pending.ID}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "feedback_ids[1]" {
		t.Errorf("a pending item named %q", p.fields())
	}
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "pairs", "dataset_type": "dpo", "feedback_ids": items}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "feedback_ids" {
		t.Errorf("feedback for a dpo dataset named %q", p.fields())
	}
	other := approvedItems(t, s, s.APIKey(s.Org("globex"), "g", "curator"), 1)
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "theirs", "dataset_type": "instruction_tuning",
		"feedback_ids": other}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "feedback_ids[0]" {
		t.Errorf("another organisation's item named %q", p.fields())
	}
	if n := datasetCount(t, s); n != before {
		t.Errorf("%d datasets after refusals, want %d", n, before)
	}
}

type pairDoc struct {
	ID          string  `json:"id"`
	AnnotatorID *string `json:"annotator_id"`
	Datasets    []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"datasets"`
	Version int `json:"version"`
}

// dataset_id and annotator_email on POST /api/preference-pairs: the pair
// goes into that dataset in the same step (listed under datasets) and its
// annotator is that user (annotator_id); PATCH takes annotator_email too.
// A dataset or e-mail that is not the organisation's stores nothing.
func TestSeedPairAliases(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "curation", "curator")
	ann := s.User(org, "Ann@acme.test", "curator")
	bob := s.User(org, "bob@acme.test", "curator")
	s.User(s.Org("globex"), "gus@globex.test", "curator")
	var d datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "support-dpo", "dataset_type": "preference_pairs"}).
		Must(t, http.StatusCreated).JSON(t, &d)

	seed := map[string]any{"dataset_id": d.ID, "query": "How do I check deployment status?",
		"chosen_response": "Navigate to Deployments > Status panel...", "rejected_response": "Click on the deployments tab.",
		"preference_strength": 0.8, "context_documents": []map[string]any{{"title": "Deployments guide"}},
		"annotator_email": "ann@ACME.test", "annotation_notes": "The chosen one names the panel."}
	var pair pairDoc
	s.API(key, http.MethodPost, "/api/preference-pairs", seed).Must(t, http.StatusCreated).JSON(t, &pair)
	if pair.AnnotatorID == nil || *pair.AnnotatorID != ann.String() {
		t.Errorf("annotator %v, want %s", pair.AnnotatorID, ann)
	}
	if len(pair.Datasets) != 1 || pair.Datasets[0].ID != d.ID || pair.Datasets[0].Status != "curating" || pair.Datasets[0].Name != "support-dpo" {
		t.Errorf("datasets %+v", pair.Datasets)
	}
	var got datasetDoc
	s.API(key, http.MethodGet, "/api/training-datasets/"+d.ID, nil).Must(t, http.StatusOK).JSON(t, &got)
	if got.SampleCount != 1 {
		t.Errorf("the dataset holds %d pairs, want 1", got.SampleCount)
	}

	res := s.Client().Do(http.MethodPatch, "/api/preference-pairs/"+pair.ID, strings.NewReader(`{"annotator_email":"bob@acme.test"}`),
		http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "If-Match": {"1"}}).Must(t, http.StatusOK)
	res.JSON(t, &pair)
	if pair.AnnotatorID == nil || *pair.AnnotatorID != bob.String() || pair.Version != 2 {
		t.Errorf("after PATCH: annotator %v version %d, want %s at 2", pair.AnnotatorID, pair.Version, bob)
	}

	var sft datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "sft", "dataset_type": "instruction_tuning"}).
		Must(t, http.StatusCreated).JSON(t, &sft)
	var theirs datasetDoc
	s.API(s.APIKey(s.Org("globex"), "g", "curator"), http.MethodPost, "/api/training-datasets", map[string]any{"name": "theirs",
		"dataset_type": "dpo"}).Must(t, http.StatusCreated).JSON(t, &theirs)
	for _, tc := range []struct {
		change map[string]any
		field  string
	}{
		{map[string]any{"annotator_email": "gus@globex.test"}, "annotator_email"},
		{map[string]any{"annotator_email": "nobody@acme.test"}, "annotator_email"},
		{map[string]any{"dataset_id": sft.ID}, "dataset_id"},
		{map[string]any{"dataset_id": theirs.ID}, "dataset_id"},
		{map[string]any{"annotator_email": "ann@acme.test", "annotator_id": ann.String()}, "annotator_email"},
	} {
		body := map[string]any{"query": "Another question?", "chosen_response": "Good.", "rejected_response": "Bad."}
		for k, v := range tc.change {
			body[k] = v
		}
		var p problemDoc
		s.API(key, http.MethodPost, "/api/preference-pairs", body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != tc.field {
			t.Errorf("%v: fields %q, want %s", tc.change, p.fields(), tc.field)
		}
	}
	var pairs int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM preference_pairs WHERE org_id = $1`, org).Scan(&pairs); err != nil || pairs != 1 {
		t.Errorf("%d pairs stored (%v), want the 1 accepted", pairs, err)
	}
}

type seedExperimentDoc struct {
	Key      string     `json:"key"`
	Name     string     `json:"name"`
	Status   string     `json:"status"`
	Metrics  []string   `json:"metrics"`
	StartsAt *time.Time `json:"starts_at"`
	EndsAt   *time.Time `json:"ends_at"`
}

// POST /api/models/ab-test in the seed's words: no key (one is derived from
// the name, numbered when taken, also when five are made at once),
// success_metrics for metrics, start_date and end_date for the planned
// window, answered in Curate's names.
func TestSeedABTest(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("support-v%d", i+2)}).
			Must(t, http.StatusCreated).JSON(t, v)
	}
	start := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	end := start.Add(14 * 24 * time.Hour)
	seed := map[string]any{"name": "Support v2 vs v3", "control_model_id": v1.ID, "treatment_model_id": v2.ID, "traffic_split": 0.5,
		"start_date": start, "end_date": end, "success_metrics": []string{"thumbs_up_rate", "avg_rating"}}
	var e seedExperimentDoc
	s.API(admin, http.MethodPost, "/api/models/ab-test", seed).Must(t, http.StatusCreated).JSON(t, &e)
	if e.Key != "support-v2-vs-v3" || e.Name != "Support v2 vs v3" || e.Status != "draft" || strings.Join(e.Metrics, ",") != "thumbs_up_rate,avg_rating" ||
		e.StartsAt == nil || !e.StartsAt.Equal(start) || e.EndsAt == nil || !e.EndsAt.Equal(end) {
		t.Errorf("created %+v", e)
	}
	seed["success_metrics"] = "avg_rating"
	s.API(admin, http.MethodPost, "/api/models/ab-test", seed).Must(t, http.StatusCreated).JSON(t, &e)
	if e.Key != "support-v2-vs-v3-2" || strings.Join(e.Metrics, ",") != "avg_rating" {
		t.Errorf("the second of the name: %+v", e)
	}
	keys := make([]string, 5)
	statuses := together(5, func(i int) int {
		var e seedExperimentDoc
		res := s.API(admin, http.MethodPost, "/api/models/ab-test", seed)
		if res.Status == http.StatusCreated {
			res.JSON(t, &e)
			keys[i] = e.Key
		}
		return res.Status
	})
	seen := map[string]bool{}
	for i, k := range keys {
		if statuses[i] != http.StatusCreated || seen[k] || !strings.HasPrefix(k, "support-v2-vs-v3-") {
			t.Errorf("five at once: statuses %v, keys %v; want five new keys", statuses, keys)
			break
		}
		seen[k] = true
	}

	for _, tc := range []struct {
		change map[string]any
		fields string
	}{
		{map[string]any{"metrics": []string{"avg_rating"}}, "success_metrics"},
		{map[string]any{"success_metrics": []string{"vibes"}}, "success_metrics[0]"},
		{map[string]any{"success_metrics": map[string]any{"primary": 1}}, "success_metrics"},
		{map[string]any{"end_date": start.Add(-time.Hour)}, "end_date"},
		{map[string]any{"name": "", "start_date": nil}, "key"},
	} {
		body := map[string]any{}
		for k, v := range seed {
			body[k] = v
		}
		for k, v := range tc.change {
			body[k] = v
		}
		var p problemDoc
		s.API(admin, http.MethodPost, "/api/models/ab-test", body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != tc.fields {
			t.Errorf("%v: fields %q, want %s", tc.change, p.fields(), tc.fields)
		}
	}
}

// trainServer starts Curate with workers whose local trainer is the fake
// (env VARS... trainertest run CONFIG) and the datasets' own versions as
// what jobs train on.
func trainServer(t *testing.T, env ...string) *webtest.Server {
	t.Helper()
	command := strings.Join(append(append([]string{"env"}, env...), fakeTrainer(t), "run"), " ")
	models := t.TempDir()
	return webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *cfgT) {
		c.TrainerCommand, c.FineTunePoll, c.FineTuneBudgetUSD, c.GPUSlots, c.ModelsDir = command, 20*time.Millisecond, 100, 1, models
	}})
}

// frozen makes a dataset of the type with the members and freezes it,
// returning its version's id.
func frozen(t *testing.T, s *webtest.Server, key, name, typ, baseModel string, members []string) string {
	t.Helper()
	var d datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": name, "dataset_type": typ, "base_model": baseModel}).
		Must(t, http.StatusCreated).JSON(t, &d)
	s.API(key, http.MethodPost, "/api/training-datasets/"+d.ID+"/members", map[string]any{"add": members}).Must(t, http.StatusOK)
	var out struct {
		Current struct {
			ID string `json:"id"`
		} `json:"current_version"`
	}
	s.API(key, http.MethodPatch, "/api/training-datasets/"+d.ID, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &out)
	return out.Current.ID
}

// The IRS design's smoke request, POST /api/train {"stage": "IRS",
// "n_iterations": 1, "n_questions": 8}, names no dataset: it trains the
// organisation's newest frozen version that passed validation, the answer
// and the status say which, and the job's page says it was chosen. A DPO
// request skips the newer chat versions for the newest one of pairs. An
// organisation with no frozen version is told to freeze one.
func TestSeedTrainWithoutDataset(t *testing.T) {
	t.Parallel()
	s := trainServer(t)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	admin := s.APIKey(org, "ops", "admin")
	model := localModel(t, s)

	var p problemDoc
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "IRS", "n_iterations": 1, "n_questions": 8}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if !strings.HasPrefix(p.fields(), "dataset_version_id") || !strings.Contains(p.Errors[0].Message, "freeze one") {
		t.Errorf("no frozen version: %+v", p)
	}

	var pairIDs []string
	for i := range 4 {
		var pair struct {
			ID string `json:"id"`
		}
		s.API(admin, http.MethodPost, "/api/preference-pairs", map[string]any{"query": fmt.Sprintf("Where is the status panel, %d?", i),
			"chosen_response": "Under Deployments.", "rejected_response": "Nowhere."}).Must(t, http.StatusCreated).JSON(t, &pair)
		pairIDs = append(pairIDs, pair.ID)
	}
	prefs := frozen(t, s, admin, "support-dpo", "dpo", model, pairIDs)
	// openai_chat, which IRS trains on, takes 10 examples at least.
	chats := frozen(t, s, admin, "support-sft", "instruction_tuning", model, approvedItems(t, s, admin, 10))
	// The newest version fails validation (4 examples): it is passed over.
	frozen(t, s, admin, "support-short", "instruction_tuning", model, approvedItems(t, s, admin, 4))

	var started struct {
		JobID            string `json:"job_id"`
		DatasetVersionID string `json:"dataset_version_id"`
		Dataset          string `json:"dataset"`
	}
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "IRS", "n_iterations": 1, "n_questions": 8}).
		Must(t, http.StatusCreated).JSON(t, &started)
	if started.JobID == "" || started.DatasetVersionID != chats || started.Dataset != "support-sft v1" {
		t.Errorf("IRS started %+v; want the newest version, support-sft v1 (%s)", started, chats)
	}
	st := waitTrain(t, s, admin, started.JobID)
	if st.Detail.TotalIterations != 1 {
		t.Errorf("IRS ran %d iterations, want 1", st.Detail.TotalIterations)
	}
	var status struct {
		DatasetVersionID string `json:"dataset_version_id"`
		Dataset          string `json:"dataset"`
	}
	s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &status)
	if status.DatasetVersionID != chats || status.Dataset != "support-sft v1" {
		t.Errorf("status names %+v", status)
	}
	page := s.SignedIn("ada@acme.test").Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK).Body
	if !strings.Contains(page, "No dataset version was named: training on support-sft v1") {
		t.Error("the job's page does not say which version it chose")
	}

	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "DPO", "model_id": model}).Must(t, http.StatusCreated).JSON(t, &started)
	if started.DatasetVersionID != prefs {
		t.Errorf("DPO started on %s (%s); want the pairs' version %s", started.DatasetVersionID, started.Dataset, prefs)
	}
	waitTrain(t, s, admin, started.JobID)
}

// On a machine that cannot train, the same request is refused naming only
// what the machine lacks.
func TestSeedTrainRefusedForWhatTheMachineLacks(t *testing.T) {
	t.Parallel()
	s := trainServer(t, "FAKE_TRAINER_MODE=no-torch")
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	model := localModel(t, s)
	frozen(t, s, admin, "support-sft", "instruction_tuning", model, approvedItems(t, s, admin, 10))
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "IRS", "n_iterations": 1, "n_questions": 8}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, "no live GPU worker has torch") {
		t.Errorf("refused with %+v; want one message, that torch is missing", p.Errors)
	}
}
