package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/datasets"
	evalpkg "github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web/webtest"
)

type loopRunDoc struct {
	ID             string  `json:"id"`
	LoopID         string  `json:"loop_id"`
	Number         int     `json:"number"`
	Status         string  `json:"status"`
	Reason         string  `json:"reason"`
	ModelVersionID *string `json:"model_version_id"`
	Approvers      []string
	Steps          []struct {
		Name       string            `json:"name"`
		Status     string            `json:"status"`
		StartedAt  *time.Time        `json:"started_at"`
		FinishedAt *time.Time        `json:"finished_at"`
		Detail     string            `json:"detail"`
		Links      map[string]string `json:"links"`
	} `json:"steps"`
}

func (r loopRunDoc) step(name string) (string, string, map[string]string) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s.Status, s.Detail, s.Links
		}
	}
	return "", "", nil
}

// loopWorld is a server with workers and stand-ins for everything a loop
// calls out to: OpenAI's files, fine-tuning and chat completions, a judge
// and a vLLM server serving production's adapter.
type loopWorld struct {
	s        *webtest.Server
	openai   *openaitest.Server
	judge    *chattest.Server
	vllm     *vllmtest.Server
	org      uuid.UUID
	admin    string // an admin's API key
	curator  string // a curator's API key
	page     *webtest.Client
	set      uuid.UUID // the gate's golden set
	worse    atomic.Bool
	judged   atomic.Int64
	itemsSeq atomic.Int64
}

const loopBase = "gpt-4o-mini-2024-07-18"

func newLoopWorld(t *testing.T) *loopWorld {
	t.Helper()
	w := &loopWorld{openai: openaitest.New(t)}
	// Answers of fine-tuned models are good, unless the test makes them
	// worse; production's adapter on vLLM gives middling ones.
	w.openai.SetChat(func(model, prompt string) string {
		if w.worse.Load() {
			return "A worse answer from " + model + " to: " + prompt
		}
		return "A fine-tuned answer from " + model + " to: " + prompt
	})
	w.judge = chattest.New(func(r chattest.Request) chattest.Reply {
		w.judged.Add(1)
		score := "0.5"
		switch p := r.Last(); {
		case strings.Contains(p, "A fine-tuned answer"):
			score = "0.9"
		case strings.Contains(p, "A worse answer"):
			score = "0.1"
		}
		return chattest.Reply{Content: `{"score": ` + score + `, "safety_flag": false, "critique": "Graded."}`, PromptTokens: 400, CompletionTokens: 40}
	})
	t.Cleanup(w.judge.Close)
	w.vllm = vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	w.vllm.Answer = func(model, prompt string) string { return "Production says: " + prompt }

	w.s = webtest.New(t, webtest.Options{Workers: 4, Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTunePoll, c.FineTuneBudgetUSD = "sk-test", w.openai.URL(), 20*time.Millisecond, 100
		c.LoopCheckEvery, c.LoopPoll = 200*time.Millisecond, 50*time.Millisecond
	}})
	s := w.s
	w.org = s.Org("acme")
	s.User(w.org, "ad@acme.test", "admin")
	s.User(w.org, "boss@acme.test", "admin")
	w.page = s.SignedIn("ad@acme.test")
	w.admin = s.APIKey(w.org, "ops", "admin")
	w.curator = s.APIKey(w.org, "widget", "curator")
	ctx := context.Background()

	s.API(w.admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "judge", "base_url": w.judge.URL + "/v1", "model": "deepseek-chat",
		"api_key": "sk-judge", "price_per_million_input": 0.27, "price_per_million_output": 1.10}).Must(t, http.StatusCreated)
	s.API(w.admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"}).Must(t, http.StatusCreated)
	s.API(w.admin, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": w.vllm.URL}).
		Must(t, http.StatusCreated)

	// The golden set: three corrected answers (not approved, so no loop
	// counts them), frozen and made the gate's set.
	var golden []feedback.Item
	for i := range 3 {
		golden = append(golden, feedback.Item{Query: fmt.Sprintf("Golden question %d?", i), Response: "Old answer.", FeedbackType: "correction",
			Correction: fmt.Sprintf("The curated answer %d.", i), Tags: []string{"golden"}})
	}
	res, err := s.App.Services.Feedback.IngestBatch(ctx, w.org, "api", golden)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, "UPDATE feedback SET status = 'corrected' WHERE id = ANY($1)", res.IDs); err != nil {
		t.Fatal(err)
	}
	d, err := s.App.Services.Datasets.Create(ctx, audit.System, w.org, datasets.NewDataset{Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{Name: "Support gold"}, Members: res.IDs})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.App.Services.Datasets.Freeze(ctx, audit.System, w.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Eval.Mark(ctx, audit.System, w.org, v.ID, "Support gold", []string{}); err != nil {
		t.Fatal(err)
	}
	w.set = v.ID

	// What production serves today: an adapter on vLLM, evaluated on the
	// gate's set.
	var prod modelDoc
	s.API(w.admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-1",
		"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}).Must(t, http.StatusCreated).JSON(t, &prod)
	w.deploy(t, prod.ID, "production", "gpu-1")
	w.evaluate(t, prod.ID)
	if err := s.App.Services.Eval.SetGate(ctx, audit.System, w.org, evalpkg.Gate{GoldenSetVersionID: v.ID, MaxMeanDrop: 0.05, RegressionMargin: 0.3}); err != nil {
		t.Fatal(err)
	}
	return w
}

// deploy puts a version under an alias and waits for it.
func (w *loopWorld) deploy(t *testing.T, version, alias, target string) {
	t.Helper()
	var d map[string]any
	w.s.API(w.admin, http.MethodPost, "/api/models/"+version+"/deploy", map[string]any{"alias": alias, "target": target, "reason": "test"}).
		Must(t, http.StatusAccepted).JSON(t, &d)
	w.waitFor(t, "deployment", func() bool {
		w.s.API(w.admin, http.MethodGet, fmt.Sprintf("/api/deployments/%s", d["id"]), nil).Must(t, http.StatusOK).JSON(t, &d)
		return d["status"] == "succeeded"
	})
}

// evaluate evaluates a version on the gate's set and waits for it.
func (w *loopWorld) evaluate(t *testing.T, version string) {
	t.Helper()
	var run evaluationDoc
	w.s.API(w.admin, http.MethodPost, "/api/evaluations", map[string]any{"golden_set_version_id": w.set,
		"candidate": map[string]any{"model_version_id": version}, "judge": map[string]any{"endpoint": "judge"},
		"reward_formula": map[string]any{"judge": 1.0}}).Must(t, http.StatusAccepted).JSON(t, &run)
	w.waitFor(t, "evaluation", func() bool {
		w.s.API(w.admin, http.MethodGet, "/api/evaluations/"+run.ID, nil).Must(t, http.StatusOK).JSON(t, &run)
		return run.Status == "succeeded"
	})
}

func (w *loopWorld) waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never finished", what)
		}
	}
}

// post sends n items through the feedback API, two answers of each
// question rated 5 and 1 (so each question makes a same_query pair),
// tagged, and returns their ids.
func (w *loopWorld) post(t *testing.T, n int, tag string) []string {
	t.Helper()
	var items []map[string]any
	for i := range n {
		q := (w.itemsSeq.Add(1)-1)/2 + 1000
		rating, answer := 5, "A careful answer"
		if i%2 == 1 {
			rating, answer = 1, "A careless answer"
		}
		items = append(items, map[string]any{"query": fmt.Sprintf("How do I do thing %d (%s)?", q, tag), "response": fmt.Sprintf("%s about thing %d.", answer, q),
			"feedback_type": "rating", "rating": rating, "tags": []string{tag}, "user_id": fmt.Sprintf("user-%d", i), "session_id": fmt.Sprintf("s-%s-%d", tag, i)})
	}
	w.s.API(w.curator, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	w.s.API(w.curator, http.MethodGet, "/api/feedback?tag="+tag+"&limit=500", nil).Must(t, http.StatusOK).JSON(t, &list)
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if len(ids) < n {
		t.Fatalf("%d items tagged %s, want %d", len(ids), tag, n)
	}
	return ids[:n] // newest first: the ones just sent
}

// approve approves items through the API, as a curator would.
func (w *loopWorld) approve(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		w.s.Client().Do(http.MethodPatch, "/api/feedback/"+id, strings.NewReader(`{"status": "approved"}`), http.Header{
			"Authorization": {"Bearer " + w.curator}, "Content-Type": {"application/json"}, "If-Match": {"1"}}).Must(t, http.StatusOK)
	}
}

// policy is a loop policy in the API's words.
func (w *loopWorld) policy(name, tag string, minItems int, approval string) map[string]any {
	return map[string]any{"name": name, "registered_model": "support",
		"trigger":  map[string]any{"min_new_items": minItems, "filter": map[string]any{"status": "approved", "tag": tag}},
		"dataset":  map[string]any{"name": name + "-training", "generate": []string{"same_query"}},
		"training": map[string]any{"provider": "openai", "method": "dpo", "base_model": loopBase, "hyperparameters": map[string]any{"n_epochs": 1}, "max_cost_usd": 20},
		"evaluation": map[string]any{"golden_set_version_id": w.set, "judge": map[string]any{"endpoint": "judge", "template": "default"},
			"reward_formula": map[string]any{"judge": 1.0}},
		"deploy": map[string]any{"target": "openai-prod", "alias": "candidate"}, "promote_alias": "production", "approval": approval}
}

// create posts a policy and returns its id.
func (w *loopWorld) create(t *testing.T, body map[string]any) string {
	t.Helper()
	var l struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	w.s.API(w.admin, http.MethodPost, "/api/loops", body).Must(t, http.StatusCreated).JSON(t, &l)
	if l.ID == "" || l.Status != "active" {
		t.Fatalf("created loop %+v", l)
	}
	return l.ID
}

// runs lists a loop's runs, newest first.
func (w *loopWorld) runs(t *testing.T, loop string) []loopRunDoc {
	t.Helper()
	var list struct {
		Data []loopRunDoc `json:"data"`
	}
	w.s.API(w.admin, http.MethodGet, "/api/loops/"+loop+"/runs", nil).Must(t, http.StatusOK).JSON(t, &list)
	return list.Data
}

// settle waits until a run is no longer running, and returns it.
func (w *loopWorld) settle(t *testing.T, id string) loopRunDoc {
	t.Helper()
	var r loopRunDoc
	w.waitFor(t, "run "+id, func() bool {
		w.s.API(w.admin, http.MethodGet, "/api/loop-runs/"+id, nil).Must(t, http.StatusOK).JSON(t, &r)
		return r.Status != "running"
	})
	return r
}

// production is the version the production alias names.
func (w *loopWorld) production(t *testing.T) string {
	t.Helper()
	var r struct {
		Version string `json:"version"`
	}
	w.s.API(w.admin, http.MethodGet, "/api/models/resolve?name=support&alias=production", nil).Must(t, http.StatusOK).JSON(t, &r)
	return r.Version
}

// The loop runs itself. A policy with a trigger of 20 new approved items
// starts no run at 19 and one at 20, which goes from collect to promote:
// pairs are generated and frozen, DPO trains at OpenAI's stand-in, the
// version is staged on OpenAI, evaluated through its chat completions by
// the judge, passes the gate against production's adapter on vLLM and
// takes the production alias; every step links to what it made, and the
// artefacts' pages link back. Run again with nothing new, the loop skips.
func TestLoopRunsItself(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	s := w.s
	loop := w.create(t, w.policy("support-weekly", "weekly", 20, "none"))

	ids := w.post(t, 20, "weekly")
	w.approve(t, ids[:19]...)
	time.Sleep(time.Second) // five looks at the trigger
	if runs := w.runs(t, loop); len(runs) != 0 {
		t.Fatalf("a run started with 19 new items: %+v", runs[0])
	}
	w.approve(t, ids[19])
	var runs []loopRunDoc
	w.waitFor(t, "a run by itself", func() bool { runs = w.runs(t, loop); return len(runs) > 0 })
	r := w.settle(t, runs[0].ID)
	if r.Status != "succeeded" || r.ModelVersionID == nil {
		t.Fatalf("run %s (%s): %+v", r.Status, r.Reason, r.Steps)
	}
	want := []string{"collect", "dataset", "freeze", "train", "register", "stage", "evaluate", "gate", "promote"}
	if len(r.Steps) != len(want) {
		t.Fatalf("steps %+v", r.Steps)
	}
	for i, st := range r.Steps {
		if st.Name != want[i] || st.Status != "succeeded" || st.StartedAt == nil || st.FinishedAt == nil || len(st.Links) == 0 {
			t.Errorf("step %d: %s %s, links %v, detail %q", i, st.Name, st.Status, st.Links, st.Detail)
		}
	}
	if _, detail, _ := r.step("collect"); !strings.HasPrefix(detail, "20 new items match the filter; 20 items may be training data.") {
		t.Errorf("collect said %q", detail)
	}
	if _, detail, links := r.step("dataset"); !strings.Contains(detail, "Generated 10 new pairs (same query 10). Added 10 pairs to support-weekly-training") ||
		links["dataset_id"] == "" {
		t.Errorf("dataset said %q, links %v", detail, links)
	}
	_, _, trained := r.step("train")
	if w.openai.JobsCreated() != 1 {
		t.Errorf("%d jobs at OpenAI", w.openai.JobsCreated())
	}
	var version struct {
		modelDoc
		FineTuningJobID string          `json:"fine_tuning_job_id"`
		Evaluation      *map[string]any `json:"evaluation"`
	}
	s.API(w.admin, http.MethodGet, "/api/models/"+*r.ModelVersionID, nil).Must(t, http.StatusOK).JSON(t, &version)
	if version.FineTuningJobID != trained["fine_tuning_job_id"] || !strings.HasPrefix(version.ModelID, "ft:"+loopBase) || version.Evaluation == nil {
		t.Errorf("the trained version %+v", version)
	}
	if got := w.production(t); got != version.Version {
		t.Errorf("production names %s, the loop's version is %s", got, version.Version)
	}
	if w.openai.ChatCalls(version.ModelID) != 3 {
		t.Errorf("the fine-tuned model answered %d golden questions, want 3", w.openai.ChatCalls(version.ModelID))
	}

	// Each artefact's page links back to the run.
	_, _, evaluated := r.step("evaluate")
	for _, page := range []string{"/fine-tuning/jobs/" + trained["fine_tuning_job_id"], "/models/versions/" + *r.ModelVersionID,
		"/evaluations/runs/" + evaluated["evaluation_run_id"], "/datasets/" + r.Steps[1].Links["dataset_id"]} {
		body := w.page.Get(page).Must(t, http.StatusOK).Body
		if !strings.Contains(body, `id="loop-origin-run"`) || !strings.Contains(body, "/loops/runs/"+r.ID) {
			t.Errorf("%s does not link back to the run", page)
		}
	}
	if body := w.page.Get("/models/versions/" + *r.ModelVersionID).Body; !strings.Contains(body, "0.900") {
		t.Errorf("the version's page does not show its evaluation")
	}

	// Nothing new: the next run is skipped at collect, trains nothing.
	var again loopRunDoc
	s.API(w.admin, http.MethodPost, "/api/loops/"+loop+"/run", nil).Must(t, http.StatusAccepted).JSON(t, &again)
	again = w.settle(t, again.ID)
	if again.Status != "skipped" || !strings.Contains(again.Reason, "Nothing new since the last run") || again.Number != 2 {
		t.Errorf("second run %s: %s", again.Status, again.Reason)
	}
	if st, _, _ := again.step("train"); st != "skipped" || w.openai.JobsCreated() != 1 {
		t.Errorf("the second run's training %s, %d jobs at OpenAI", st, w.openai.JobsCreated())
	}
	if list := w.runs(t, loop); len(list) != 2 || list[0].ID != again.ID {
		t.Errorf("runs newest first: %+v", list)
	}
}

// A version the gate refuses stops the run at gate with the gate's
// reasons and an alert, and production stays where it was; with approval
// before deployment, a run waits (naming who may approve) until an admin
// approves it.
func TestLoopGateAndApproval(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	s := w.s
	before := w.production(t)

	w.worse.Store(true)
	loop := w.create(t, w.policy("support-risky", "risky", 4, "none"))
	w.approve(t, w.post(t, 4, "risky")...)
	var runs []loopRunDoc
	w.waitFor(t, "the risky run", func() bool { runs = w.runs(t, loop); return len(runs) > 0 })
	r := w.settle(t, runs[0].ID)
	if st, _, _ := r.step("gate"); r.Status != "failed" || st != "failed" || !strings.Contains(r.Reason, "The evaluation gate blocks the version: Mean reward 0.100 is more than 0.050 below production's 0.500.") {
		t.Fatalf("risky run %s at %s: %s", r.Status, st, r.Reason)
	}
	if st, _, _ := r.step("promote"); st != "skipped" {
		t.Errorf("promote %s after a failed gate", st)
	}
	if got := w.production(t); got != before {
		t.Errorf("production moved from %s to %s", before, got)
	}
	var alerts int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM alerts WHERE kind = 'loop_run' AND resolved_at IS NULL").Scan(&alerts); err != nil || alerts != 1 {
		t.Errorf("%d open loop alerts (%v)", alerts, err)
	}

	w.worse.Store(false)
	careful := w.create(t, w.policy("support-careful", "careful", 4, "before_deploy"))
	w.approve(t, w.post(t, 4, "careful")...)
	w.waitFor(t, "the careful run", func() bool { runs = w.runs(t, careful); return len(runs) > 0 })
	r = w.settle(t, runs[0].ID)
	if st, detail, _ := r.step("stage"); r.Status != "waiting_approval" || st != "waiting" || !strings.Contains(detail, "approve") {
		t.Fatalf("careful run %s, stage %s %q", r.Status, st, detail)
	}
	if strings.Join(r.Approvers, ",") != "ad@acme.test,boss@acme.test" {
		t.Errorf("approvers %v", r.Approvers)
	}
	if body := w.page.Get("/loops/" + careful).Body; !strings.Contains(body, "ad@acme.test or boss@acme.test may approve it.") {
		t.Errorf("the loop page does not say who may approve")
	}
	time.Sleep(300 * time.Millisecond)
	if st, _, _ := w.settle(t, r.ID).step("stage"); st != "waiting" {
		t.Errorf("stage %s before approval", st)
	}
	s.API(w.curator, http.MethodPost, "/api/loop-runs/"+r.ID+"/approve", nil).Must(t, http.StatusForbidden)
	s.API(w.admin, http.MethodPost, "/api/loop-runs/"+r.ID+"/approve", nil).Must(t, http.StatusOK)
	s.API(w.admin, http.MethodPost, "/api/loop-runs/"+r.ID+"/approve", nil).Must(t, http.StatusConflict)
	r = w.settle(t, r.ID)
	if r.Status != "succeeded" {
		t.Fatalf("approved run %s: %s", r.Status, r.Reason)
	}
	if got := w.production(t); got == before {
		t.Errorf("production did not move after the approved run")
	}
	// The loop's next success settles nothing of another loop's alert.
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM alerts WHERE kind = 'loop_run' AND resolved_at IS NULL").Scan(&alerts); err != nil || alerts != 1 {
		t.Errorf("%d open loop alerts after another loop succeeded (%v)", alerts, err)
	}
}
