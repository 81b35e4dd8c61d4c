package imports_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/imports"
)

// blobPath is where the env's directory bucket keeps the blob at key.
func (e *env) blobPath(key string) string { return filepath.Join(e.blobDir, filepath.FromSlash(key)) }

// blobs lists every file in the env's bucket, by key.
func (e *env) blobs(t *testing.T) []string {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(e.blobDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(e.blobDir, path)
		keys = append(keys, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// upload starts a run on an uploaded body.
func (e *env) upload(t *testing.T, kind, body string) db.ImportRun {
	t.Helper()
	run, err := e.svc.Start(e.ctx, audit.System, imports.NewRun{OrgID: e.orgID, Kind: kind, FileName: "f.jsonl", Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// An upload is kept in the bucket, readable by its owner alone, until its
// run ends; its job is queued with the run, and its start is audited. A
// refused upload keeps nothing.
func TestUploadedRun(t *testing.T) {
	e := newEnv(t)
	user := audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}
	run, err := e.svc.Start(e.ctx, audit.Actor{Kind: "system", Label: user.Label}, imports.NewRun{OrgID: e.orgID, Kind: imports.KindJSONL,
		FileName: `C:\Users\ada\feedback.jsonl`, Body: strings.NewReader(goodLines)})
	if err != nil {
		t.Fatal(err)
	}
	if run.FileName != "feedback.jsonl" || run.FileSize != int64(len(goodLines)) || run.Status != imports.StatusQueued {
		t.Fatalf("run %+v", run)
	}
	if n := e.count(t, "SELECT count(*) FROM river_job WHERE kind = 'import_run' AND args->>'run_id' = $1", run.ID.String()); n != 1 {
		t.Fatalf("%d import jobs queued for the run, want 1", n)
	}
	key := "uploads/" + e.orgID.String() + "/" + run.ID.String()
	if got := imports.UploadKey(e.orgID, run.ID); got != key {
		t.Fatalf("upload key %q, want %q", got, key)
	}
	if keys := e.blobs(t); len(keys) != 1 || keys[0] != key {
		t.Fatalf("bucket holds %v, want the upload alone", keys)
	}
	b, err := os.ReadFile(e.blobPath(key))
	fi, serr := os.Stat(e.blobPath(key))
	if err != nil || serr != nil || string(b) != goodLines || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept file: %q, %v, mode %v, want the upload with mode 0600", b, err, fi.Mode())
	}
	if n := e.count(t, "SELECT count(*) FROM audit_log WHERE action = 'import.start' AND target_id = $1", run.ID.String()); n != 1 {
		t.Fatalf("%d audit entries for the start", n)
	}
	sum, err := e.svc.RunUpload(e.ctx, e.orgID, run.ID, false)
	if err != nil || sum.Stored != 3 {
		t.Fatalf("run: %+v, %v; want 3 stored", sum, err)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback WHERE source = 'file'"); n != 3 {
		t.Fatalf("%d rows stored, want 3", n)
	}
	if keys := e.blobs(t); len(keys) != 0 {
		t.Fatalf("the upload was not deleted after its run: %v", keys)
	}

	for name, in := range map[string]imports.NewRun{
		"bad kind": {OrgID: e.orgID, Kind: "csv", FileName: "a.csv", Body: strings.NewReader("x")},
		"empty":    {OrgID: e.orgID, Kind: "jsonl", FileName: "a.jsonl", Body: strings.NewReader("")},
		"no name":  {OrgID: e.orgID, Kind: "trl", FileName: " ", Body: strings.NewReader("x")},
	} {
		if _, err := e.svc.Start(e.ctx, user, in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := e.count(t, "SELECT count(*) FROM import_runs"); n != 1 {
		t.Errorf("%d runs recorded, want only the good one", n)
	}
	if n := e.count(t, "SELECT count(*) FROM river_job"); n != 1 {
		t.Errorf("%d jobs queued, want only the good run's", n)
	}
	if keys := e.blobs(t); len(keys) != 0 {
		t.Errorf("refused uploads left %v in the bucket", keys)
	}
}

// A run that fails deletes its upload when no attempt follows: at once for
// a bad file, and for any other failure only on the final attempt (the
// earlier ones leave it for the retry). A run whose upload is gone fails
// for good.
func TestFailedUploadRunDeletesIt(t *testing.T) {
	e := newEnv(t)
	bad := e.upload(t, imports.KindJSONL, goodLines+`{"query":"cut","resp`)
	_, err := e.svc.RunUpload(e.ctx, e.orgID, bad.ID, false)
	if !imports.IsBadInput(err) {
		t.Fatalf("bad file: %v, want a bad-input error", err)
	}
	if _, err := os.Stat(e.blobPath(imports.UploadKey(e.orgID, bad.ID))); !os.IsNotExist(err) {
		t.Fatalf("a bad file's upload was kept: %v", err)
	}

	// The database refuses to store (feedback is locked away) until the
	// attempt's time runs out: a failure a retry may not meet.
	run := e.upload(t, imports.KindJSONL, goodLines)
	key := imports.UploadKey(e.orgID, run.ID)
	attempt := func(final bool) db.ImportRun {
		t.Helper()
		tx, err := e.pool.Begin(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(e.ctx) //nolint:errcheck
		if _, err := tx.Exec(e.ctx, "LOCK TABLE feedback IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		defer cancel()
		if _, err := e.svc.RunUpload(ctx, e.orgID, run.ID, final); err == nil || imports.IsBadInput(err) {
			t.Fatalf("run with feedback locked: %v, want a failure not of the input", err)
		}
		got, err := e.svc.GetRun(e.ctx, e.orgID, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := attempt(false)
	if got.Status != imports.StatusFailed || !strings.Contains(got.Error, "tried again") {
		t.Fatalf("first attempt: %s %q, want failed and tried again", got.Status, got.Error)
	}
	if _, err := os.Stat(e.blobPath(key)); err != nil {
		t.Fatalf("the upload is gone before the last attempt: %v", err)
	}
	got = attempt(true)
	if got.Status != imports.StatusFailed || strings.Contains(got.Error, "tried again") {
		t.Fatalf("final attempt: %s %q, want failed for good", got.Status, got.Error)
	}
	if keys := e.blobs(t); len(keys) != 0 {
		t.Fatalf("the final attempt left %v in the bucket", keys)
	}

	// Its job tried once more (a retry after a crash): the file is gone,
	// and the run says so for good.
	_, err = e.svc.RunUpload(e.ctx, e.orgID, run.ID, false)
	got, gerr := e.svc.GetRun(e.ctx, e.orgID, run.ID)
	if !imports.IsBadInput(err) || gerr != nil || got.Status != imports.StatusFailed || !strings.Contains(got.Error, "upload it again") {
		t.Fatalf("run without its upload: %v; row %s %q", err, got.Status, got.Error)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback"); n != 0 {
		t.Fatalf("%d rows stored by failed runs", n)
	}
}

// The sweep deletes, among uploads older than the cutoff, those that no
// run will read; it leaves younger ones, and a queued run's file however
// old.
func TestSweepUploads(t *testing.T) {
	e := newEnv(t)
	old := time.Now().Add(-2 * imports.UploadGrace)
	age := func(key string) {
		t.Helper()
		if err := os.Chtimes(e.blobPath(key), old, old); err != nil {
			t.Fatal(err)
		}
	}
	put := func(key string) {
		t.Helper()
		if err := e.svc.Bucket.WriteAll(e.ctx, key, []byte("x\n"), nil); err != nil {
			t.Fatal(err)
		}
	}

	queued := imports.UploadKey(e.orgID, e.upload(t, imports.KindJSONL, goodLines).ID)
	age(queued)
	fresh := imports.UploadKey(e.orgID, e.upload(t, imports.KindJSONL, goodLines).ID)
	// A run that succeeded but whose file stayed (its worker died before
	// deleting it), one whose worker died while running, and one
	// running now.
	ended, dead, alive := e.upload(t, imports.KindJSONL, goodLines), e.upload(t, imports.KindJSONL, goodLines), e.upload(t, imports.KindJSONL, goodLines)
	for _, r := range []db.ImportRun{ended, dead, alive} {
		age(imports.UploadKey(e.orgID, r.ID))
	}
	q := db.New(e.pool)
	if err := q.ImportRunUpdateFinished(e.ctx, db.ImportRunUpdateFinishedParams{OrgID: e.orgID, ID: ended.ID, Status: imports.StatusSucceeded, SkipReasons: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []db.ImportRun{dead, alive} {
		if err := q.ImportRunUpdateStarted(e.ctx, db.ImportRunUpdateStartedParams{OrgID: e.orgID, ID: r.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(e.ctx, "UPDATE import_runs SET updated_at = $2 WHERE id = $1", dead.ID, old); err != nil {
		t.Fatal(err)
	}
	// A file kept before the server stopped, without its run, and a
	// write's temporary file a crash left.
	norun := imports.UploadKey(e.orgID, uuid.New())
	put(norun)
	age(norun)
	partial := imports.UploadKey(e.orgID, uuid.New()) + ".18a2b3c4d5e6f708.tmp"
	if err := os.WriteFile(e.blobPath(partial), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	age(partial)

	n, err := e.svc.SweepUploads(e.ctx, time.Now().Add(-imports.UploadGrace))
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, k := range e.blobs(t) {
		kept[k] = true
	}
	want := map[string]bool{queued: true, fresh: true, imports.UploadKey(e.orgID, alive.ID): true}
	if n != 4 || len(kept) != len(want) {
		t.Fatalf("swept %d, kept %v; want 4 swept and %v kept", n, kept, want)
	}
	for k := range want {
		if !kept[k] {
			t.Errorf("%s was swept", k)
		}
	}
}
