package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/provider/openaitest"
)

// killedKind is one row of TestEachKindSurvivesKill: work of one job kind that
// the test sets going and holds mid-work at a stand-in, and what it must
// have done, once, after the restart.
type killedKind struct {
	kind string
	// start sets the work going on the running process.
	start func()
	// underway reports that the work is held mid-work at its stand-in,
	// everything it was answered before stored.
	underway func() bool
	// release lets the stand-in answer again, once the process is dead.
	release func()
	// done reports that the work is complete.
	done func() bool
	// check looks for a duplicate side effect at the stand-in.
	check func(t *testing.T)
	took  time.Duration
}

// The work of the job kinds that beat and had no kill test of their own,
// all under way at once in the real binary, each held mid-work at its
// stand-in (a judge's call, the provider's job creation, a Langfuse
// trace, a report being computed): the process is killed with SIGKILL,
// started again on the same database, and within 90 s of the restarted
// process being ready every piece of work is complete, the killed
// attempt of each recorded as given up by the heartbeat sweep, with no
// side effect twice: no judge question answered twice (agreement_run,
// codebook_suggest, live_score), one training job created at the
// provider though the killed process never saw the provider's answer
// (finetune_advance), the Langfuse scores stored once (langfuse_sync),
// one report of the version (dataset_report).
func TestEachKindSurvivesKill(t *testing.T) {
	ctx := context.Background()
	openai := openaitest.New(t)
	w := newCrashWorld(t, "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+openai.URL(), "CURATE_FINETUNE_POLL=50ms")
	pool := w.pool
	acme, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	org := acme.ID
	w.apiKey("acme")

	// The services of the test's own side start the work, on the same
	// database and with the same keys as the binary; the binary's
	// workers do it.
	cfg := config.Defaults()
	cfg.DataDir, cfg.OutboundAllow = t.TempDir(), "127.0.0.0/8,::1"
	cfg.SessionKey, cfg.SecretKey = "crash-test-session-key-0123456789abcdef", "crash-test-secret-key-0123456789abcdef"
	cfg.OpenAIAPIKey, cfg.OpenAIBaseURL = "sk-test", openai.URL()
	svc, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Scratch.Close() })
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	endpoint := func(name string, j *heldJudge) {
		t.Helper()
		if _, err := svc.Endpoints.Create(ctx, audit.System, org, endpoints.NewEndpoint{Name: name, BaseURL: j.URL + "/v1", Model: "judge-chat",
			APIKey: "sk-judge", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10}); err != nil {
			t.Fatal(err)
		}
	}
	ingest := func(items []feedback.Item) []uuid.UUID {
		t.Helper()
		res, err := svc.Feedback.IngestBatch(ctx, org, "api", items)
		if err != nil {
			t.Fatal(err)
		}
		return res.IDs
	}
	score := func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.8, "safety_flag": false, "critique": "Fine."}`, PromptTokens: 1000, CompletionTokens: 100}
	}
	noRepeats := func(j *heldJudge, want int) func(t *testing.T) {
		return func(t *testing.T) {
			questions, repeated := j.twice()
			if questions != want {
				t.Errorf("the judge answered %d questions, want %d", questions, want)
			}
			for _, q := range repeated {
				t.Errorf("the judge answered more than once: %.80q", q)
			}
		}
	}

	// agreement_run: the judge over ten rated items, held after four.
	agreeJudge := newHeldJudge(t, score, nil)
	agreeJudge.holdAfter = 4
	var agreement uuid.UUID
	agreementRow := killedKind{kind: "agreement_run",
		start: func() {
			endpoint("agree-judge", agreeJudge)
			var items []feedback.Item
			for i := range 10 {
				items = append(items, feedback.Item{Query: fmt.Sprintf("Agreement question %d?", i), Response: fmt.Sprintf("Answer %d.", i),
					FeedbackType: "rating", Rating: new(1 + i%5), Tags: []string{"agree"}})
			}
			ingest(items)
			a, err := svc.Judge.StartAgreement(ctx, audit.System, org, judge.AgreementRequest{Endpoint: "agree-judge", Items: 10,
				Filter: feedback.Filter{Tag: "agree"}})
			if err != nil {
				t.Fatal(err)
			}
			agreement = a.ID
		},
		// Each judgement is cached as it comes; the retry finds the
		// cached ones.
		underway: func() bool {
			return agreeJudge.held.Load() > 0 && count(`SELECT count(*) FROM judge_cache`)-count(`SELECT count(*) FROM live_scores WHERE status = 'scored'`) >= 4
		},
		release: agreeJudge.release,
		done: func() bool {
			return count(`SELECT count(*) FROM judge_agreements WHERE id = $1 AND status = 'succeeded'`, agreement) == 1
		},
		check: noRepeats(agreeJudge, 10),
	}

	// codebook_suggest: the reflector over six corrected items, held
	// after two.
	reflector := newHeldJudge(t, func(r chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"section": "Refunds", "rule": "Name the refund window before the steps."}`, PromptTokens: 800, CompletionTokens: 40}
	}, nil)
	reflector.holdAfter = 2
	suggestRow := killedKind{kind: "codebook_suggest",
		start: func() {
			endpoint("reflector", reflector)
			var items []feedback.Item
			for i := range 6 {
				items = append(items, feedback.Item{Query: fmt.Sprintf("Refund question %d?", i), Response: "Ask support.", FeedbackType: "correction",
					Correction: fmt.Sprintf("Refunds take %d days; open Billing, then Refunds.", i+3), Tags: []string{"suggest"}})
			}
			ids := ingest(items)
			if _, err := pool.Exec(ctx, "UPDATE feedback SET status = 'corrected' WHERE id = ANY($1)", ids); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Codebooks.Suggest(ctx, audit.System, org, "support", codebook.SuggestRequest{Endpoint: "reflector", FeedbackIDs: ids}); err != nil {
				t.Fatal(err)
			}
		},
		underway: func() bool {
			return reflector.held.Load() > 0 && count(`SELECT count(*) FROM codebook_suggestions WHERE status = 'ready'`) >= 2
		},
		release: reflector.release,
		done: func() bool {
			return count(`SELECT count(*) FROM codebook_suggestions WHERE status = 'ready'`) == 6
		},
		check: noRepeats(reflector, 6),
	}

	// live_score: production's answers scored as they come, held after
	// three of eight.
	liveJudge := newHeldJudge(t, score, nil)
	liveJudge.holdAfter = 3
	const tuned = "ft:gpt-4o-mini-2024-07-18:acme::crash"
	liveRow := killedKind{kind: "live_score",
		start: func() {
			endpoint("live-judge", liveJudge)
			if _, err := svc.Models.Register(ctx, audit.System, org, models.NewVersion{Name: "support", Version: "1.0.0", ModelID: tuned,
				Kind: models.KindFull}); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id)
				SELECT org_id, registered_model_id, 'production', id FROM model_versions WHERE model_id = $1`, tuned); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.LiveScore.SetForAlias(ctx, audit.System, org, "support", "production", livescore.Config{Endpoint: "live-judge", Rate: 1}); err != nil {
				t.Fatal(err)
			}
			var items []feedback.Item
			for i := range 8 {
				items = append(items, feedback.Item{Query: fmt.Sprintf("Live question %d?", i), Response: fmt.Sprintf("Live answer %d.", i),
					FeedbackType: "thumbs_up", Model: tuned, Tags: []string{"live"}})
			}
			ingest(items)
			// The sample is taken as the minute after the answers' lag.
			svc.LiveScore.Now = func() time.Time { return time.Now().Add(2 * livescore.Lag) }
			if err := svc.LiveScore.SampleAll(ctx); err != nil {
				t.Fatal(err)
			}
		},
		underway: func() bool {
			return liveJudge.held.Load() > 0 && count(`SELECT count(*) FROM live_scores WHERE status = 'scored'`) >= 3
		},
		release: liveJudge.release,
		done:    func() bool { return count(`SELECT count(*) FROM live_scores WHERE status = 'scored'`) == 8 },
		check:   noRepeats(liveJudge, 8),
	}

	// finetune_advance: killed the moment the provider has created the
	// job, before its answer reaches Curate.
	created, killedCreate := make(chan struct{}), make(chan struct{})
	var createOnce, releaseOnce sync.Once
	var createdSeen atomic.Bool
	releaseCreate := func() { releaseOnce.Do(func() { close(killedCreate) }) }
	t.Cleanup(releaseCreate) // a test that failed first must not hold the stand-in
	openai.AfterCreate = func(string) {
		createOnce.Do(func() {
			createdSeen.Store(true)
			close(created)
			<-killedCreate
		})
	}
	var fineTune uuid.UUID
	fineTuneRow := killedKind{kind: "finetune_advance",
		start: func() {
			d := curatingDataset(t, pool, org, 40)
			v, err := svc.Datasets.Freeze(ctx, audit.System, org, d)
			if err != nil {
				t.Fatal(err)
			}
			job, _, err := svc.FineTune.Launch(ctx, audit.System, org, finetune.Request{VersionID: v.ID, Provider: "openai",
				BaseModel: "gpt-4o-mini-2024-07-18"})
			if err != nil {
				t.Fatal(err)
			}
			fineTune = job.ID
		},
		underway: createdSeen.Load,
		release:  releaseCreate,
		done: func() bool {
			return count(`SELECT count(*) FROM fine_tuning_jobs WHERE id = $1 AND status = 'succeeded'`, fineTune) == 1
		},
		check: func(t *testing.T) {
			if n := openai.JobsCreated(); n != 1 {
				t.Errorf("%d jobs created at the provider, want 1", n)
			}
		},
	}

	// langfuse_sync: held at its first trace, the scores read.
	var holdTraces atomic.Bool
	var tracesHeld atomic.Int64
	holdTraces.Store(true)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lf := langfusetest.NewServer(t, langfusetest.Options{
		Traces: []langfusetest.Trace{{ID: "tr-1", Input: "Capital of France?", Output: "Lyon"}, {ID: "tr-2", Input: "How are you?", Output: "Fine."}},
		Scores: []langfusetest.Score{
			{ID: "s-1", TraceID: "tr-1", Name: "correct", DataType: "BOOLEAN", Value: 0, Timestamp: at},
			{ID: "s-2", TraceID: "tr-1", Name: "output", DataType: "CORRECTION", StringValue: "Paris", Timestamp: at.Add(time.Minute)},
			{ID: "s-3", TraceID: "tr-2", Name: "quality", DataType: "NUMERIC", Value: 4, Timestamp: at.Add(2 * time.Minute)},
		},
		Hold: func(ep langfusetest.Endpoint) bool {
			if ep == langfusetest.EndpointTrace && holdTraces.Load() {
				tracesHeld.Add(1)
				return true
			}
			return false
		},
	})
	langfuseRow := killedKind{kind: "langfuse_sync",
		start: func() {
			if _, err := svc.Imports.SaveConnection(ctx, audit.System, org, imports.ConnectionInput{Host: lf.URL, PublicKey: lf.PublicKey,
				SecretKey: lf.SecretKey}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Imports.RequestSync(ctx, audit.System, org); err != nil {
				t.Fatal(err)
			}
		},
		underway: func() bool { return tracesHeld.Load() > 0 },
		release:  func() { holdTraces.Store(false) },
		done: func() bool {
			return count(`SELECT count(*) FROM feedback WHERE source = 'langfuse'`) == 3
		},
		check: func(t *testing.T) {
			if n := count(`SELECT count(*) FROM feedback WHERE source = 'langfuse'`); n != 3 {
				t.Errorf("%d items stored from Langfuse's 3 scores", n)
			}
		},
	}

	// dataset_report: a version of 50,000 pairs frozen last (in an
	// organisation of its own, whose pairs are its own), killed while its
	// report is computed.
	var report uuid.UUID
	reportRow := killedKind{kind: "dataset_report",
		start: func() {
			globex, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "globex", "Globex")
			if err != nil {
				t.Fatal(err)
			}
			d := curatingDataset(t, pool, globex.ID, 50000)
			v, err := svc.Datasets.Freeze(ctx, audit.System, globex.ID, d)
			if err != nil {
				t.Fatal(err)
			}
			report = v.ID
		},
		underway: func() bool {
			return count(`SELECT count(*) FROM river_job WHERE kind = 'dataset_report' AND state = 'running' AND args->>'version_id' = $1`, report.String()) == 1
		},
		release: func() {},
		done: func() bool {
			return count(`SELECT count(*) FROM dataset_version_reports WHERE version_id = $1`, report) == 1
		},
		check: func(t *testing.T) {
			if n := count(`SELECT count(*) FROM dataset_version_reports WHERE version_id = $1`, report); n != 1 {
				t.Errorf("%d reports of the version", n)
			}
		},
	}

	rows := []*killedKind{&agreementRow, &suggestRow, &liveRow, &fineTuneRow, &langfuseRow, &reportRow}
	w.start()
	for _, r := range rows {
		r.start()
		for deadline := time.Now().Add(underwayWithin); !r.underway(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not get under way\n%s", r.kind, w.proc.logs())
			}
		}
	}
	// Every kind is mid-work in the process about to be killed.
	for _, r := range rows {
		if r.done() {
			t.Fatalf("%s finished before the kill", r.kind)
		}
	}
	w.proc.kill()
	for _, r := range rows {
		r.release()
	}

	ready := w.start()
	left := rows
	for len(left) > 0 {
		if time.Since(ready) > 90*time.Second {
			var names []string
			for _, r := range left {
				names = append(names, r.kind)
			}
			t.Fatalf("not done 90 s after the restart: %s\n%s", strings.Join(names, ", "), w.proc.logs())
		}
		var still []*killedKind
		for _, r := range left {
			if r.done() {
				r.took = time.Since(ready)
			} else {
				still = append(still, r)
			}
		}
		left = still
		time.Sleep(100 * time.Millisecond)
	}
	w.proc.stop()
	for _, r := range rows {
		t.Run(r.kind, func(t *testing.T) {
			t.Logf("%s: done %.1fs after the restarted process was ready", r.kind, r.took.Seconds())
			var rescued string
			if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(errors[1]->>'error', '; '), '') FROM river_job WHERE kind = $1 AND attempt > 1`,
				r.kind).Scan(&rescued); err != nil || !strings.Contains(rescued, "heartbeats") {
				t.Errorf("the killed attempt's recorded error: %q (%v), want the heartbeat sweep's", rescued, err)
			}
			r.check(t)
		})
	}
}
