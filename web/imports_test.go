package web_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/web/webtest"
)

// upload posts a file to /imports as the page's form does.
func upload(t *testing.T, c *webtest.Client, kind, name, content string, withCSRF bool) webtest.Response {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if withCSRF {
		_ = w.WriteField("_csrf", c.CSRF())
	}
	_ = w.WriteField("kind", kind)
	fw, err := w.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte(content))
	w.Close()
	return c.Do(http.MethodPost, "/imports", &body, http.Header{"Content-Type": {w.FormDataContentType()}})
}

// runIDs maps the file names of the runs the imports page lists to their ids.
func runIDs(page string) map[string]string {
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`id="run-([0-9a-f-]{36})"[^>]*>\s*<td>[^<]*<br/?><span class="muted">[^<]*</span></td><td>([^<]+)<br`).FindAllStringSubmatch(page, -1) {
		ids[m[2]] = m[1]
	}
	return ids
}

// finishedRow polls a run's row as HTMX does (it refreshes itself while
// the run is active) and returns it once the run has ended.
func finishedRow(t *testing.T, c *webtest.Client, id string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.Do(http.MethodGet, "/imports/runs/"+id+"/row", nil, http.Header{"HX-Request": {"true"}}).Must(t, http.StatusOK)
		if !strings.Contains(r.Body, `hx-trigger="every 2s"`) {
			return r.Body
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still active: %s", id, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestImportsPage(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "cur@acme.test", "curator")
	s.User(org, "view@acme.test", "viewer")

	viewer := s.SignedIn("view@acme.test")
	viewer.Get("/imports").Must(t, http.StatusForbidden)
	upload(t, viewer, "jsonl", "f.jsonl", "{}\n", true).Must(t, http.StatusForbidden)

	c := s.SignedIn("cur@acme.test")
	page := c.Get("/imports").Must(t, http.StatusOK)
	for _, want := range []string{`enctype="multipart/form-data"`, `name="kind"`, `type="file"`, "No imports yet."} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("imports page lacks %s", want)
		}
	}
	if res := upload(t, c, "jsonl", "f.jsonl", "{}\n", false); res.Status != http.StatusForbidden {
		t.Fatalf("upload without the CSRF token: %d", res.Status)
	}
	if res := upload(t, c, "csv", "f.csv", "a,b\n", true).Must(t, http.StatusUnprocessableEntity); !strings.Contains(res.Body, "must be one of jsonl, oasst, seed001, seed004, hh-rlhf") {
		t.Errorf("bad kind: no message beside the field")
	}

	good := `{"query":"What is 2+2?","response":"4","feedback_type":"thumbs_up"}` + "\n" +
		`{"query":"Capital of France?","response":"Lyon","feedback_type":"correction","correction":"Paris"}` + "\n"
	res := upload(t, c, "jsonl", "good.jsonl", good, true).Must(t, http.StatusSeeOther)
	if res.Header.Get("Location") != "/imports" {
		t.Fatalf("redirect to %q", res.Header.Get("Location"))
	}
	cut := good + `{"query":"cut","resp`
	upload(t, c, "jsonl", "cut.jsonl", cut, true).Must(t, http.StatusSeeOther)

	page = c.Get("/imports").Must(t, http.StatusOK)
	ids := runIDs(page.Body)
	if ids["good.jsonl"] == "" || ids["cut.jsonl"] == "" {
		t.Fatalf("runs not listed: %v", ids)
	}
	if !strings.Contains(page.Body, "<progress max=") {
		t.Error("no progress bar")
	}

	row := func(id string) string { return finishedRow(t, c, id) }
	if body := row(ids["good.jsonl"]); !strings.Contains(body, `data-status="succeeded"`) || !strings.Contains(body, "2 stored, 0 already there, 0 skipped") ||
		!strings.Contains(body, `<progress max="`+strconv.Itoa(2*len(good))+`" value="`+strconv.Itoa(2*len(good))+`"`) {
		t.Errorf("good run: %s", body)
	}
	if body := row(ids["cut.jsonl"]); !strings.Contains(body, `data-status="failed"`) || !strings.Contains(body, "line 3") {
		t.Errorf("cut run: %s", body)
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM feedback WHERE source = 'file'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d file rows, want the good file's 2 (%v)", n, err)
	}
	assertAudit(t, s, "import.start")

	// Another organisation's run is not found.
	other := s.Org("other")
	s.User(other, "cur@other.test", "curator")
	s.SignedIn("cur@other.test").Get("/imports/runs/"+ids["good.jsonl"]+"/row").Must(t, http.StatusNotFound)
}

func TestLangfuseConnectionPage(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	s.User(org, "admin@acme.test", "admin")
	s.User(org, "cur@acme.test", "curator")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lf := langfusetest.NewServer(t, langfusetest.Options{
		Traces: []langfusetest.Trace{{ID: "tr-1", Input: "Hi?", Output: "Hello."}},
		Scores: []langfusetest.Score{{ID: "s-1", TraceID: "tr-1", Name: "stars", DataType: "NUMERIC", Value: 5, Timestamp: at}},
	})

	cur := s.SignedIn("cur@acme.test")
	if page := cur.Get("/imports/langfuse").Must(t, http.StatusOK); strings.Contains(page.Body, `name="secret_key"`) {
		t.Error("a curator sees the connection form")
	}
	cur.PostForm("/imports/langfuse", url.Values{"host": {lf.URL}, "public_key": {lf.PublicKey}, "secret_key": {lf.SecretKey}}).Must(t, http.StatusForbidden)

	admin := s.SignedIn("admin@acme.test")
	admin.Get("/imports/langfuse").Must(t, http.StatusOK)
	res := admin.PostForm("/imports/langfuse", url.Values{"host": {"not a url"}, "public_key": {lf.PublicKey}, "secret_key": {"x"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-host"`) {
		t.Error("no message beside the host field")
	}

	// A wrong secret: saved, but the page says the keys were rejected.
	admin.PostForm("/imports/langfuse", url.Values{"host": {lf.URL}, "public_key": {lf.PublicKey}, "secret_key": {"sk-lf-wrong"}}).Must(t, http.StatusSeeOther)
	page := admin.Get("/imports/langfuse").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "rejected the API keys") || strings.Contains(page.Body, "sk-lf-wrong") {
		t.Fatalf("after a wrong secret the page does not say so, or shows the secret: %s", page.Body)
	}
	cur.PostForm("/imports/langfuse/sync", nil).Must(t, http.StatusSeeOther)
	waitSynced := func(want string) string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			body := admin.Get("/imports/langfuse").Body
			if strings.Contains(body, want) && !strings.Contains(body, "syncing…") {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("page never showed %q: %s", want, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitSynced("Last attempt failed")
	// River marks the job finished a moment after the sync has recorded its
	// failure; until then a second "Sync now" is the same job (the page
	// says so), so wait for it to end.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var waiting int
		if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'langfuse_sync'
			AND state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed sync's job never ended")
		}
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM feedback").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after a refused sync", n)
	}

	// The right secret, the secret never shown; sync now stores the score.
	admin.PostForm("/imports/langfuse", url.Values{"host": {lf.URL}, "public_key": {lf.PublicKey}, "secret_key": {lf.SecretKey}}).Must(t, http.StatusSeeOther)
	page = admin.Get("/imports/langfuse").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "Langfuse accepted the keys") || strings.Contains(page.Body, lf.SecretKey) {
		t.Fatalf("after saving the right keys: %s", page.Body)
	}
	admin.PostForm("/imports/langfuse/sync", nil).Must(t, http.StatusSeeOther)
	body := waitSynced("1 new, 0 already there, 0 skipped")
	if strings.Contains(body, "Last attempt failed") {
		t.Error("the old error is still shown")
	}
	assertAudit(t, s, "langfuse.connection_save", "langfuse.sync_requested")
}

// Pair files are uploaded on the same page, checked whole first and
// imported by a job like feedback files: the run records their kind and
// counts, and the pairs are stored as the uploader's.
func TestImportPairsUpload(t *testing.T) {
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	cur := s.User(org, "cur@acme.test", "curator")
	c := s.SignedIn("cur@acme.test")

	page := c.Get("/imports").Must(t, http.StatusOK)
	for _, kind := range []string{"hh-rlhf", "oasst-pairs", "trl", "openai-preference"} {
		if !strings.Contains(page.Body, `<option value="`+kind+`"`) {
			t.Errorf("the form offers no %s files", kind)
		}
	}
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "internal", "importfile", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	trl := fixture("trl_preference.jsonl")
	upload(t, c, "trl", "trl_preference.jsonl", trl, true).Must(t, http.StatusSeeOther)
	upload(t, c, "hh-rlhf", "hh_rlhf.jsonl.gz", fixture("hh_rlhf.jsonl.gz"), true).Must(t, http.StatusSeeOther)
	upload(t, c, "trl", "trl_malformed.jsonl", fixture("trl_malformed.jsonl"), true).Must(t, http.StatusSeeOther)

	ids := runIDs(c.Get("/imports").Must(t, http.StatusOK).Body)
	body := finishedRow(t, c, ids["trl_preference.jsonl"])
	for _, want := range []string{`data-status="succeeded"`, "TRL preference (pairs)", "3 stored, 0 already there, 1 skipped",
		"chosen and rejected replies are the same text: 1",
		`<progress max="` + strconv.Itoa(2*len(trl)) + `" value="` + strconv.Itoa(2*len(trl)) + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("TRL run lacks %q: %s", want, body)
		}
	}
	body = finishedRow(t, c, ids["hh_rlhf.jsonl.gz"])
	for _, want := range []string{`data-status="succeeded"`, "2 stored, 0 already there, 2 skipped", "empty chosen reply: 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("HH-RLHF run lacks %q: %s", want, body)
		}
	}
	if body := finishedRow(t, c, ids["trl_malformed.jsonl"]); !strings.Contains(body, `data-status="failed"`) || !strings.Contains(body, "line 2") {
		t.Errorf("malformed run: %s", body)
	}

	var stored, byCurator int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE annotator_id = $1)
		FROM preference_pairs WHERE method = 'import'`, cur).Scan(&stored, &byCurator); err != nil {
		t.Fatal(err)
	}
	if stored != 5 || byCurator != 5 {
		t.Fatalf("%d pairs stored (%d as the uploader's), want the good files' 5", stored, byCurator)
	}
	var kind string
	var runStored, runSkipped int
	if err := s.Pool.QueryRow(t.Context(), `SELECT kind, stored, skipped FROM import_runs WHERE id = $1`, ids["trl_preference.jsonl"]).
		Scan(&kind, &runStored, &runSkipped); err != nil || kind != "trl" || runStored != 3 || runSkipped != 1 {
		t.Fatalf("TRL run row: %s, %d stored, %d skipped (%v)", kind, runStored, runSkipped, err)
	}
	if list := c.Get("/pairs?method=import").Must(t, http.StatusOK); !strings.Contains(list.Body, "Why is the sea salty?") {
		t.Error("the pairs page does not list an imported pair")
	}

	// The same file again stores nothing twice.
	upload(t, c, "trl", "again.jsonl", trl, true).Must(t, http.StatusSeeOther)
	if body := finishedRow(t, c, runIDs(c.Get("/imports").Body)["again.jsonl"]); !strings.Contains(body, "0 stored, 3 already there, 1 skipped") {
		t.Errorf("second upload: %s", body)
	}
}

// Two servers on one database and one blob directory, each with its own
// data directory, as two machines: a file uploaded through the web-only
// server is imported by the other's workers, and once its run has ended no
// copy of it is left in the blob store or on either server's disk.
func TestImportUploadedOnOneServerWorkedOnAnother(t *testing.T) {
	blobDir := t.TempDir()
	front := webtest.New(t, webtest.Options{Workers: 0, Configure: func(cfg *config.Config) { cfg.BlobURL = "file://" + blobDir }})
	back := front.Another(webtest.Options{Workers: 2})
	if back.App.Config.DataDir == front.App.Config.DataDir || back.App.Config.BlobURL != front.App.Config.BlobURL {
		t.Fatal("the servers share a data directory, or not the blob store")
	}
	org := front.Org("acme")
	front.User(org, "cur@acme.test", "curator")
	c := front.SignedIn("cur@acme.test")

	good := `{"query":"What is 2+2?","response":"4","feedback_type":"thumbs_up","external_id":"two-1"}` + "\n" +
		`{"query":"Capital of France?","response":"Lyon","feedback_type":"correction","correction":"Paris","external_id":"two-2"}` + "\n"
	upload(t, c, "jsonl", "good.jsonl", good, true).Must(t, http.StatusSeeOther)
	id := runIDs(c.Get("/imports").Must(t, http.StatusOK).Body)["good.jsonl"]
	if body := finishedRow(t, c, id); !strings.Contains(body, `data-status="succeeded"`) || !strings.Contains(body, "2 stored") {
		t.Fatalf("run: %s", body)
	}
	var n int
	if err := front.Pool.QueryRow(t.Context(), "SELECT count(*) FROM feedback WHERE external_id IN ('two-1', 'two-2') AND source = 'file'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of the file's rows stored, want 2 (%v)", n, err)
	}

	// What each server keeps of its own: its generated keys, and no more.
	for dir, allowed := range map[string][]string{
		blobDir:                  nil,
		front.App.Config.DataDir: {"session.key", "secret.key"},
		back.App.Config.DataDir:  nil,
	} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !slices.Contains(allowed, d.Name()) {
				t.Errorf("%s is left after the run", path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
