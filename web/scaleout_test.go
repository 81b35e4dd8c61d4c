package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/app"
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
// directory, share one database and one blob directory: an upload made
// through one is imported by the worker and seen on the other, an export
// started on one downloads from the other, and a sign-in made on one holds
// on the other until a sign-out on the first ends it everywhere.
func TestTwoServersAndAWorker(t *testing.T) {
	blobDir := t.TempDir()
	a := webtest.New(t, webtest.Options{Configure: func(cfg *config.Config) { cfg.BlobURL = "file://" + blobDir }})
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
