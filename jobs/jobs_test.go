package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// secretBox seals stored secrets with a test key.
func secretBox(t *testing.T) *secrets.Box {
	t.Helper()
	box, err := secrets.New(strings.Repeat("k", secrets.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// A real River client on a real database inserts the maintenance job and
// works it: the expired sign-in failure and session are gone, the fresh
// ones stay; an upload abandoned two days ago (its run never recorded) is
// deleted, while a queued run's file as old stays.
func TestMaintenanceJobRuns(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	u, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "ada@acme.test", Role: "viewer", Password: "a-long-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, expires := range []time.Time{time.Now().Add(-time.Hour), time.Now().Add(time.Hour)} {
		id := bytes.Repeat([]byte{byte(i + 1)}, 32)
		if err := q.SessionInsert(ctx, db.SessionInsertParams{ID: id, UserID: u.ID, OrgID: org.ID, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.LoginFailureInsert(ctx, db.LoginFailureInsertParams{Email: "old@x.test", Ip: "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE login_failures SET created_at = now() - interval '1 day'"); err != nil {
		t.Fatal(err)
	}
	if err := q.LoginFailureInsert(ctx, db.LoginFailureInsertParams{Email: "new@x.test", Ip: "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.DiscardHandler)
	blobDir := t.TempDir()
	bucket, err := blobstore.OpenDir(blobDir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	imp := imports.New(pool, feedback.New(pool), pairs.New(pool), inserter, secretBox(t), bucket, nil, log)
	// The queued run is recorded without its job, so that it stays queued.
	queued, err := q.ImportRunInsert(ctx, db.ImportRunInsertParams{ID: uuid.New(), OrgID: org.ID, Kind: imports.KindJSONL, FileName: "f.jsonl", FileSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	abandoned, waiting := imports.UploadKey(org.ID, uuid.New()), imports.UploadKey(org.ID, queued.ID)
	twoDaysAgo := time.Now().Add(-48 * time.Hour)
	for _, key := range []string{abandoned, waiting} {
		if err := bucket.WriteAll(ctx, key, []byte("{}\n"), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(blobDir, filepath.FromSlash(key)), twoDaysAgo, twoDaysAgo); err != nil {
			t.Fatal(err)
		}
	}

	// Validation facts, one past their keeping time.
	for i, age := range []time.Duration{datasets.FactsKeep + time.Hour, time.Hour} {
		if _, err := pool.Exec(ctx, `INSERT INTO item_facts (org_id, profile, content_sha, facts, created_at) VALUES ($1, 'p', $2, '\x01', $3)`,
			org.ID, []byte{byte(i)}, time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
	}

	client, err := jobs.NewClient(pool, &app.Services{Heartbeats: jobq.NewHeartbeats(pool), Accounts: acc, Log: log, Imports: imp, Datasets: datasets.New(pool, nil, nil, nil)}, jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck

	// The periodic job runs on start; insert one more explicitly as well.
	if _, err := client.Insert(ctx, jobs.MaintenanceArgs{}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}}); err != nil {
		t.Fatal(err)
	}
	// The imports' periodic Langfuse job runs on start too.
	for worked := false; !worked; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				t.Fatalf("event %s for %s: %v", ev.Kind, ev.Job.Kind, ev.Job.Errors)
			}
			worked = ev.Job.Kind == (jobs.MaintenanceArgs{}).Kind()
		case <-time.After(30 * time.Second):
			t.Fatal("the job was not worked")
		}
	}
	counts, err := q.LoginFailureCount(ctx, db.LoginFailureCountParams{Email: "old@x.test", Ip: "10.0.0.1", Since: time.Now().Add(-48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if counts.ByEmail != 0 || counts.ByIp != 1 {
		t.Fatalf("after maintenance: old=%d, by ip=%d; want 0 and 1", counts.ByEmail, counts.ByIp)
	}
	if _, err := os.Stat(filepath.Join(blobDir, filepath.FromSlash(abandoned))); !os.IsNotExist(err) {
		t.Errorf("the abandoned upload is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(blobDir, filepath.FromSlash(waiting))); err != nil {
		t.Errorf("the queued run's file was swept: %v", err)
	}
	var facts []byte
	if err := pool.QueryRow(ctx, "SELECT string_agg(content_sha, ''::bytea) FROM item_facts").Scan(&facts); err != nil || !bytes.Equal(facts, []byte{1}) {
		t.Errorf("after maintenance the facts of %x are kept, want only the recent one's (%v)", facts, err)
	}
	var left []byte
	if err := pool.QueryRow(ctx, "SELECT string_agg(id, ''::bytea) FROM sessions").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(left, bytes.Repeat([]byte{2}, 32)) {
		t.Fatalf("after maintenance the sessions are %x; want only the live one", left)
	}
}
