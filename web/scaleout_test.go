package web_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/blobstore/s3test"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/jobs"
	"github.com/curate/curate/web/webtest"
)

// startWorker runs workers alone on s's database, as `curate worker` does on
// another machine: its own data directory, s's keys and blob store.
func startWorker(t *testing.T, s *webtest.Server) {
	t.Helper()
	cfg := s.App.Config
	cfg.DataDir, cfg.Workers = t.TempDir(), 2
	svc, err := app.New(cfg, s.Pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewClient(s.Pool, svc, jobs.Options{Workers: cfg.Workers, GPUSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = client.Stop(sctx)
		cancel()
	})
}

// Two web servers that work no jobs and one worker, each with its own data
// directory, share one database and one blob store: an upload made
// through one is imported by the worker and seen on the other, an export
// started on one downloads from the other, and a sign-in made on one holds
// on the other until a sign-out on the first ends it everywhere. The blob
// store is each kind a deployment may share: a directory every process
// mounts, and an S3 bucket on a real S3-compatible server (SeaweedFS),
// which the upload and the export's files pass through.
func TestTwoServersAndAWorker(t *testing.T) {
	srv := s3test.Start(t)
	for _, store := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"shared directory", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"s3", func(t *testing.T) string { return srv.Bucket(t, "curate") }},
	} {
		t.Run(store.name, func(t *testing.T) { twoServersAndAWorker(t, store.url(t)) })
	}
}

func twoServersAndAWorker(t *testing.T, blobURL string) {
	ctx := context.Background()
	bucket, err := blobstore.Open(ctx, blobURL, t.TempDir()) // to look into the store beside the servers
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	a := webtest.New(t, webtest.Options{Configure: func(cfg *config.Config) { cfg.BlobURL = blobURL }})
	b := a.Another(webtest.Options{})
	startWorker(t, a)
	org := a.Org("acme")
	a.User(org, "cur@acme.test", "curator")
	key := a.APIKey(org, "ops", "admin")

	// An upload through a, imported by the worker, seen through b.
	ca := a.SignedIn("cur@acme.test")
	body := `{"query":"Where is the export button?","response":"Top right.","feedback_type":"thumbs_up","external_id":"scale-1"}` + "\n"
	upload(t, ca, "jsonl", "one.jsonl", body, true).Must(t, http.StatusSeeOther)
	id := runIDs(ca.Get("/imports").Must(t, http.StatusOK).Body)["one.jsonl"]
	if row := finishedRow(t, ca, id); !strings.Contains(row, `data-status="succeeded"`) {
		t.Fatalf("import run on the worker: %s", row)
	}
	var list struct {
		Data []struct {
			ExternalID string `json:"external_id"`
		} `json:"data"`
	}
	b.API(key, http.MethodGet, "/api/feedback?source=file", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ExternalID != "scale-1" {
		t.Fatalf("b lists %+v; want the item imported through a", list.Data)
	}
	// The upload waited in the store, and is deleted once its run ends.
	waitKeys(t, bucket, "uploads/", nil)

	// An export started on a, worked by the worker, downloaded from b.
	pairs := storePairs(t, a, org, 6)
	var d datasetDoc
	a.API(key, http.MethodPost, "/api/training-datasets", map[string]any{"name": "Scale", "dataset_type": "dpo"}).Must(t, http.StatusCreated).JSON(t, &d)
	base := "/api/training-datasets/" + d.ID
	a.API(key, http.MethodPost, base+"/members", map[string]any{"add": pairs}).Must(t, http.StatusOK)
	a.API(key, http.MethodPatch, base, map[string]any{"status": "ready"}).Must(t, http.StatusOK)
	var e exportDoc
	a.API(key, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference"}).Must(t, http.StatusAccepted).JSON(t, &e)
	e = waitExport(t, b, key, d.ID, e.ID)
	if e.Status != "succeeded" || len(e.Files) == 0 {
		t.Fatalf("export %+v", e)
	}
	// The export's files are in the store, under the export's prefix.
	var want []string
	for _, f := range e.Files {
		want = append(want, org.String()+"/"+d.ID+"/"+e.ID+"/"+f.Name)
	}
	slices.Sort(want)
	waitKeys(t, bucket, org.String()+"/", want)
	for _, f := range e.Files {
		fromA := a.API(key, http.MethodGet, f.URL, nil).Must(t, http.StatusOK).Body
		fromB := b.API(key, http.MethodGet, f.URL, nil).Must(t, http.StatusOK).Body
		if fromA == "" || fromA != fromB {
			t.Errorf("%s: a and b serve different files (%d and %d bytes)", f.Name, len(fromA), len(fromB))
		}
	}

	// A sign-in on a holds on b; signing out on a ends it on b too.
	onB := func() int {
		res, err := ca.HTTP.Get(b.URL + "/feedback") // the jar sends a's cookie: both are 127.0.0.1
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	ca.HTTP.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if st := onB(); st != http.StatusOK {
		t.Fatalf("a's session on b: %d; want 200", st)
	}
	u, _ := url.Parse(a.URL)
	saved := ca.HTTP.Jar.Cookies(u)
	ca.PostForm("/logout", url.Values{}).Must(t, http.StatusSeeOther)
	ca.HTTP.Jar.SetCookies(u, saved) // replay the cookie as it was before sign-out
	if st := onB(); st != http.StatusSeeOther {
		t.Fatalf("the signed-out cookie on b: %d; want a redirect to sign in", st)
	}
}

// waitKeys waits, up to 30 seconds, until bucket holds exactly want under
// prefix (in order).
func waitKeys(t *testing.T, bucket *blob.Bucket, prefix string, want []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []string
		it := bucket.List(&blob.ListOptions{Prefix: prefix})
		for {
			obj, err := it.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, obj.Key)
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the blob store holds %v under %s; want %v", got, prefix, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
