package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

type modelDoc struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Status  string   `json:"status"`
	Kind    string   `json:"kind"`
	ModelID string   `json:"model_id"`
	Aliases []string `json:"aliases"`
}

// The registry's API: admins register the model in production today by
// hand and renumber it while it is testing; everyone reads versions and
// their history; other organisations see nothing of it.
func TestModelRegistryAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dashboards", "viewer")
	other := s.APIKey(s.Org("globex"), "theirs", "admin")

	var p problemDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "Tandem Assist", "model_id": ""}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "name,model_id" {
		t.Errorf("fields %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/models", map[string]any{"name": "tandem-assist", "model_id": "m"}).Must(t, http.StatusForbidden)

	var v modelDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "tandem-assist", "model_id": "tandem-assist-v2"}).
		Must(t, http.StatusCreated).JSON(t, &v)
	if v.Version != "1.0.0" || v.Status != "testing" || v.Kind != "full" || v.Aliases == nil {
		t.Errorf("registered %+v", v)
	}
	var lora modelDoc
	s.API(admin, http.MethodPost, "/api/models", map[string]any{
		"name": "tandem-assist", "version": "2.0.0", "model_id": "/adapters/support-2", "base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora",
	}).Must(t, http.StatusCreated).JSON(t, &lora)

	s.API(admin, http.MethodPatch, "/api/models/"+v.ID, map[string]any{"version": "1.5.0", "tags": []string{"baseline"}}).
		Must(t, http.StatusOK).JSON(t, &v)
	if v.Version != "1.5.0" {
		t.Errorf("renumbered %+v", v)
	}
	s.API(admin, http.MethodPatch, "/api/models/"+v.ID, map[string]any{"status": "deprecated"}).Must(t, http.StatusOK)
	s.API(admin, http.MethodPatch, "/api/models/"+v.ID, map[string]any{"version": "1.6.0"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "version" {
		t.Errorf("renumbering a deprecated version: %q", p.fields())
	}
	s.API(admin, http.MethodPatch, "/api/models/"+v.ID, map[string]any{"version": "1.6.0", "colour": "red"}).Must(t, http.StatusUnprocessableEntity)

	var list struct {
		Data       []modelDoc `json:"data"`
		NextCursor string     `json:"next_cursor"`
	}
	s.API(viewer, http.MethodGet, "/api/models?name=tandem-assist&limit=1", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != lora.ID || list.NextCursor == "" {
		t.Fatalf("first page %+v", list)
	}
	next := list.NextCursor
	list.NextCursor = ""
	s.API(viewer, http.MethodGet, "/api/models?name=tandem-assist&limit=1&cursor="+next, nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != v.ID || list.NextCursor != "" {
		t.Errorf("last page %+v", list)
	}
	s.API(viewer, http.MethodGet, "/api/models?status=live", nil).Must(t, http.StatusUnprocessableEntity)
	s.API(viewer, http.MethodGet, "/api/models?stage=production", nil).Must(t, http.StatusBadRequest)

	var history struct {
		Data []struct {
			Action    string `json:"action"`
			ToVersion string `json:"to_version"`
			Actor     string `json:"actor"`
		} `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/models/"+lora.ID+"/history", nil).Must(t, http.StatusOK).JSON(t, &history)
	var got []string
	for _, h := range history.Data {
		got = append(got, h.Action+" "+h.ToVersion)
	}
	if strings.Join(got, ", ") != "status_changed 1.5.0, registered 2.0.0, registered 1.0.0" {
		t.Errorf("history %q", got)
	}

	s.API(other, http.MethodGet, "/api/models/"+v.ID, nil).Must(t, http.StatusNotFound)
	s.API(other, http.MethodGet, "/api/models/"+v.ID+"/history", nil).Must(t, http.StatusNotFound)
	s.API(other, http.MethodPatch, "/api/models/"+v.ID, map[string]any{"status": "archived"}).Must(t, http.StatusNotFound)
	assertAudit(t, s, "model.register", "model.register", "model.update", "model.update")
}

// Serving targets: an admin adds one, its key is never read back, and an
// address the outbound policy refuses is refused with a sentence.
func TestServingTargetsAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *config.Config) { c.OutboundAllow = "" }})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	curator := s.APIKey(org, "curation", "curator")

	var target map[string]any
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{
		"name": "gpu-1", "kind": "vllm", "base_url": "https://vllm.example.com/", "api_key": "sk-secret-123",
	}).Must(t, http.StatusCreated).JSON(t, &target)
	if target["base_url"] != "https://vllm.example.com" || target["has_api_key"] != true {
		t.Errorf("target %v", target)
	}
	res := s.API(admin, http.MethodGet, "/api/serving-targets", nil).Must(t, http.StatusOK)
	if strings.Contains(res.Body, "sk-secret") || !strings.Contains(res.Body, `"gpu-1"`) {
		t.Errorf("list %s", res.Body)
	}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": "https://vllm.example.com"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "name" {
		t.Errorf("a second gpu-1: %q", p.fields())
	}
	res = s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "local", "kind": "vllm", "base_url": "http://127.0.0.1:8000"}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, "private or loopback") {
		t.Errorf("a loopback address: %s", res.Body)
	}
	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "x", "kind": "triton"}).Must(t, http.StatusUnprocessableEntity)
	s.API(curator, http.MethodPost, "/api/serving-targets", map[string]any{"name": "y", "kind": "openai"}).Must(t, http.StatusForbidden)
	assertAudit(t, s, "serving_target.create")
}

// Deploying through the API with a worker: the deployment is accepted
// (202), a worker loads the adapter on the vLLM stand-in, and resolve
// answers the new version as soon as the deployment reads succeeded, with
// an ETag the assistant polls with; rollback puts the earlier one back.
func TestDeployAndResolveAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "assistant", "viewer")
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")

	s.API(admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	var v1, v2 modelDoc
	for i, v := range []*modelDoc{&v1, &v2} {
		s.API(admin, http.MethodPost, "/api/models", map[string]any{
			"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1), "base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora",
		}).Must(t, http.StatusCreated).JSON(t, v)
	}
	s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusNotFound)
	s.API(viewer, http.MethodPost, "/api/models/"+v1.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "x"}).Must(t, http.StatusForbidden)

	type deploymentDoc struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		Error      string `json:"error"`
		ServedName string `json:"served_name"`
	}
	deploy := func(path string, body map[string]any) deploymentDoc {
		t.Helper()
		var d deploymentDoc
		s.API(admin, http.MethodPost, path, body).Must(t, http.StatusAccepted).JSON(t, &d)
		deadline := time.Now().Add(30 * time.Second)
		for d.Status == "queued" || d.Status == "running" {
			if time.Now().After(deadline) {
				t.Fatalf("deployment still %s", d.Status)
			}
			time.Sleep(50 * time.Millisecond)
			s.API(viewer, http.MethodGet, "/api/deployments/"+d.ID, nil).Must(t, http.StatusOK).JSON(t, &d)
		}
		if d.Status != "succeeded" {
			t.Fatalf("deployment %+v", d)
		}
		return d
	}
	type resolved struct {
		Version, Model, BaseURL, Target string
	}
	resolve := func() (resolved, string) {
		t.Helper()
		res := s.API(viewer, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK)
		var r struct {
			Version string `json:"version"`
			Model   string `json:"model"`
			BaseURL string `json:"base_url"`
			Target  string `json:"target"`
		}
		res.JSON(t, &r)
		return resolved{r.Version, r.Model, r.BaseURL, r.Target}, res.Header.Get("ETag")
	}

	d1 := deploy("/api/models/"+v1.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "first"})
	r, etag := resolve()
	if r != (resolved{v1.Version, d1.ServedName, vllm.URL, "gpu-1"}) || etag == "" {
		t.Errorf("resolved %+v (etag %q)", r, etag)
	}
	res := s.Client().Do(http.MethodGet, "/api/models/resolve?name=support&alias=production", nil,
		http.Header{"Authorization": {"Bearer " + viewer}, "If-None-Match": {etag}})
	if res.Status != http.StatusNotModified {
		t.Errorf("polling with the ETag: %d", res.Status)
	}

	d2 := deploy("/api/models/"+v2.ID+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "second"})
	if r, etag2 := resolve(); r.Version != v2.Version || r.Model != d2.ServedName || etag2 == etag {
		t.Errorf("after the second deployment %+v", r)
	}
	back := deploy("/api/models/"+v2.ID+"/rollback", map[string]any{"alias": "production", "reason": "tone"})
	if r, _ := resolve(); r.Version != v1.Version || r.Model != back.ServedName {
		t.Errorf("after rollback %+v", r)
	}
	// The rollback comes within the target's grace period, while 1.0.0's
	// adapter is still loaded: it takes that adapter back, no new load.
	if vllm.Loads() != 2 || back.ServedName != d1.ServedName {
		t.Errorf("%d loads, rolled back to %q; want 2, and 1.0.0's loaded adapter %q", vllm.Loads(), back.ServedName, d1.ServedName)
	}
	var history struct {
		Data []map[string]any `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/models/"+v1.ID+"/history", nil).Must(t, http.StatusOK).JSON(t, &history)
	first := history.Data[0]
	if first["action"] != "alias_moved" || first["from_version"] != v2.Version || first["to_version"] != v1.Version ||
		first["reason"] != "tone" || first["target"] != "gpu-1" || first["alias"] != "production" || first["actor"] == "" {
		t.Errorf("newest history entry %v", first)
	}
	// An alias that cannot be one is refused by field (a reason may be left
	// out on the API: it reads "via API").
	s.API(admin, http.MethodPost, "/api/models/"+v1.ID+"/rollback", map[string]any{"alias": "no such alias!"}).Must(t, http.StatusUnprocessableEntity)
	assertAudit(t, s, "model.deploy", "model.rollback")
}

// A succeeded fine-tuning job registers its model under the name chosen
// at launch with its training summary.
func TestSucceededJobRegisters(t *testing.T) {
	s, _, src := fineTuneServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	launch := map[string]any{"dataset_version_id": v.ID.String(), "provider": "openai",
		"base_model": ftMini, "method": "dpo", "hyperparameters": map[string]any{"epochs": 1}, "registered_model": "Support DPO"}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", launch).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "registered_model" {
		t.Errorf("a registered model name with spaces: %q", p.fields())
	}
	launch["registered_model"] = "support-dpo"
	var job ftJob
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", launch).Must(t, http.StatusCreated).JSON(t, &job)
	deadline := time.Now().Add(60 * time.Second)
	for job.Status != "succeeded" && job.Status != "failed" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		s.API(admin, http.MethodGet, "/api/fine-tuning/jobs/"+job.ID, nil).Must(t, http.StatusOK).JSON(t, &job)
	}
	if job.Status != "succeeded" {
		t.Fatalf("job %+v", job)
	}
	var list struct {
		Data []struct {
			modelDoc
			FineTuningJobID string   `json:"fine_tuning_job_id"`
			TrainLoss       *float64 `json:"train_loss"`
			TrainedTokens   int64    `json:"trained_tokens"`
			CostUSD         *float64 `json:"cost_usd"`
		} `json:"data"`
	}
	s.API(admin, http.MethodGet, "/api/models", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("registered %+v", list.Data)
	}
	got := list.Data[0]
	if got.Name != "support-dpo" || got.Version != "1.0.0" || got.Kind != "full" || got.ModelID != job.FineTunedModel ||
		got.FineTuningJobID != job.ID || got.TrainLoss == nil || got.TrainedTokens != job.TrainedTokens || got.CostUSD == nil {
		t.Errorf("registered version %+v (job %+v)", got, job)
	}
}

// The registry's pages: viewers read, admins register by hand, add targets
// and deploy; refusals show beside the field with what was typed kept.
func TestModelPages(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 1})
	org := s.Org("acme")
	s.User(org, "ad@acme.test", "admin")
	s.User(org, "vi@acme.test", "viewer")
	admin := s.SignedIn("ad@acme.test")
	viewer := s.SignedIn("vi@acme.test")
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")

	res := viewer.Get("/models").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, "No models yet") || strings.Contains(res.Body, `id="register-form"`) {
		t.Errorf("a viewer's empty registry: %s", res.Body)
	}
	viewer.Get("/models/targets").Must(t, http.StatusForbidden)

	res = admin.PostForm("/models", url.Values{"name": {"Support Bot"}, "model_id": {"tandem-assist-v2"}, "description": {"today's model"}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-name"`) || !strings.Contains(res.Body, `value="tandem-assist-v2"`) || !strings.Contains(res.Body, "today&#39;s model") {
		t.Errorf("a refused registration keeps the input: %s", res.Body)
	}
	res = admin.PostForm("/models", url.Values{"name": {"support"}, "model_id": {"/adapters/support-1"}, "kind": {"lora"},
		"base_model": {"meta-llama/Llama-3.1-8B-Instruct"}}).Must(t, http.StatusSeeOther)
	versionURL := res.Header.Get("Location")
	if !strings.HasPrefix(versionURL, "/models/versions/") {
		t.Fatalf("registered, redirected to %q", versionURL)
	}
	res = admin.PostForm(versionURL+"/number", url.Values{"version": {"1.0"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-version"`) || !strings.Contains(res.Body, `value="1.0"`) {
		t.Errorf("a refused number keeps the input: %s", res.Body)
	}
	admin.PostForm(versionURL+"/number", url.Values{"version": {"0.9.0"}}).Must(t, http.StatusSeeOther)
	res = admin.Get(versionURL).Must(t, http.StatusOK)
	if !strings.Contains(res.Body, `<span class="muted">0.9.0</span>`) {
		t.Errorf("renumbered version page: %s", res.Body)
	}
	if !strings.Contains(res.Body, "No serving target yet") || !strings.Contains(res.Body, "Registered by hand") {
		t.Errorf("a new version's page: %s", res.Body)
	}

	res = admin.PostForm("/models/targets", url.Values{"name": {"gpu-1"}, "kind": {"vllm"}, "base_url": {"ftp://x"}, "unload_grace_seconds": {"60"}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-base_url"`) || !strings.Contains(res.Body, `value="ftp://x"`) {
		t.Errorf("a refused target keeps the input: %s", res.Body)
	}
	admin.PostForm("/models/targets", url.Values{"name": {"gpu-1"}, "kind": {"vllm"}, "base_url": {vllm.URL}, "unload_grace_seconds": {"60"}}).
		Must(t, http.StatusSeeOther)

	res = admin.PostForm(versionURL+"/deploy", url.Values{"alias": {"production"}, "target": {"gpu-1"}, "reason": {""}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-reason"`) {
		t.Errorf("a deploy without a reason: %s", res.Body)
	}
	admin.PostForm(versionURL+"/deploy", url.Values{"alias": {"production"}, "target": {"gpu-1"}, "reason": {"first adapter"}}).
		Must(t, http.StatusSeeOther)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(viewer.Get(versionURL).Body, `data-status="succeeded"`) {
		if time.Now().After(deadline) {
			t.Fatal("the deployment did not succeed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res = viewer.Get("/models").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, `data-alias="production"`) || !strings.Contains(res.Body, `data-status="deployed"`) {
		t.Errorf("the registry after a deployment: %s", res.Body)
	}
	res = viewer.Get(versionURL).Must(t, http.StatusOK)
	for _, want := range []string{"Alias moved", "Loaded on target", "first adapter", `id="history"`} {
		if !strings.Contains(res.Body, want) {
			t.Errorf("the version page lacks %q", want)
		}
	}
	if strings.Contains(res.Body, `id="deploy-form"`) {
		t.Error("a viewer sees the deploy form")
	}
	viewer.PostForm(versionURL+"/deploy", url.Values{"alias": {"production"}, "target": {"gpu-1"}, "reason": {"x"}}).Must(t, http.StatusForbidden)
}
