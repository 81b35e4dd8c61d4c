package web_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/web/webtest"
)

// storeItem stores one feedback item as the test describes it.
func storeItem(t *testing.T, s *webtest.Server, org uuid.UUID, query, status string, safety int, tags []string, at time.Time) string {
	t.Helper()
	sum := sha256.Sum256([]byte(query + status + at.String()))
	var dim any
	if safety > 0 {
		dim = safety
	}
	if tags == nil {
		tags = []string{}
	}
	var id uuid.UUID
	if err := s.Pool.QueryRow(context.Background(), `INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash, status, dim_safety, tags, created_at)
		VALUES ($1, $2, 'An answer.', 'detailed', 'api', $3, $4, $5, $6, $7) RETURNING id`,
		org, query, sum[:], status, dim, tags, at).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func newDataset(t *testing.T, s *webtest.Server, org uuid.UUID, name, typ string) string {
	t.Helper()
	d, err := s.App.Services.Datasets.Create(context.Background(), audit.System, org, datasets.NewDataset{Type: typ,
		Settings: datasets.Settings{Name: name, ValidationPercent: 20, SplitSeed: 42}})
	if err != nil {
		t.Fatal(err)
	}
	return d.ID.String()
}

func memberIDs(t *testing.T, s *webtest.Server, datasetID string) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT coalesce(pair_id, feedback_id)::text FROM training_dataset_members WHERE dataset_id = $1 ORDER BY 1`, datasetID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// flashAfter follows a form's redirect and returns the flash it shows.
func flashAfter(t *testing.T, c *webtest.Client, res webtest.Response) string {
	t.Helper()
	res.Must(t, http.StatusSeeOther)
	page := c.Get(res.Header.Get("Location")).Must(t, http.StatusOK)
	return regexpFind(t, `(?s)<div class="flash[^"]*" role="status">(.*?)</div>`, page.Body)
}

// Every page links to where its things came from and where they went.
func TestLineageLinks(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ad@acme.test", "admin")
	c := s.SignedIn("ad@acme.test")
	ctx := context.Background()
	now := time.Now()

	// A pair built from two items: the pair links to both, each item
	// lists the pair.
	chosen := storeItem(t, s, org, "How do I reset my password?", "approved", 0, nil, now.Add(-time.Hour))
	rejected := storeItem(t, s, org, "How do I reset my password?", "rejected", 0, nil, now.Add(-time.Hour))
	var pair string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash, chosen_feedback_id, rejected_feedback_id)
		VALUES ($1, '[]', 'How do I reset my password?', 'Use the link.', 'Call us.', 'same_query', '\x01', $2, $3) RETURNING id::text`, org, chosen, rejected).Scan(&pair); err != nil {
		t.Fatal(err)
	}
	page := c.Get("/pairs/"+pair).Must(t, http.StatusOK).Body
	for _, id := range []string{chosen, rejected} {
		if !strings.Contains(page, `href="/feedback/`+id+`"`) {
			t.Errorf("pair page does not link to its feedback %s", id)
		}
	}
	for _, id := range []string{chosen, rejected} {
		item := c.Get("/feedback/"+id).Must(t, http.StatusOK).Body
		section := regexpFind(t, `(?s)id="item-pairs">(.*?)</section>`, item)
		if !strings.Contains(section, `href="/pairs/`+pair+`"`) {
			t.Errorf("item %s does not list its pair: %s", id, section)
		}
	}
	lone := storeItem(t, s, org, "Unrelated", "approved", 0, nil, now.Add(-time.Hour))
	if section := regexpFind(t, `(?s)id="item-pairs">(.*?)</section>`, c.Get("/feedback/"+lone).Body); strings.Contains(section, "/pairs/") {
		t.Errorf("an item without pairs lists %s", section)
	}

	// Members link to their pages; a frozen version lists the jobs
	// trained on it, each a link to the job.
	prefDS := newDataset(t, s, org, "Preferences", datasets.TypePreferencePairs)
	sftDS := newDataset(t, s, org, "Instructions", datasets.TypeInstructionTuning)
	svc := s.App.Services.Datasets
	if _, err := svc.AddMembers(ctx, audit.System, org, uuid.MustParse(prefDS), []uuid.UUID{uuid.MustParse(pair)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddMembers(ctx, audit.System, org, uuid.MustParse(sftDS), []uuid.UUID{uuid.MustParse(chosen)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Get("/datasets/"+prefDS).Body, `href="/pairs/`+pair+`"`) {
		t.Error("a preference dataset's member does not link to its pair")
	}
	if !strings.Contains(c.Get("/datasets/"+sftDS).Body, `href="/feedback/`+chosen+`"`) {
		t.Error("an instruction dataset's member does not link to its feedback")
	}
	ver, err := svc.Freeze(ctx, audit.System, org, uuid.MustParse(prefDS))
	if err != nil {
		t.Fatal(err)
	}
	var job string
	if err := s.Pool.QueryRow(ctx, `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind, provider, base_model, method,
		export_format, train_examples, estimated_tokens, estimated_epochs, price_per_million, price_date, estimated_cost, suffix)
		VALUES ($1, $2, 'Preferences v1', 'preference', 'openai', 'gpt-4o-mini', 'dpo', 'openai_preference', 1, 100, 3, 1, '2026-01-01', 1, 'support')
		RETURNING id::text`, org, ver.ID).Scan(&job); err != nil {
		t.Fatal(err)
	}
	versions := regexpFind(t, `(?s)id="versions">(.*?)</section>`, c.Get("/datasets/"+prefDS).Body)
	if !strings.Contains(versions, `href="/fine-tuning/jobs/`+job+`"`) || !strings.Contains(versions, "support") {
		t.Errorf("the version does not list its job: %s", versions)
	}

	// The audit log links each target to its page.
	audits := c.Get("/admin/audit").Must(t, http.StatusOK).Body
	if !strings.Contains(audits, `href="/datasets/`+prefDS+`"`) {
		t.Error("the audit log does not link to the dataset")
	}

	// The safety alert links to exactly the items it counted: pending,
	// in its window, a safety score of 2 or less or tagged "safety".
	counted := []string{
		storeItem(t, s, org, "Unsafe advice", "pending", 1, nil, now.Add(-2*time.Hour)),
		storeItem(t, s, org, "Reported", "pending", 0, []string{"safety"}, now.Add(-3*time.Hour)),
	}
	storeItem(t, s, org, "Reviewed already", "approved", 1, nil, now.Add(-2*time.Hour))
	storeItem(t, s, org, "Too old", "pending", 1, nil, now.Add(-72*time.Hour))
	storeItem(t, s, org, "Safe", "pending", 5, nil, now.Add(-2*time.Hour))
	if _, err := s.App.Services.Alerts.Evaluate(ctx, org, now); err != nil {
		t.Fatal(err)
	}
	alertsPage := c.Get("/alerts").Must(t, http.StatusOK).Body
	row := regexpFind(t, `(?s)<tr data-kind="safety"(.*?)</tr>`, alertsPage)
	link := regexpFind(t, `href="(/feedback\?[^"]+)"`, row)
	link = strings.ReplaceAll(link, "&amp;", "&")
	queue := c.Get(link).Must(t, http.StatusOK).Body
	var shown []string
	for _, m := range regexp.MustCompile(`<tr data-item="([^"]+)"`).FindAllStringSubmatch(queue, -1) {
		shown = append(shown, m[1])
	}
	slices.Sort(shown)
	slices.Sort(counted)
	if !slices.Equal(shown, counted) {
		t.Fatalf("the alert's link %s shows %v, want the %d counted %v", link, shown, len(counted), counted)
	}
	if !strings.Contains(row, "2 safety reports") {
		t.Errorf("the alert counted otherwise: %s", row)
	}
	// The window survives the filter form: its fields are in it.
	u, _ := url.Parse(link)
	if u.Query().Get("since") == "" || u.Query().Get("safety") != "1" || !strings.Contains(queue, `name="since" value="`+u.Query().Get("since")+`"`) {
		t.Errorf("the queue's filter form drops the alert's window: %s", link)
	}
}

// Adding a selection to a dataset: what fits is added and said; a wrong
// kind, a frozen dataset or an ineligible item refuses the whole selection
// and leaves the dataset as it was.
func TestAddSelectionToDataset(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	c := s.SignedIn("cu@acme.test")
	ctx := context.Background()
	svc := s.App.Services.Datasets
	pairs := storePairs(t, s, org, 4)
	open := newDataset(t, s, org, "Open prefs", datasets.TypePreferencePairs)
	frozen := newDataset(t, s, org, "Frozen prefs", datasets.TypeDPO)
	if _, err := svc.AddMembers(ctx, audit.System, org, uuid.MustParse(frozen), []uuid.UUID{uuid.MustParse(pairs[3])}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Freeze(ctx, audit.System, org, uuid.MustParse(frozen)); err != nil {
		t.Fatal(err)
	}
	sft := newDataset(t, s, org, "Instructions", datasets.TypeInstructionTuning)

	// The pairs list offers the open preference datasets only.
	list := c.Get("/pairs").Must(t, http.StatusOK).Body
	if !strings.Contains(list, `value="`+open+`"`) || strings.Contains(list, `value="`+frozen+`"`) || strings.Contains(list, `value="`+sft+`"`) {
		t.Error("the pairs list offers the wrong datasets")
	}

	refused := func(path, dataset string, ids []string, want string) {
		t.Helper()
		before := datasetRows(t, s, dataset)
		msg := flashAfter(t, c, c.PostForm(path, url.Values{"dataset": {dataset}, "ids": ids}))
		if !strings.Contains(msg, "Nothing was added") || !strings.Contains(msg, want) {
			t.Errorf("%s into %s: flash %q, want %q", path, dataset, msg, want)
		}
		if after := datasetRows(t, s, dataset); after != before {
			t.Errorf("a refused selection changed the dataset:\n%s\n%s", before, after)
		}
	}
	refused("/pairs/add-to-dataset", frozen, pairs[:2], "Frozen prefs is frozen")
	refused("/pairs/add-to-dataset", sft, pairs[:2], "Instructions holds approved or corrected feedback, not preference pairs")
	approved := storeItem(t, s, org, "Approved one", "approved", 0, nil, time.Now())
	pending := storeItem(t, s, org, "Pending one", "pending", 0, nil, time.Now())
	refused("/feedback/add-to-dataset", sft, []string{approved, pending}, "is pending")
	refused("/feedback/add-to-dataset", open, []string{approved}, "Open prefs holds preference pairs, not feedback items")

	// What fits goes in, and the page says so with a link to the dataset.
	msg := flashAfter(t, c, c.PostForm("/pairs/add-to-dataset", url.Values{"dataset": {open}, "ids": pairs[:3], "back": {"method=manual"}}))
	if !strings.Contains(msg, "3 pairs added to Open prefs.") || !strings.Contains(msg, `href="/datasets/`+open+`"`) {
		t.Errorf("flash %q", msg)
	}
	want := slices.Clone(pairs[:3])
	slices.Sort(want)
	if got := memberIDs(t, s, open); !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	msg = flashAfter(t, c, c.PostForm("/feedback/add-to-dataset", url.Values{"dataset": {sft}, "ids": {approved}, "filter": {"status=approved"}}))
	if !strings.Contains(msg, "1 feedback item added to Instructions.") {
		t.Errorf("flash %q", msg)
	}
	if got := memberIDs(t, s, sft); !slices.Equal(got, []string{approved}) {
		t.Errorf("members %v", got)
	}
}

// A refused form on the dataset's pages keeps what was typed, with the
// message beside the field it is about.
func TestDatasetFormsKeepTypedInput(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	c := s.SignedIn("cu@acme.test")
	ds := newDataset(t, s, org, "Keep", datasets.TypePreferencePairs)
	pairs := storePairs(t, s, org, 1)
	before := datasetRows(t, s, ds)

	typed := pairs[0] + "\nnot-an-id"
	page := c.PostForm("/datasets/"+ds+"/members", url.Values{"ids": {typed}}).Must(t, http.StatusUnprocessableEntity).Body
	if !strings.Contains(page, ">"+pairs[0]+"\nnot-an-id</textarea>") {
		t.Error("the id box lost what was typed")
	}
	if e := regexpFind(t, `<p class="field-error" id="err-ids">([^<]*)</p>`, page); !strings.Contains(e, "IDs: &#34;not-an-id&#34; is not an id") {
		t.Errorf("id error %q", e)
	}
	unknown := uuid.NewString()
	page = c.PostForm("/datasets/"+ds+"/members", url.Values{"ids": {unknown}}).Must(t, http.StatusUnprocessableEntity).Body
	if !strings.Contains(page, ">"+unknown+"</textarea>") || !strings.Contains(page, "no preference pair "+unknown) {
		t.Error("an unknown id is not kept and explained")
	}

	long := strings.Repeat("n", datasets.MaxName+1)
	for _, tc := range []struct{ name, want string }{{"", "Name is required"}, {long, "Name: at most 200 characters"}} {
		page = c.PostForm("/datasets/"+ds, url.Values{"version": {"1"}, "name": {tc.name}, "description": {"typed description"},
			"validation_percent": {"20"}, "split_seed": {"7"}, "split_strategy": {"random"}}).Must(t, http.StatusUnprocessableEntity).Body
		if e := regexpFind(t, `<p class="field-error" id="err-name">([^<]*)</p>`, page); e != tc.want {
			t.Errorf("settings name %q: error %q, want %q", tc.name, e, tc.want)
		}
		if !strings.Contains(page, ">typed description</textarea>") || !strings.Contains(page, `name="split_seed" type="number" value="7"`) {
			t.Error("the settings form lost what was typed")
		}
		page = c.PostForm("/datasets", url.Values{"name": {tc.name}, "dataset_type": {"dpo"}, "description": {"typed description"}}).Must(t, http.StatusUnprocessableEntity).Body
		if e := regexpFind(t, `<p class="field-error" id="err-name">([^<]*)</p>`, page); e != tc.want {
			t.Errorf("create name %q: error %q, want %q", tc.name, e, tc.want)
		}
		if !strings.Contains(page, ">typed description</textarea>") || !strings.Contains(page, `value="`+tc.name+`"`) {
			t.Error("the create form lost what was typed")
		}
	}
	if after := datasetRows(t, s, ds); after != before {
		t.Errorf("refused forms changed the dataset")
	}
}
