package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/web/webtest"
)

// storePairs stores n preference pairs in the organisation; the first
// mentions an e-mail address.
func storePairs(t *testing.T, s *webtest.Server, org uuid.UUID, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		chosen := fmt.Sprintf("Open Deployments > Status, row %d.", i)
		if i == 0 {
			chosen = "Ask ops@acme.test for the deployment status."
		}
		prompt, _ := json.Marshal([]map[string]string{{"role": "user", "content": fmt.Sprintf("How do I check deployment %d?", i)}})
		sum := sha256.Sum256([]byte(chosen))
		var id uuid.UUID
		if err := s.Pool.QueryRow(context.Background(), `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash)
			VALUES ($1, $2, $3, $4, 'Click the tab.', 'manual', $5) RETURNING id`, org, prompt, fmt.Sprintf("How do I check deployment %d?", i), chosen, sum[:]).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.String())
	}
	return ids
}

// datasetRows is every stored row about a dataset, as text: the dataset,
// its members, versions and exports, its audit entries and the export
// jobs queued. (Other jobs come and go with the workers.)
func datasetRows(t *testing.T, s *webtest.Server, id string) string {
	t.Helper()
	var out string
	err := s.Pool.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT d::text FROM training_datasets d WHERE d.id = $1),
		(SELECT string_agg(m::text, ',' ORDER BY m::text) FROM training_dataset_members m WHERE m.dataset_id = $1),
		(SELECT string_agg(v::text, ',' ORDER BY v::text) FROM dataset_versions v WHERE v.dataset_id = $1),
		(SELECT string_agg(e::text, ',' ORDER BY e::text) FROM dataset_exports e WHERE e.dataset_id = $1),
		(SELECT count(*)::text FROM audit_log WHERE target_id = $1::text),
		(SELECT count(*)::text FROM river_job WHERE kind = 'dataset_export'))`, id).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type datasetDoc struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	SampleCount    int      `json:"sample_count"`
	QualityScore   *float64 `json:"quality_score"`
	ExportURL      string   `json:"export_url"`
	CurrentVersion *struct {
		Number      int    `json:"number"`
		ContentHash string `json:"content_hash"`
		ItemCount   int    `json:"item_count"`
	} `json:"current_version"`
	Exports []exportDoc `json:"exports"`
}

type exportDoc struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	RowsDone int    `json:"rows_done"`
	MaskPII  bool   `json:"mask_pii"`
	Error    string `json:"error"`
	Files    []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"files"`
}

func waitExport(t *testing.T, s *webtest.Server, key, datasetID, exportID string) exportDoc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var e exportDoc
		s.API(key, http.MethodGet, "/api/training-datasets/"+datasetID+"/exports/"+exportID, nil).Must(t, http.StatusOK).JSON(t, &e)
		if e.Status == "succeeded" || e.Status == "failed" {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("export still %s", e.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDatasetAPILifecycleAndExport(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	curator := s.APIKey(org, "curation", "curator")
	viewer := s.APIKey(org, "dashboards", "viewer")
	admin := s.APIKey(org, "ops", "admin")
	other := s.APIKey(s.Org("globex"), "theirs", "admin")
	pairs := storePairs(t, s, org, 12)

	// Bad input names the field.
	var p problemDoc
	s.API(curator, http.MethodPost, "/api/training-datasets", map[string]any{"name": "", "dataset_type": "sft"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "dataset_type,name" {
		t.Fatalf("fields %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/training-datasets", map[string]any{"name": "x", "dataset_type": "dpo"}).Must(t, http.StatusForbidden)

	var d datasetDoc
	s.API(curator, http.MethodPost, "/api/training-datasets", map[string]any{
		"name": "AOMA Support Q4", "dataset_type": "dpo", "split": map[string]any{"strategy": "random", "validation_percent": 25, "seed": 3},
	}).Must(t, http.StatusCreated).JSON(t, &d)
	if d.Status != "draft" || d.SampleCount != 0 {
		t.Fatalf("created %+v", d)
	}
	base := "/api/training-datasets/" + d.ID

	// Exporting a draft: a conflict, nothing recorded.
	s.API(curator, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference"}).Must(t, http.StatusConflict)

	var added struct{ Added int }
	s.API(curator, http.MethodPost, base+"/members", map[string]any{"add": pairs}).Must(t, http.StatusOK).JSON(t, &added)
	if added.Added != 12 {
		t.Fatalf("added %d", added.Added)
	}
	var list struct {
		Data []datasetDoc `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/training-datasets?status=curating", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].SampleCount != 12 {
		t.Fatalf("list %+v", list.Data)
	}
	s.API(viewer, http.MethodGet, "/api/training-datasets?status=bogus", nil).Must(t, http.StatusUnprocessableEntity)
	// A cursor from another list is refused, naming the field.
	pairsCursor := keyset.Cursor{At: time.Now(), ID: uuid.New()}.Encode("pairs")
	s.API(viewer, http.MethodGet, "/api/training-datasets?cursor="+pairsCursor, nil).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "cursor" {
		t.Fatalf("fields %q", p.fields())
	}

	// A stale If-Match is a conflict: nothing is overwritten.
	stale := s.Client().Do(http.MethodPatch, base, strings.NewReader(`{"name":"Renamed"}`),
		http.Header{"Authorization": {"Bearer " + curator}, "Content-Type": {"application/json"}, "If-Match": {`W/"1"`}})
	if stale.Status != http.StatusConflict || !strings.Contains(stale.Body, `"current"`) {
		t.Fatalf("stale If-Match: %d %s", stale.Status, stale.Body)
	}

	// An invalid transition is refused with the reason.
	s.API(curator, http.MethodPatch, base, map[string]any{"status": "exported"}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "status" {
		t.Fatalf("fields %q", p.fields())
	}
	s.API(curator, http.MethodPatch, base, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &d)
	if d.Status != "ready" || d.CurrentVersion == nil || d.CurrentVersion.Number != 1 || d.CurrentVersion.ItemCount != 12 || len(d.CurrentVersion.ContentHash) != 64 {
		t.Fatalf("after ready: %+v", d)
	}

	var rep struct {
		Blocked bool `json:"blocked"`
		Report  struct {
			QualityFormula string  `json:"quality_formula"`
			QualityScore   float64 `json:"quality_score"`
			Examples       int     `json:"examples"`
		} `json:"report"`
	}
	// GET stays a read: the report in the target format (the dataset list's
	// quality score) and in another format, masked or not, write no row.
	before := datasetRows(t, s, d.ID)
	var targetScore float64 // the target format's, masked: the list's score once exported
	for _, q := range []string{"", "?mask_pii=false", "?format=openai_preference"} {
		s.API(viewer, http.MethodGet, base+"/validation"+q, nil).Must(t, http.StatusOK).JSON(t, &rep)
		if rep.Blocked || rep.Report.Examples != 12 || !strings.Contains(rep.Report.QualityFormula, "examples_with_errors") {
			t.Fatalf("report %s: %+v", q, rep)
		}
		if q == "" {
			targetScore = rep.Report.QualityScore
		}
	}
	s.API(viewer, http.MethodGet, base, nil).Must(t, http.StatusOK).JSON(t, &d)
	if d.QualityScore != nil {
		t.Fatalf("quality score %v before any export", *d.QualityScore)
	}
	if after := datasetRows(t, s, d.ID); after != before {
		t.Fatalf("reading the validation report wrote:\nbefore %s\nafter  %s", before, after)
	}

	// PII opt-out: admins only, and audited.
	s.API(curator, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference", "mask_pii": false}).Must(t, http.StatusForbidden)
	var e exportDoc
	s.API(curator, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference"}).Must(t, http.StatusAccepted).JSON(t, &e)
	if !e.MaskPII {
		t.Fatal("masking is not the default")
	}
	e = waitExport(t, s, viewer, d.ID, e.ID)
	if e.Status != "succeeded" || e.RowsDone != 12 || len(e.Files) != 3 {
		t.Fatalf("export %+v", e)
	}
	var raw exportDoc
	s.API(admin, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference", "mask_pii": false}).Must(t, http.StatusAccepted).JSON(t, &raw)
	raw = waitExport(t, s, admin, d.ID, raw.ID)
	assertAudit(t, s, "dataset.create", "dataset.freeze", "dataset.export", "dataset.export_unmasked", "dataset.export_finished")

	// Downloads: through the app, for curators of the organisation only.
	manifestURL := ""
	for _, f := range e.Files {
		if f.Name == "manifest.json" {
			manifestURL = f.URL
		}
	}
	res := s.API(curator, http.MethodGet, manifestURL, nil).Must(t, http.StatusOK)
	m, err := export.ReadManifest(strings.NewReader(res.Body))
	if err != nil {
		t.Fatal(err)
	}
	if m.DatasetVersion != d.CurrentVersion.ContentHash || m.Counts["train"] != 9 || m.Counts["validation"] != 3 {
		t.Fatalf("manifest %+v", m)
	}
	trainURL := strings.Replace(manifestURL, "manifest.json", "train.jsonl", 1)
	train := s.API(curator, http.MethodGet, trainURL, nil).Must(t, http.StatusOK)
	sum := sha256.Sum256([]byte(train.Body))
	for _, f := range m.Files {
		if f.Name == "train.jsonl" && f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatal("downloaded train.jsonl does not match its manifest hash")
		}
	}
	if !strings.Contains(train.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("Content-Disposition %q", train.Header.Get("Content-Disposition"))
	}
	s.API("", http.MethodGet, trainURL, nil).Must(t, http.StatusUnauthorized)
	s.API(viewer, http.MethodGet, trainURL, nil).Must(t, http.StatusForbidden)
	s.API(other, http.MethodGet, trainURL, nil).Must(t, http.StatusNotFound)
	s.API(other, http.MethodGet, base, nil).Must(t, http.StatusNotFound)

	// Masked by default, kept with the opt-out; both re-exports of one
	// version are otherwise the same.
	all := func(ex exportDoc) string {
		var b strings.Builder
		for _, f := range ex.Files {
			if f.Name != "manifest.json" {
				b.WriteString(s.API(curator, http.MethodGet, f.URL, nil).Must(t, http.StatusOK).Body)
			}
		}
		return b.String()
	}
	masked, unmasked := all(e), all(raw)
	if strings.Contains(masked, "ops@acme.test") || !strings.Contains(masked, "[EMAIL]") || !strings.Contains(unmasked, "ops@acme.test") {
		t.Fatal("PII masking: wrong content")
	}
	var again exportDoc
	s.API(curator, http.MethodPost, base+"/export", map[string]any{"format": "trl_preference"}).Must(t, http.StatusAccepted).JSON(t, &again)
	again = waitExport(t, s, curator, d.ID, again.ID)
	if all(again) != masked {
		t.Fatal("re-running the export gave different bytes")
	}

	s.API(curator, http.MethodGet, base, nil).Must(t, http.StatusOK).JSON(t, &d)
	if d.Status != "exported" || len(d.Exports) != 3 || !strings.HasSuffix(d.ExportURL, "/manifest.json") {
		t.Fatalf("after exports: status %s, %d exports, url %q", d.Status, len(d.Exports), d.ExportURL)
	}
	// The masked export in the target format recorded its quality score.
	if d.QualityScore == nil || *d.QualityScore != float64(float32(targetScore)) {
		t.Fatalf("quality score after the exports: %v, want the report's %v", d.QualityScore, targetScore)
	}
	s.API(curator, http.MethodDelete, base, nil).Must(t, http.StatusOK).JSON(t, &d)
	if d.Status != "archived" {
		t.Fatalf("after DELETE: %s", d.Status)
	}
	s.API(curator, http.MethodPost, base+"/members", map[string]any{"add": pairs[:1]}).Must(t, http.StatusConflict)
}

// The pages: list with filters and counts, create, add members, freeze.
func TestDatasetPages(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cora@acme.test", "curator")
	s.User(org, "vic@acme.test", "viewer")
	pairs := storePairs(t, s, org, 3)
	c := s.SignedIn("cora@acme.test")

	res := c.Get("/datasets").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, `id="new-dataset"`) {
		t.Fatal("no create form for a curator")
	}
	res = c.PostForm("/datasets", url.Values{"name": {""}, "dataset_type": {"dpo"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-name"`) {
		t.Fatal("the create form's error is not beside the field")
	}
	res = c.PostForm("/datasets", url.Values{"name": {"Knowledge Base"}, "dataset_type": {"preference_pairs"}}).Must(t, http.StatusSeeOther)
	loc := res.Header.Get("Location")
	c.PostForm(loc+"/members", url.Values{"ids": {strings.Join(pairs, "\n")}}).Must(t, http.StatusSeeOther)
	page := c.Get(loc).Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `<strong id="sample-count">3</strong>`) || !strings.Contains(page.Body, `id="quality-formula"`) {
		t.Fatal("detail page lacks the count or the report's formula")
	}
	c.PostForm(loc+"/status", url.Values{"to": {"ready"}}).Must(t, http.StatusSeeOther)
	page = c.Get(loc).Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `id="dataset-status" data-status="ready">Ready<`) || !strings.Contains(page.Body, "Ready: version 1 frozen, 3 items") {
		t.Fatal("freeze did not show")
	}
	list := c.Get("/datasets?type=preference_pairs").Must(t, http.StatusOK)
	if !strings.Contains(list.Body, "Knowledge Base") || !strings.Contains(list.Body, "v1 · 3 items") {
		t.Fatal("list lacks the dataset or its version")
	}
	if other := c.Get("/datasets?type=dpo").Must(t, http.StatusOK); strings.Contains(other.Body, "Knowledge Base") {
		t.Fatal("type filter ignored")
	}
	// Export from the page: with no workers in this server it stays
	// queued, and its row asks for itself again while it waits.
	c.PostForm(loc+"/exports", url.Values{"format": {"sharegpt"}}).Must(t, http.StatusSeeOther)
	page = c.Get(loc).Must(t, http.StatusOK)
	eid := regexpFind(t, `<tr data-export="([0-9a-f-]{36})" data-status="queued"`, page.Body)
	row := c.Do(http.MethodGet, loc+"/exports/"+eid, nil, http.Header{"Hx-Request": {"true"}}).Must(t, http.StatusOK)
	if !strings.Contains(row.Body, `hx-trigger="every 1s"`) || !strings.Contains(row.Body, `<progress value="0" max="3">`) {
		t.Fatalf("export row fragment: %s", row.Body)
	}
	// Keeping PII is an admin's choice: a curator's form cannot.
	res = c.PostForm(loc+"/exports", url.Values{"format": {"sharegpt"}, "keep_pii": {"1"}})
	if res.Status != http.StatusForbidden {
		t.Fatalf("curator keep_pii: status %d", res.Status)
	}

	// Viewers see, but cannot act.
	v := s.SignedIn("vic@acme.test")
	vp := v.Get(loc).Must(t, http.StatusOK)
	if strings.Contains(vp.Body, `id="lifecycle"`) || strings.Contains(vp.Body, `id="export-form"`) {
		t.Fatal("a viewer sees action controls")
	}
	v.PostForm(loc+"/status", url.Values{"to": {"archived"}}).Must(t, http.StatusForbidden)
}
