package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// The real binary is killed with SIGKILL the moment the vLLM server has
// loaded a deployment's adapter, before the answer reaches it: the
// deployment stays "running", which refuses other deployments of the
// alias. Once the binary is started again, the heartbeat sweep gives the
// job to the new process, which finds the adapter listed and finishes the
// deployment within 90 s of the restart without loading it again; the
// alias then takes the next deployment.
func TestDeploymentSurvivesKill(t *testing.T) {
	ctx := t.Context()
	w := newCrashWorld(t)
	pool := w.pool
	if _, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	w.apiKey("acme")

	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	w.start()
	proc := w.proc
	var kill sync.Once
	vllm.AfterLoad = func(string) { kill.Do(proc.kill) }

	call := func(method, path string, body any, want int) map[string]any {
		t.Helper()
		return w.call(method, path, body, []int{want})
	}
	call(http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}, http.StatusCreated)
	var versions []string
	for _, path := range []string{"/adapters/support-1", "/adapters/support-2"} {
		v := call(http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": path,
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}, http.StatusCreated)
		versions = append(versions, v["id"].(string))
	}
	deploy := map[string]any{"alias": "production", "target": "gpu-1", "reason": "first"}
	d := call(http.MethodPost, "/api/models/"+versions[0]+"/deploy", deploy, http.StatusAccepted)
	select {
	case <-proc.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the adapter was not loaded:\n%s", proc.logs())
	}
	var status string
	if err := pool.QueryRow(ctx, `SELECT status::text FROM deployments WHERE id = $1`, d["id"]).Scan(&status); err != nil || status != "running" {
		t.Fatalf("after the kill the deployment is %q (%v), want running", status, err)
	}

	started := time.Now()
	w.start()
	proc = w.proc
	// The contract counts from the moment a live process can take the
	// job; the start itself (migrations, a loaded machine) is logged.
	restarted := time.Now()
	for {
		d = call(http.MethodGet, "/api/deployments/"+d["id"].(string), nil, http.StatusOK)
		if d["status"] == "succeeded" || d["status"] == "failed" {
			break
		}
		if time.Since(restarted) > 90*time.Second {
			t.Fatalf("the killed deployment is still %s %.0fs after the restart\n%s", d["status"], time.Since(restarted).Seconds(), proc.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if d["status"] != "succeeded" || vllm.Loads() != 1 {
		t.Fatalf("the killed deployment ended %v with %d loads", d, vllm.Loads())
	}
	var rescued string
	if err := pool.QueryRow(ctx, `SELECT errors[1]->>'error' FROM river_job WHERE kind = 'model_deploy' AND args->>'deployment_id' = $1`,
		d["id"]).Scan(&rescued); err != nil || !strings.Contains(rescued, "heartbeats") {
		t.Errorf("the killed attempt's recorded error: %q (%v), want the heartbeat sweep's", rescued, err)
	}
	t.Logf("the killed deployment finished %.1fs after the restarted process was up (%.1fs after its start began)",
		time.Since(restarted).Seconds(), time.Since(started).Seconds())
	r := call(http.MethodGet, "/api/models/resolve?name=support&alias=production", nil, http.StatusOK)
	if r["model"] != d["served_name"] {
		t.Errorf("production resolves to %v, the deployment served %v", r["model"], d["served_name"])
	}
	// The alias is free again.
	deploy["reason"] = "next"
	call(http.MethodPost, "/api/models/"+versions[1]+"/deploy", deploy, http.StatusAccepted)
	proc.stop()
}
