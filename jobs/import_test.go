package jobs_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/jobs"
)

// An uploaded file is imported by a real River client: a good file (of
// feedback or of pairs) completes, a cut-off one is cancelled (not retried)
// with its run failed; no upload is left in the bucket. The periodic
// Langfuse job queues a sync that stores the fake's score.
func TestImportJobs(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	log := slog.New(slog.DiscardHandler)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	blobDir := t.TempDir()
	bucket, err := blobstore.OpenDir(blobDir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	imp := imports.New(pool, feedback.New(pool), pairs.New(pool), inserter, secretBox(t), bucket, loopback(t), log)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := langfusetest.NewServer(t, langfusetest.Options{
		Traces: []langfusetest.Trace{{ID: "tr-1", Input: "Hi?", Output: "Hello."}},
		Scores: []langfusetest.Score{{ID: "s-1", TraceID: "tr-1", Name: "helpful", DataType: "BOOLEAN", Value: 1, Timestamp: at}},
	})
	if _, err := imp.SaveConnection(ctx, audit.System, org.ID, imports.ConnectionInput{Host: srv.URL, PublicKey: srv.PublicKey, SecretKey: srv.SecretKey}); err != nil {
		t.Fatal(err)
	}

	client, err := jobs.NewClient(pool, &app.Services{Heartbeats: jobq.NewHeartbeats(pool), Accounts: accounts.New(pool, accounts.DefaultSessionTTL), Log: log, Imports: imp}, jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck

	// The service queues each upload's job itself.
	start := func(kind, body string) db.ImportRun {
		run, err := imp.Start(ctx, audit.System, imports.NewRun{OrgID: org.ID, Kind: kind, FileName: "f.jsonl", Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	trl, err := os.ReadFile(filepath.Join("..", "internal", "importfile", "testdata", "trl_preference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	good := start(imports.KindJSONL, `{"query":"q","response":"r","feedback_type":"thumbs_up"}`+"\n")
	bad := start(imports.KindJSONL, `{"query":"q","response":"r","feedback_type":"thumbs_up"}`+"\n"+`{"query":"q2","resp`)
	pairFile := start(imports.KindTRL, string(trl))

	// Three import jobs, the periodic job (run on start) and the sync it queues.
	want := map[string]river.EventKind{}
	imported := 0
	for imported < 3 || want["langfuse_sync"] == "" {
		select {
		case ev := <-events:
			key := ev.Job.Kind
			if ev.Job.Kind == (imports.ImportArgs{}).Kind() {
				key += ":" + string(ev.Job.EncodedArgs)
				imported++
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
	}{
		{good, imports.StatusSucceeded, river.EventKindJobCompleted},
		{bad, imports.StatusFailed, river.EventKindJobCancelled},
		{pairFile, imports.StatusSucceeded, river.EventKindJobCompleted},
	} {
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
	// The TRL fixture: three pairs, one skipped (replies equal but for case).
	got, err := q.ImportRunGet(ctx, db.ImportRunGetParams{OrgID: org.ID, ID: pairFile.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM preference_pairs WHERE method = 'import'").Scan(&n); err != nil || n != 3 || got.Stored != 3 || got.Skipped != 1 {
		t.Fatalf("pair run: %d pairs stored, run says %d stored and %d skipped (%v)", n, got.Stored, got.Skipped, err)
	}
	if left := filesUnder(t, blobDir); len(left) != 0 {
		t.Fatalf("uploads left in the bucket after their runs: %v", left)
	}
}

// filesUnder lists the files in a directory tree.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
