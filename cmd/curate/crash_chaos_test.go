package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// chaosKills is how many times TestLoopSurvivesChaos kills the server:
// CURATE_CHAOS_KILLS, 3 unless set (make chaos sets 10).
func chaosKills(t *testing.T) int {
	n := 3
	if v := os.Getenv("CURATE_CHAOS_KILLS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100 {
			t.Fatalf("CURATE_CHAOS_KILLS=%q: want a number from 1 to 100", v)
		}
	}
	return n
}

// chaosSeed picks the kill points: CURATE_CHAOS_SEED replays a run, else
// a new seed each run (logged, so that a failing run can be replayed).
func chaosSeed(t *testing.T) uint64 {
	if v := os.Getenv("CURATE_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CURATE_CHAOS_SEED=%q: want a number", v)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// chaosKill is one kill of the server and what came of it.
type chaosKill struct {
	at      string   // where the run stood
	running []string // the kinds of the jobs the killed process was running
	resumed time.Duration
}

// A loop's run from its trigger to promote, the server killed with
// SIGKILL at seeded random points across it (CURATE_CHAOS_KILLS times)
// and started again each time on the same database: the production
// alias's adapter is loaded onto the vLLM stand-in (the first kill comes
// the moment the adapter is loaded, before the answer reaches Curate),
// then 20 approved items trigger the run, which trains DPO at the OpenAI
// stand-in, stages the version on OpenAI, evaluates it on a golden set of
// twelve questions with a judge stand-in, passes the gate and promotes
// it. Each restart must take the work up again within resumeWithin of
// the restarted process being ready (what was killed mid-work comes back
// through the heartbeat sweep), and the run must end succeeded with one
// training job created at the provider, one load of the one adapter, no
// judge question answered twice, and the aliases where the run's steps
// say. The judge holds its calls for the moment of each kill, so that a
// kill never falls between an answer given and an answer stored: that is
// a charge no retry can avoid, not one a crash should add.
func TestLoopSurvivesChaos(t *testing.T) {
	ctx := context.Background()
	kills, seed := chaosKills(t), chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t.Logf("chaos: %d kills, CURATE_CHAOS_SEED=%d", kills, seed)

	openai := openaitest.New(t)
	// Long enough a training to be killed in: twenty steps, one a poll.
	script := openaitest.DefaultScript()
	script.Metrics = nil
	for i := 1; i <= 20; i++ {
		loss := 2.0 / float64(i)
		script.Metrics = append(script.Metrics, provider.StepMetric{Step: i, TrainLoss: &loss})
	}
	openai.SetScript(script)
	openai.SetChat(func(model, prompt string) string { return "The tuned answer to: " + prompt })
	w := newCrashWorld(t, "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+openai.URL(), "CURATE_FINETUNE_POLL=50ms",
		"CURATE_LOOP_CHECK_EVERY=200ms", "CURATE_LOOP_POLL=100ms")
	pool := w.pool
	const golden = 12
	set := goldenSet(t, pool, "acme", golden)
	w.apiKey("acme")
	judge := newHeldJudge(t, func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.8, "safety_flag": false, "critique": "Fine."}`, PromptTokens: 1000, CompletionTokens: 100}
	}, nil)
	const base = "meta-llama/Llama-3.1-8B-Instruct"
	vllm := vllmtest.New(t, base)
	loaded, afterKill := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	release := func() { released.Do(func() { close(afterKill) }) }
	t.Cleanup(release) // a test that failed first must not hold the stand-in
	vllm.AfterLoad = func(string) {
		once.Do(func() {
			loaded <- struct{}{}
			<-afterKill // the answer is written once the caller is dead
		})
	}

	var record []chaosKill
	var runID string
	var up time.Time // when the running process was ready
	// fingerprint is everything the run's work writes: it changes when
	// work goes on.
	fingerprint := func() string {
		var fp string
		if err := pool.QueryRow(ctx, `SELECT md5(coalesce(string_agg(x, '|' ORDER BY x), '')) FROM (
			SELECT t::text AS x FROM loop_runs t UNION ALL SELECT t::text FROM loop_run_steps t
			UNION ALL SELECT t::text FROM fine_tuning_jobs t UNION ALL SELECT t::text FROM evaluation_runs t
			UNION ALL SELECT t::text FROM deployments t) rows`).Scan(&fp); err != nil {
			t.Fatal(err)
		}
		return fp
	}
	// kill kills the server once every answer the judge gave is stored,
	// starts it again and waits until the work goes on.
	kill := func(at string) {
		t.Helper()
		judge.hold()
		for deadline := time.Now().Add(underwayWithin); ; time.Sleep(20 * time.Millisecond) {
			var stored int
			if err := pool.QueryRow(ctx, `SELECT coalesce(sum(done), 0) FROM evaluation_runs`).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored >= judge.answers() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d judge answers given, %d stored", judge.answers(), stored)
			}
		}
		k := chaosKill{at: at}
		if runID != "" {
			var step, status string
			if err := pool.QueryRow(ctx, `SELECT step, status::text FROM loop_runs WHERE id = $1`, runID).Scan(&step, &status); err != nil {
				t.Fatal(err)
			}
			if status != "running" {
				t.Fatalf("the run ended (%s) after %d of %d kills (seed %d): the kills came too slowly for it", status, len(record), kills, seed)
			}
			k.at = step
		}
		// The jobs this process took (an earlier one's, left running by
		// its kill, are not this kill's).
		rows, err := pool.Query(ctx, `SELECT kind FROM river_job WHERE state = 'running' AND kind <> 'heartbeat_sweep' AND attempted_at >= $1
			ORDER BY kind`, up)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var kind string
			if err := rows.Scan(&kind); err != nil {
				t.Fatal(err)
			}
			k.running = append(k.running, kind)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		w.proc.kill()
		judge.release()
		before := fingerprint()
		ready := w.start()
		up = ready
		for fingerprint() == before {
			if time.Since(ready) > resumeWithin {
				t.Fatalf("kill %d (%s, running %v): nothing went on %.0fs after the restart\n%s", len(record)+1, k.at, k.running,
					time.Since(ready).Seconds(), w.proc.logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
		k.resumed = time.Since(ready)
		record = append(record, k)
		t.Logf("chaos: kill %d at %s (running %s): went on %.1fs after the restart", len(record), k.at, strings.Join(k.running, ", "),
			k.resumed.Seconds())
	}

	up = w.start()
	w.post("/api/endpoints", map[string]any{"name": "judge", "base_url": judge.URL + "/v1", "model": "judge-chat", "api_key": "sk-judge",
		"price_per_million_input": 0.27, "price_per_million_output": 1.10})
	w.post("/api/serving-targets", map[string]any{"name": "openai-prod", "kind": "openai"})
	w.post("/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL})
	prod := w.post("/api/models", map[string]any{"name": "support", "model_id": "/adapters/support-1", "base_model": base, "kind": "lora"})
	loop := w.post("/api/loops", map[string]any{"name": "support-weekly", "registered_model": "support",
		"trigger":  map[string]any{"min_new_items": 20, "filter": map[string]any{"status": "approved", "tag": "chaos"}},
		"dataset":  map[string]any{"name": "support-training", "generate": []string{"same_query"}},
		"training": map[string]any{"provider": "openai", "method": "dpo", "base_model": "gpt-4o-mini-2024-07-18", "max_cost_usd": 20},
		"evaluation": map[string]any{"golden_set_version_id": set, "judge": map[string]any{"endpoint": "judge"},
			"reward_formula": map[string]any{"judge": 1}},
		"deploy": map[string]any{"target": "openai-prod", "alias": "candidate"}, "promote_alias": "production", "approval": "none"})

	// Production's adapter goes onto vLLM; the server dies as it loads.
	dep := w.call(http.MethodPost, "/api/models/"+prod["id"].(string)+"/deploy",
		map[string]any{"alias": "production", "target": "gpu-1", "reason": "what production serves today"}, []int{http.StatusAccepted})
	select {
	case <-loaded:
	case <-time.After(underwayWithin):
		t.Fatalf("the adapter was not loaded:\n%s", w.proc.logs())
	}
	w.proc.kill()
	release()
	record = append(record, chaosKill{at: "production's deployment, its adapter loaded", running: []string{"model_deploy"}})
	ready := w.start()
	up = ready
	for w.get("/api/deployments/" + dep["id"].(string))["status"] != "succeeded" {
		if time.Since(ready) > resumeWithin {
			t.Fatalf("production's deployment is not done %.0fs after the restart\n%s", time.Since(ready).Seconds(), w.proc.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	record[0].resumed = time.Since(ready)
	t.Logf("chaos: kill 1 at %s: done %.1fs after the restart", record[0].at, record[0].resumed.Seconds())

	// Twenty approved items trigger the run.
	var items []map[string]any
	for i := range 20 {
		items = append(items, map[string]any{"query": fmt.Sprintf("How do refunds work, case %d?", i/2), "response": fmt.Sprintf("Answer %d.", i),
			"feedback_type": "rating", "rating": 5 - 4*(i%2), "tags": []string{"chaos"}})
	}
	w.post("/api/feedback/batch", map[string]any{"items": items})
	for _, it := range w.get("/api/feedback?tag=chaos&limit=100")["data"].([]any) {
		w.call(http.MethodPatch, "/api/feedback/"+it.(map[string]any)["id"].(string), map[string]any{"status": "approved"}, nil, "If-Match", "1")
	}
	loopID := loop["id"].(string)
	ended := func() (map[string]any, bool) {
		if runID == "" {
			runs := w.get("/api/loops/" + loopID + "/runs")["data"].([]any)
			if len(runs) == 0 {
				return nil, false
			}
			runID = runs[0].(map[string]any)["id"].(string)
		}
		run := w.get("/api/loop-runs/" + runID)
		return run, run["status"] != "running"
	}

	// The other kills: each at a seeded random step of the run (in the
	// order of the steps, so that they fall across them) and a random
	// moment after the work reached it or went on again.
	steps := []string{"trigger", "collect", "dataset", "freeze", "train", "register", "stage", "evaluate"}
	var targets []int
	for range kills - len(record) {
		targets = append(targets, rng.IntN(len(steps)))
	}
	slices.Sort(targets)
	for _, target := range targets {
		delay := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		for deadline := time.Now().Add(resumeWithin); ; time.Sleep(20 * time.Millisecond) {
			run, done := ended()
			if done {
				t.Fatalf("the run ended after %d of %d kills (seed %d), before its %s step's kill", len(record), kills, seed, steps[target])
			}
			at := 0
			if run != nil {
				at = slices.Index(steps, run["step"].(string))
				if at < 0 {
					at = len(steps) // past evaluate
				}
			}
			if at >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run did not reach %s\n%s", steps[target], w.proc.logs())
			}
		}
		if run, _ := ended(); run != nil && run["step"] == "evaluate" && judge.answers() < golden {
			// In the evaluation: killed once the judge has given a
			// seeded number of the answers left, holding the next call.
			judge.holdAt(judge.answers() + rng.IntN(golden-judge.answers()))
			for deadline := time.Now().Add(underwayWithin); judge.held.Load() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the evaluation asked the judge nothing more\n%s", w.proc.logs())
				}
			}
		} else {
			time.Sleep(delay)
		}
		kill("the trigger's wait")
	}
	var run map[string]any
	restarted := time.Now()
	for done := false; !done; time.Sleep(100 * time.Millisecond) {
		if run, done = ended(); !done && time.Since(restarted) > resumeWithin {
			t.Fatalf("the run is still at %v %.0fs after the last restart\n%s", run["step"], time.Since(restarted).Seconds(), w.proc.logs())
		}
	}
	w.proc.stop()

	var resumes []float64
	var where []string
	for _, k := range record {
		resumes = append(resumes, k.resumed.Seconds())
		where = append(where, k.at)
	}
	slices.Sort(resumes)
	t.Logf("chaos: %d kills (seed %d) at %s; time to go on after each restart: min %.1fs, median %.1fs, max %.1fs",
		len(record), seed, strings.Join(where, ", "), resumes[0], resumes[len(resumes)/2], resumes[len(resumes)-1])
	if out := os.Getenv("CURATE_CHAOS_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range record {
			fmt.Fprintf(f, "seed=%d kill=%d resume_s=%.2f running=%s at=%q\n", seed, i+1, k.resumed.Seconds(), strings.Join(k.running, ","), k.at)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}

	if run["status"] != "succeeded" {
		t.Fatalf("the run ended %s: %s", run["status"], run["reason"])
	}
	if n := openai.JobsCreated(); n != 1 {
		t.Errorf("%d training jobs created at the provider, want 1", n)
	}
	if n := vllm.Loads(); n != 1 {
		t.Errorf("the adapter was loaded %d times, want once", n)
	}
	questions, repeated := judge.twice()
	if questions != golden {
		t.Errorf("the judge answered %d questions, want the golden set's %d", questions, golden)
	}
	for _, q := range repeated {
		t.Errorf("the judge answered more than once: %.80q", q)
	}
	var evaluations int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM evaluation_runs WHERE candidate_version_id = $1`, run["model_version_id"]).Scan(&evaluations); err != nil {
		t.Fatal(err)
	}
	if evaluations != 1 {
		t.Errorf("%d evaluations of the run's version, want 1", evaluations)
	}

	// The aliases are where the run's steps say.
	w.start()
	defer w.proc.stop()
	version := w.get("/api/models/" + run["model_version_id"].(string))
	for _, st := range run["steps"].([]any) {
		step := st.(map[string]any)
		alias := map[string]string{"stage": "candidate", "promote": "production"}[step["name"].(string)]
		if alias == "" {
			continue
		}
		d := w.get("/api/deployments/" + step["links"].(map[string]any)["deployment_id"].(string))
		r := w.get("/api/models/resolve?name=support&alias=" + alias)
		if d["status"] != "succeeded" || d["target"] != "openai-prod" || r["version"] != version["version"] || r["model"] != version["model_id"] {
			t.Errorf("%s: its deployment %v; %s resolves to %v, the run's version is %v (%v)", step["name"], d, alias, r, version["version"], version["model_id"])
		}
	}
}
