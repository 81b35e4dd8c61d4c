package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

// The defaults a client written from the seeds relies on: the requests of
// seeds/004_7a04a8632d962edc.txt as it sends them, answered in Curate's
// names.

type seedJobDoc struct {
	ID                 string `json:"id"`
	Provider           string `json:"provider"`
	BaseModel          string `json:"base_model"`
	RequestedBaseModel string `json:"requested_base_model"`
	Method             string `json:"method"`
	DatasetVersionID   string `json:"dataset_version_id"`
	Hyperparameters    map[string]any
	Price              *struct {
		USDPerMillion float64 `json:"usd_per_million_tokens"`
		EffectiveDate string  `json:"effective_date"`
	} `json:"price"`
}

// Seed 004's launch, verbatim but for the dataset's id: no method (the
// dataset's type decides it), and the undated gpt-4o-mini trains the
// current snapshot at its price, which the answer shows. anthropic is
// Amazon Bedrock (not configured here, so refused by that name).
func TestSeedLaunchDefaults(t *testing.T) {
	s, _, src := fineTuneServer(t, time.Hour)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)

	post := func(body string) webtest.Response {
		return s.Client().Do(http.MethodPost, "/api/fine-tuning/jobs", strings.NewReader(body),
			http.Header{"Authorization": {"Bearer " + admin}, "Content-Type": {"application/json"}})
	}
	seed := `{"dataset_id": "%s", "provider": "openai", "base_model": "%s", "hyperparameters": {"n_epochs": 3}}`
	for _, tc := range []struct {
		dataset, model, method, requested string
		version                           string
	}{
		{chats.DatasetID.String(), "gpt-4o-mini-2024-07-18", "supervised", "", chats.ID.String()},
		{pairs.DatasetID.String(), "gpt-4o-mini-2024-07-18", "dpo", "", pairs.ID.String()},
		{chats.DatasetID.String(), "gpt-4o-mini", "supervised", "gpt-4o-mini", chats.ID.String()},
	} {
		var job seedJobDoc
		post(fmt.Sprintf(seed, tc.dataset, tc.model)).Must(t, http.StatusCreated).JSON(t, &job)
		if job.Provider != "openai" || job.BaseModel != ftMini || job.Method != tc.method || job.RequestedBaseModel != tc.requested ||
			job.DatasetVersionID != tc.version || job.Hyperparameters["n_epochs"] != 3.0 {
			t.Errorf("%s on %s: %+v", tc.model, tc.dataset, job)
		}
		// OpenAI's price for gpt-4o-mini-2024-07-18 training: $3 per million.
		if job.Price == nil || job.Price.USDPerMillion != 3 {
			t.Errorf("%s priced %+v, want $3 per million", tc.model, job.Price)
		}
		var stored seedJobDoc
		s.API(admin, http.MethodGet, "/api/fine-tuning/jobs/"+job.ID, nil).Must(t, http.StatusOK).JSON(t, &stored)
		if stored.BaseModel != ftMini || stored.Method != tc.method {
			t.Errorf("stored %+v", stored)
		}
	}

	var p problemDoc
	post(fmt.Sprintf(`{"dataset_id": "%s", "provider": "anthropic", "base_model": "anthropic.claude-3-haiku-20240307-v1:0"}`, chats.DatasetID)).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "provider" || !strings.Contains(p.Errors[0].Message, "Amazon Bedrock") {
		t.Errorf("anthropic without Bedrock configured: %+v", p)
	}
}

// provider "huggingface" trains on the local trainer.
func TestSeedLaunchHuggingFace(t *testing.T) {
	t.Parallel()
	s := trainServer(t)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	model := localModel(t, s)
	version := frozen(t, s, admin, "support-sft", "instruction_tuning", model, approvedItems(t, s, admin, 10))
	var job seedJobDoc
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", map[string]any{"dataset_version_id": version, "provider": "huggingface",
		"base_model": model, "hyperparameters": map[string]any{"epochs": 1}}).Must(t, http.StatusCreated).JSON(t, &job)
	if job.Provider != "local" || job.Method != "supervised" || job.Price != nil {
		t.Errorf("huggingface launched %+v; want a free local supervised job", job)
	}
	waitJob(t, s, admin, job.ID, "succeeded")
}

// export_format "anthropic" and "status": "draft" on create; an export
// with {} or no body at all writes the dataset's own format, and
// "jsonl" names the chat format of single examples.
func TestSeedExportDefaults(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	key := s.APIKey(org, "curation", "curator")
	var d struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		ExportFormat string `json:"export_format"`
	}
	var p problemDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "AOMA Support Q4 2025", "dataset_type": "instruction_tuning",
		"status": "ready"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "status" {
		t.Errorf("created as ready: %+v", p)
	}
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "AOMA Support Q4 2025", "dataset_type": "instruction_tuning",
		"export_format": "anthropic", "status": "draft"}).Must(t, http.StatusCreated).JSON(t, &d)
	if d.Status != "draft" || d.ExportFormat != "anthropic_text" {
		t.Fatalf("created %+v; want a draft in anthropic_text", d)
	}
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "pairs", "dataset_type": "dpo", "export_format": "anthropic"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "export_format" {
		t.Errorf("anthropic for pairs: %+v", p)
	}
	s.API(key, http.MethodPost, "/api/training-datasets/"+d.ID+"/members", map[string]any{"add": approvedItems(t, s, key, 10)}).Must(t, http.StatusOK)
	s.API(key, http.MethodPatch, "/api/training-datasets/"+d.ID, map[string]any{"status": "ready"}).Must(t, http.StatusOK)

	var e struct {
		ID     string `json:"id"`
		Format string `json:"format"`
	}
	s.API(key, http.MethodPost, "/api/training-datasets/"+d.ID+"/export", map[string]any{}).Must(t, http.StatusAccepted).JSON(t, &e)
	if e.Format != "anthropic_text" {
		t.Errorf("export with {} in %s, want the dataset's anthropic_text", e.Format)
	}
	done := waitExport(t, s, key, d.ID, e.ID)
	if done.Status != "succeeded" || len(done.Files) == 0 {
		t.Fatalf("export %+v", done)
	}
	file := s.API(key, http.MethodGet, done.Files[0].URL, nil).Must(t, http.StatusOK).Body
	if first, _, _ := strings.Cut(file, "\n"); !strings.HasPrefix(first, `{"input":"Human: `) || !strings.Contains(first, `"output":`) {
		t.Errorf("the file's first line %q is not the seed's Anthropic format", first)
	}
	s.API(key, http.MethodPost, "/api/training-datasets/"+d.ID+"/export", nil).Must(t, http.StatusAccepted).JSON(t, &e)
	if e.Format != "anthropic_text" {
		t.Errorf("export with no body in %s", e.Format)
	}
	s.API(key, http.MethodPost, "/api/training-datasets/"+d.ID+"/export", map[string]any{"format": "jsonl"}).Must(t, http.StatusAccepted).JSON(t, &e)
	if e.Format != "openai_chat" {
		t.Errorf("jsonl exported as %s, want openai_chat", e.Format)
	}
}

// Seed 004's A/B panel measures helpfulness, accuracy and latency: those
// names are taken, and answered as Curate's metrics.
func TestSeedABTestMetrics(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("support-v%d", i+2)}).
			Must(t, http.StatusCreated).JSON(t, v)
	}
	var e seedExperimentDoc
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"name": "Support Model v2 vs v3", "control_model_id": v1.ID,
		"treatment_model_id": v2.ID, "traffic_split": 0.5, "success_metrics": []string{"helpfulness", "accuracy", "latency"}}).
		Must(t, http.StatusCreated).JSON(t, &e)
	if got := strings.Join(e.Metrics, ","); got != "avg_helpfulness,avg_accuracy,latency" {
		t.Errorf("metrics %s", got)
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"name": "all", "control_model_id": v1.ID, "treatment_model_id": v2.ID,
		"traffic_split": 0.5, "success_metrics": []string{"thumbs_up_rate", "rating", "clarity", "safety"}}).Must(t, http.StatusCreated).JSON(t, &e)
	if got := strings.Join(e.Metrics, ","); got != "thumbs_up_rate,avg_rating,avg_clarity,avg_safety" {
		t.Errorf("metrics %s", got)
	}
}

// Deploy with {} goes to production on the version's one suitable target,
// recorded "via API"; rollback with no body rolls production back; with
// two suitable targets a deploy must name one, and is told their names.
func TestSeedDeployDefaults(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	base := "meta-llama/Llama-3.1-8B-Instruct"
	vllm := vllmtest.New(t, base)
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	// A provider target, which cannot take an adapter: not a choice.
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": base, "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, v)
	}
	d := deployAndWait(t, s, admin, viewer, "/api/models/"+v1.ID+"/deploy", map[string]any{})
	if d["alias"] != "production" || d["target"] != "gpu-1" || d["reason"] != "via API" {
		t.Errorf("deploy with {}: %v", d)
	}
	d = deployAndWait(t, s, admin, viewer, "/api/models/"+v2.ID+"/deploy", nil)
	if d["alias"] != "production" || d["version_id"] != v2.ID {
		t.Errorf("deploy with no body: %v", d)
	}
	d = deployAndWait(t, s, admin, viewer, "/api/models/"+v2.ID+"/rollback", map[string]any{})
	if d["alias"] != "production" || d["version_id"] != v1.ID || d["reason"] != "via API" || d["action"] != "rollback" {
		t.Errorf("rollback with {}: %v", d)
	}
	var resolved struct {
		ModelID string `json:"model_id"`
	}
	s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &resolved)
	if resolved.ModelID != v1.ModelID {
		t.Errorf("production resolves to %s after the rollback, want %s", resolved.ModelID, v1.ModelID)
	}

	vllm2 := vllmtest.New(t, base)
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-2", "kind": "vllm", "base_url": vllm2.URL}).Must(t, http.StatusCreated)
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/models/"+v2.ID+"/deploy", map[string]any{}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "target" || !strings.Contains(p.Errors[0].Message, "gpu-1, gpu-2") {
		t.Errorf("two suitable targets: %+v", p)
	}
}

// A PATCH without If-Match applies (the last write wins) and the audit
// log says so; a stale If-Match is still refused.
func TestSeedPatchWithoutIfMatch(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "curation", "curator")
	patch := func(path, ifMatch, body string) webtest.Response {
		h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
		if ifMatch != "" {
			h.Set("If-Match", ifMatch)
		}
		return s.Client().Do(http.MethodPatch, path, strings.NewReader(body), h)
	}
	lww := func(action, target string) bool {
		t.Helper()
		var n int
		if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1 AND target_id = $2
			AND (details->>'last_write_wins')::boolean`, action, target).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	var item struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Version int    `json:"version"`
	}
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up"}).
		Must(t, http.StatusCreated).JSON(t, &item)
	patch("/api/feedback/"+item.ID, "", `{"status": "approved"}`).Must(t, http.StatusOK).JSON(t, &item)
	if item.Status != "approved" || item.Version != 2 || !lww("feedback.approve", item.ID) {
		t.Errorf("feedback without If-Match: %+v, audited as last write wins: %v", item, lww("feedback.approve", item.ID))
	}
	patch("/api/feedback/"+item.ID, `"1"`, `{"status": "rejected"}`).Must(t, http.StatusConflict)
	patch("/api/feedback/"+item.ID, `"2"`, `{"tags": ["billing"]}`).Must(t, http.StatusOK)
	if lww("feedback.tag", item.ID) {
		t.Error("a PATCH with If-Match audited as last write wins")
	}

	var pair struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
	}
	s.API(key, http.MethodPost, "/api/preference-pairs", map[string]any{"query": "Where?", "chosen_response": "Here.", "rejected_response": "No."}).
		Must(t, http.StatusCreated).JSON(t, &pair)
	patch("/api/preference-pairs/"+pair.ID, "", `{"annotation_notes": "checked"}`).Must(t, http.StatusOK).JSON(t, &pair)
	if pair.Version != 2 || !lww("pair.update", pair.ID) {
		t.Errorf("pair without If-Match: version %d, audited as last write wins: %v", pair.Version, lww("pair.update", pair.ID))
	}
	patch("/api/preference-pairs/"+pair.ID, `W/"1"`, `{"swap": true}`).Must(t, http.StatusConflict)
}

// An API-only team: a frozen version made a golden set with POST
// /api/golden-sets, listed, a loop created on it, a loop on a frozen
// version that is not marked (as POST /api/evaluations takes), and the
// golden set unmarked, all without the browser.
func TestSeedGoldenSetsAndLoopThroughAPI(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(t)
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) { c.OpenAIAPIKey, c.OpenAIBaseURL = "sk-test", fake.URL() }})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	curator := s.APIKey(org, "curation", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	other := s.APIKey(s.Org("globex"), "theirs", "admin")
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "judge", "base_url": "http://127.0.0.1:9/v1", "model": "j"}).
		Must(t, http.StatusCreated)
	gold := frozen(t, s, admin, "gold", "instruction_tuning", "", approvedItems(t, s, admin, 3))
	unmarked := frozen(t, s, admin, "held-out", "instruction_tuning", "", approvedItems(t, s, admin, 2))

	body := map[string]any{"version_id": gold, "name": "Support gold", "split_tags": []string{"gold_set", "red_team"}}
	s.API(curator, http.MethodPost, "/api/golden-sets", body).Must(t, http.StatusForbidden)
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/golden-sets", map[string]any{"version_id": "nope", "name": "x"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "version_id" {
		t.Errorf("a bad version id: %+v", p)
	}
	s.API(other, http.MethodPost, "/api/golden-sets", body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "version_id" {
		t.Errorf("another organisation's version: %+v", p)
	}
	var g struct {
		VersionID string   `json:"version_id"`
		Name      string   `json:"name"`
		SplitTags []string `json:"split_tags"`
		Items     int      `json:"items"`
	}
	s.API(admin, http.MethodPost, "/api/golden-sets", body).Must(t, http.StatusCreated).JSON(t, &g)
	if g.VersionID != gold || g.Name != "Support gold" || strings.Join(g.SplitTags, ",") != "gold_set,red_team" || g.Items != 3 {
		t.Errorf("marked %+v", g)
	}
	var list struct {
		Data []struct {
			VersionID string `json:"version_id"`
			Name      string `json:"name"`
		} `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/golden-sets", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].VersionID != gold {
		t.Errorf("listed %+v", list.Data)
	}
	s.API(other, http.MethodGet, "/api/golden-sets", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Errorf("another organisation lists %+v", list.Data)
	}

	policy := func(name, set string) map[string]any {
		return map[string]any{"name": name, "registered_model": "support",
			"trigger":    map[string]any{"min_new_items": 1000, "filter": map[string]any{"status": "approved"}},
			"dataset":    map[string]any{"name": name + "-training", "generate": []string{"same_query", "correction"}},
			"training":   map[string]any{"provider": "openai", "method": "dpo", "base_model": ftMini, "hyperparameters": map[string]any{"n_epochs": 1}, "max_cost_usd": 20},
			"evaluation": map[string]any{"golden_set_version_id": set, "judge": map[string]any{"endpoint": "judge", "template": "default"}, "reward_formula": map[string]any{"judge": 1.0}},
			"deploy":     map[string]any{"target": "openai-prod", "alias": "candidate"}, "promote_alias": "production", "approval": "none"}
	}
	var loop struct {
		ID         string `json:"id"`
		Evaluation struct {
			GoldenSetVersionID string `json:"golden_set_version_id"`
		} `json:"evaluation"`
	}
	s.API(admin, http.MethodPost, "/api/loops", policy("support-weekly", gold)).Must(t, http.StatusCreated).JSON(t, &loop)
	if loop.Evaluation.GoldenSetVersionID != gold {
		t.Errorf("the loop evaluates on %s, want %s", loop.Evaluation.GoldenSetVersionID, gold)
	}
	s.API(admin, http.MethodPost, "/api/loops", policy("support-held-out", unmarked)).Must(t, http.StatusCreated).JSON(t, &loop)
	if loop.Evaluation.GoldenSetVersionID != unmarked {
		t.Errorf("the loop on an unmarked frozen version evaluates on %s", loop.Evaluation.GoldenSetVersionID)
	}
	s.API(admin, http.MethodPost, "/api/loops", policy("support-nowhere", "00000000-0000-0000-0000-000000000001")).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if !strings.Contains(p.fields(), "evaluation.golden_set_version_id") {
		t.Errorf("a loop on no version: %+v", p)
	}

	s.API(curator, http.MethodDelete, "/api/golden-sets/"+gold, nil).Must(t, http.StatusForbidden)
	s.API(other, http.MethodDelete, "/api/golden-sets/"+gold, nil).Must(t, http.StatusNotFound)
	s.API(admin, http.MethodDelete, "/api/golden-sets/"+gold, nil).Must(t, http.StatusNoContent)
	s.API(admin, http.MethodDelete, "/api/golden-sets/"+gold, nil).Must(t, http.StatusNotFound)
	s.API(viewer, http.MethodGet, "/api/golden-sets", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Errorf("after the unmark: %+v", list.Data)
	}
	assertAudit(t, s, "golden_set.mark", "golden_set.unmark", "loop.create")
}

type seedRuntimeDoc struct {
	State  string `json:"state"`
	Detail struct {
		Runtime map[string]any `json:"runtime"`
	} `json:"detail"`
}

// Seed 003's train status carries runtime {device, unsloth_available,
// gpu_mem_used} from the worker that runs the job: on a worker whose probe
// reports CUDA and Unsloth, the device, true and the memory the trainer
// last reported; on a CPU worker "cpu", false and 0.
func TestSeedTrainStatusRuntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		probe   string
		device  string
		unsloth bool
		mem     float64
	}{
		// The fake trainer reports 6,800,000,000 + 1,000 × step bytes on
		// CUDA; its last step is 3.
		{"gpu", "cuda", true, 6800003000},
		{"cpu", "cpu", false, 0},
	} {
		t.Run(tc.probe, func(t *testing.T) {
			t.Parallel()
			s, src := localServer(t, 20*time.Millisecond, "FAKE_TRAINER_PROBE="+tc.probe)
			org := s.Org("acme")
			admin := s.APIKey(org, "ops", "admin")
			pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
			var started struct {
				JobID string `json:"job_id"`
			}
			s.API(admin, http.MethodPost, "/api/train", map[string]any{"stage": "DPO", "model_id": localModel(t, s),
				"dataset_version_id": pairs.ID.String()}).Must(t, http.StatusCreated).JSON(t, &started)
			waitTrain(t, s, admin, started.JobID)
			var st seedRuntimeDoc
			s.API(admin, http.MethodGet, "/api/train/status/"+started.JobID, nil).Must(t, http.StatusOK).JSON(t, &st)
			want := map[string]any{"device": tc.device, "unsloth_available": tc.unsloth, "gpu_mem_used": tc.mem}
			if fmt.Sprint(st.Detail.Runtime) != fmt.Sprint(want) {
				t.Errorf("runtime %v, want %v", st.Detail.Runtime, want)
			}
		})
	}
}
