package jobs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/importer"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/jobs"
)

// An uploaded file is imported by a real River client: a good file
// completes, a cut-off one is cancelled (not retried) with its run failed.
// The periodic Langfuse job queues a sync that stores the fake's score.
func TestImportJobs(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	log := slog.New(slog.DiscardHandler)
	org, err := accounts.New(pool).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	imp, err := importer.New(pool, config.Config{DataDir: t.TempDir()}, log)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := langfusetest.NewServer(t, langfusetest.Options{
		Traces: []langfusetest.Trace{{ID: "tr-1", Input: "Hi?", Output: "Hello."}},
		Scores: []langfusetest.Score{{ID: "s-1", TraceID: "tr-1", Name: "helpful", DataType: "BOOLEAN", Value: 1, Timestamp: at}},
	})
	if _, err := imp.SaveConnection(ctx, audit.System, org.ID, importer.ConnectionInput{Host: srv.URL, PublicKey: srv.PublicKey, SecretKey: srv.SecretKey}); err != nil {
		t.Fatal(err)
	}

	client, err := jobs.NewClient(jobs.Deps{Services: &app.Services{Pool: pool, Accounts: accounts.New(pool), Log: log, Imports: imp}}, jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck

	start := func(body string) db.ImportRun {
		run, err := imp.Start(ctx, audit.System, importer.NewRun{OrgID: org.ID, Kind: importer.KindJSONL, FileName: "f.jsonl", Body: strings.NewReader(body)},
			func(ctx context.Context, tx pgx.Tx, run db.ImportRun) error {
				_, err := client.InsertTx(ctx, tx, jobs.ImportArgs{OrgID: run.OrgID, RunID: run.ID}, nil)
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	good := start(`{"query":"q","response":"r","feedback_type":"thumbs_up"}` + "\n")
	bad := start(`{"query":"q","response":"r","feedback_type":"thumbs_up"}` + "\n" + `{"query":"q2","resp`)

	// Two import jobs, the periodic job (run on start) and the sync it queues.
	want := map[string]river.EventKind{}
	imports := 0
	for imports < 2 || want["langfuse_sync"] == "" {
		select {
		case ev := <-events:
			key := ev.Job.Kind
			if ev.Job.Kind == "import_file" {
				key += ":" + string(ev.Job.EncodedArgs)
				imports++
			}
			want[key] = ev.Kind
		case <-time.After(30 * time.Second):
			t.Fatalf("jobs worked so far: %v", want)
		}
	}
	if want["langfuse_sync_all"] != river.EventKindJobCompleted || want["langfuse_sync"] != river.EventKindJobCompleted {
		t.Errorf("langfuse jobs: %v", want)
	}
	q := db.New(pool)
	for _, tc := range []struct {
		run    db.ImportRun
		status string
		event  river.EventKind
	}{{good, importer.StatusSucceeded, river.EventKindJobCompleted}, {bad, importer.StatusFailed, river.EventKindJobCancelled}} {
		got, err := q.ImportRunGet(ctx, db.ImportRunGetParams{OrgID: org.ID, ID: tc.run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.status {
			t.Errorf("run %s: %s (%s), want %s", got.ID, got.Status, got.Error, tc.status)
		}
		found := false
		for key, kind := range want {
			if strings.Contains(key, tc.run.ID.String()) {
				found = true
				if kind != tc.event {
					t.Errorf("job of run %s: %s, want %s", got.ID, kind, tc.event)
				}
			}
		}
		if !found {
			t.Errorf("no job event for run %s", tc.run.ID)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM feedback WHERE source = 'langfuse' AND external_id = 'langfuse:s-1'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("langfuse feedback rows: %d, %v", n, err)
	}
}
