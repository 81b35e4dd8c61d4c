package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

func intp(n int) *int { return &n }

func actorFor(user uuid.UUID) audit.Actor {
	return audit.Actor{Kind: "user", ID: user, Label: "test"}
}

// ingest stores items for an organisation and returns their ids in order.
func ingest(t *testing.T, s *webtest.Server, org uuid.UUID, items ...feedback.Item) []uuid.UUID {
	t.Helper()
	store := feedback.Service{Pool: s.Pool}
	ids := make([]uuid.UUID, len(items))
	for i, it := range items {
		row, created, err := store.Ingest(context.Background(), org, "api", it)
		id := row.ID
		if err != nil || !created {
			t.Fatalf("ingest %d: created %v, %v", i, created, err)
		}
		ids[i] = id
	}
	return ids
}

var rowRE = regexp.MustCompile(`<tr data-item="([0-9a-f-]{36})"`)

// rowIDs are the item ids of a queue page, in page order.
func rowIDs(body string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func feedbackRow(t *testing.T, s *webtest.Server, id uuid.UUID) (status, correction string, version int, tags []string, assignee *uuid.UUID) {
	t.Helper()
	err := s.Pool.QueryRow(context.Background(), "SELECT status::text, correction, version, tags, assignee_id FROM feedback WHERE id = $1", id).
		Scan(&status, &correction, &version, &tags, &assignee)
	if err != nil {
		t.Fatal(err)
	}
	return
}

func auditCount(t *testing.T, s *webtest.Server, action, target string) int {
	t.Helper()
	var n int
	err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = $1 AND ($2 = '' OR target_id = $2)", action, target).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every filter narrows the queue to exactly the items chosen by hand, and the
// filter survives the trip through the URL: the form shows it again and the
// status tabs and My queue keep it.
func TestFeedbackQueueFilters(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	bob := s.User(org, "bob@acme.test", "curator")
	items := []feedback.Item{
		{ExternalID: "a", Query: "How do I reset my password?", Response: "Click forgot password.", FeedbackType: "rating", Rating: intp(2),
			Model: "gpt-small", Tags: []string{"billing"}, Dimensions: &feedback.Dimensions{Accuracy: intp(1), Clarity: intp(4)}},
		{ExternalID: "b", Query: "What is the refund window?", Response: "Thirty days from purchase.", FeedbackType: "rating", Rating: intp(5),
			Model: "gpt-large", Comment: "perfect answer"},
		{ExternalID: "c", Query: "Email me at jane@example.com about my invoice", Response: "Sure, I will.", FeedbackType: "thumbs_down",
			Model: "gpt-small"},
		{ExternalID: "d", Query: "Where is the office?", Response: "In Berlin.", FeedbackType: "thumbs_up", Model: "gpt-large",
			Tags: []string{"billing", "geo"}},
		// The same content as d: a duplicate, hidden unless asked for.
		{ExternalID: "e", Query: "Where is the office?", Response: "In  Berlin.", FeedbackType: "thumbs_up", Model: "gpt-large"},
	}
	ids := ingest(t, s, org, items...)
	byExt := map[string]string{}
	for i, it := range items {
		byExt[it.ExternalID] = ids[i].String()
	}
	// b is approved and assigned to bob, through the domain.
	store := feedback.Service{Pool: s.Pool}
	approved := "approved"
	if _, err := store.Update(context.Background(), actorFor(bob), org, ids[1], 1, feedback.Change{Status: &approved}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(context.Background(), actorFor(bob), org, ids[1], 2, feedback.Change{Assignee: &bob}); err != nil {
		t.Fatal(err)
	}

	c := s.SignedIn("cara@acme.test")
	cases := []struct {
		query string
		want  []string // external ids, newest first
	}{
		{"", []string{"d", "c", "b", "a"}},
		{"duplicates=show", []string{"e", "d", "c", "b", "a"}},
		{"status=approved", []string{"b"}},
		{"status=pending", []string{"d", "c", "a"}},
		{"type=rating", []string{"b", "a"}},
		{"rating_min=3", []string{"b"}},
		{"rating_min=1&rating_max=2", []string{"a"}},
		{"dim_below=2", []string{"a"}},
		{"tag=billing", []string{"d", "a"}},
		{"model=gpt-small", []string{"c", "a"}},
		{"source=api", []string{"d", "c", "b", "a"}},
		{"source=file", nil},
		{"assignee=" + bob.String(), []string{"b"}},
		{"pii=1", []string{"c"}},
		{"q=refund", []string{"b"}},
		{"q=perfect", []string{"b"}}, // the comment is searched too
		{"q=password", []string{"a"}},
		{"from=2000-01-01&to=2000-12-31", nil},
		{"model=gpt-large&tag=billing", []string{"d"}},
	}
	for _, tc := range cases {
		res := c.Get("/feedback?"+tc.query).Must(t, http.StatusOK)
		var want []string
		for _, e := range tc.want {
			want = append(want, byExt[e])
		}
		if got := rowIDs(res.Body); !slices.Equal(got, want) {
			t.Errorf("%q: rows %v, want %v", tc.query, got, want)
		}
	}

	// The filter form shows the URL's filter again, and links keep it.
	res := c.Get("/feedback?model=gpt-large&tag=billing&rating_min=2&duplicates=show&pii=1&q=office").Must(t, http.StatusOK)
	for _, want := range []string{
		`name="model" value="gpt-large"`, `name="tag" value="billing"`, `<option value="2" selected>2</option>`,
		`<option value="show" selected>shown</option>`, `name="pii" value="1" checked`, `name="q" value="office"`,
	} {
		if !strings.Contains(res.Body, want) {
			t.Errorf("filter form lacks %s", want)
		}
	}
	approvedTab := regexpFind(t, `href="([^"]*status=approved[^"]*)"`, res.Body)
	for _, part := range []string{"model=gpt-large", "tag=billing", "rating_min=2", "duplicates=show", "pii=1", "q=office"} {
		if !strings.Contains(approvedTab, part) {
			t.Errorf("status tab %s drops %s", approvedTab, part)
		}
	}

	// Counts per status follow the other filters: model=gpt-large holds b
	// (approved) and d (pending); e is a hidden duplicate.
	// The page links to them with its filter; they are loaded after it.
	res = c.Get("/feedback?model=gpt-large").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, `hx-get="/feedback/counts?model=gpt-large"`) {
		t.Error("the queue page does not load the counts for its filter")
	}
	res = c.Get("/feedback/counts?model=gpt-large").Must(t, http.StatusOK)
	for status, n := range map[string]string{"": "2", "pending": "1", "approved": "1", "rejected": "0"} {
		re := fmt.Sprintf(`data-status="%s">\s*[A-Za-z ]+ <span class="num">(\d+)</span>`, status)
		if got := regexpFind(t, re, res.Body); got != n {
			t.Errorf("count for %q: %s, want %s", status, got, n)
		}
	}

	// A bad filter value is refused with its field named.
	res = c.Get("/feedback?rating_min=9").Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, "rating_min") {
		t.Errorf("bad filter answer does not name the field: %s", res.Body)
	}
}

// Keyset pages: 50 rows each, newest first, no row twice or missing, and the
// last page has no next link. The rows share one created_at (one COPY), so
// the id must break the ties.
func TestFeedbackQueuePagination(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "viewer")
	items := make([]feedback.Item, 120)
	for i := range items {
		items[i] = feedback.Item{Query: fmt.Sprintf("question number %d", i), Response: fmt.Sprintf("answer %d", i), FeedbackType: "thumbs_up", Model: "m"}
	}
	if _, err := (feedback.New(s.Pool)).IngestBatch(context.Background(), org, "file", items); err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, err := s.Pool.Query(context.Background(), "SELECT id::text FROM feedback WHERE org_id = $1 ORDER BY created_at DESC, id DESC", org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	rows.Close()

	c := s.SignedIn("cara@acme.test")
	var got []string
	path := "/feedback?model=m"
	sizes := []int{}
	for page := 0; path != ""; page++ {
		if page > 3 {
			t.Fatal("more pages than expected")
		}
		res := c.Get(path).Must(t, http.StatusOK)
		ids := rowIDs(res.Body)
		sizes = append(sizes, len(ids))
		got = append(got, ids...)
		path = ""
		if m := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(res.Body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.Contains(path, "model=m") || !strings.Contains(path, "cursor=") {
				t.Fatalf("next link %s lost the filter or the cursor", path)
			}
		}
	}
	if !slices.Equal(sizes, []int{50, 50, 20}) {
		t.Errorf("page sizes %v, want [50 50 20]", sizes)
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages do not list every row once in order:\n got %d rows\nwant %d rows", len(got), len(want))
	}
	c.Get("/feedback?cursor=not-a-cursor").Must(t, http.StatusUnprocessableEntity)
}

// Two curators open the same item; the second save is refused with 409 and
// shows the current status and correction, never overwriting the first.
func TestFeedbackConflictOnStaleVersion(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ann@acme.test", "curator")
	s.User(org, "ben@acme.test", "curator")
	id := ingest(t, s, org, feedback.Item{Query: "Capital of Australia?", Response: "Sydney is the capital.", FeedbackType: "thumbs_down"})[0]
	ann, ben := s.SignedIn("ann@acme.test"), s.SignedIn("ben@acme.test")
	item := "/feedback/" + id.String()
	ann.Get(item).Must(t, http.StatusOK)
	page := ben.Get(item).Must(t, http.StatusOK)
	version := regexpFind(t, `name="version" value="(\d+)"`, page.Body)
	if version != "1" {
		t.Fatalf("form version %s, want 1", version)
	}

	res := ann.PostForm(item+"/correction", url.Values{"version": {"1"}, "correction": {"Canberra is the capital."}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != item {
		t.Errorf("after saving, redirected to %s", loc)
	}

	// Ben, still at version 1, tries to approve and to save his own text.
	for _, htmx := range []bool{false, true} {
		form := url.Values{"version": {version}, "correction": {"Sydney, says Ben."}, "_csrf": {ben.CSRF()}}
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		if htmx {
			h.Set("HX-Request", "true")
		}
		res := ben.Do(http.MethodPost, item+"/correction", strings.NewReader(form.Encode()), h).Must(t, http.StatusConflict)
		for _, want := range []string{"someone else changed this item", `id="conflict-status">Corrected<`, "Canberra is the capital.",
			"Sydney, says Ben.", `id="conflict-reload"`} {
			if !strings.Contains(res.Body, want) {
				t.Errorf("htmx=%v: conflict answer lacks %q", htmx, want)
			}
		}
		if htmx == strings.Contains(res.Body, "<html") {
			t.Errorf("htmx=%v: full page %v", htmx, !htmx)
		}
		// The answer carries the current version, so a deliberate retry works.
		if v := regexpFind(t, `name="version" value="(\d+)"`, res.Body); v != "2" {
			t.Errorf("conflict answer's form version %s, want 2", v)
		}
	}
	ben.PostForm(item+"/status", url.Values{"version": {"1"}, "status": {"approved"}}).Must(t, http.StatusConflict)

	status, correction, v, _, _ := feedbackRow(t, s, id)
	if status != "corrected" || correction != "Canberra is the capital." || v != 2 {
		t.Errorf("row: %s %q v%d; the stale saves must not change it", status, correction, v)
	}
}

// Each action works as a plain form post (redirect and flash), lands in the
// item's history and the audit log, and the item page shows the diff.
func TestFeedbackItemActions(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	cara := s.User(org, "cara@acme.test", "curator")
	ctxJSON := `{"documents":[{"title":"Handbook","source":"kb/42","content":"Refunds take 30 days."},"plain doc text"],` +
		`"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}],"channel":"web"}`
	id := ingest(t, s, org, feedback.Item{Query: "How long do refunds take?", Response: "Refunds take two weeks.", FeedbackType: "rating",
		Rating: intp(2), Dimensions: &feedback.Dimensions{Accuracy: intp(1)}, Model: "gpt-small", LatencyMS: intp(840),
		Comment: "wrong <b>number</b>", Context: []byte(ctxJSON)})[0]
	c := s.SignedIn("cara@acme.test")
	item := "/feedback/" + id.String()

	page := c.Get(item).Must(t, http.StatusOK)
	for _, want := range []string{"Handbook", "kb/42", "Refunds take 30 days.", "plain doc text", "Hello!", "840 ms", "gpt-small",
		"wrong &lt;b&gt;number&lt;/b&gt;", `&#34;channel&#34;: &#34;web&#34;`, "accuracy", "1/5"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("item page lacks %q", want)
		}
	}

	steps := []struct {
		path   string
		form   url.Values
		action string
	}{
		{"/correction", url.Values{"correction": {"Refunds take 30 days."}}, "feedback.correct"},
		{"/tags", url.Values{"tags": {"Refunds, billing ,refunds"}}, "feedback.tag"},
		{"/note", url.Values{"note": {"checked the handbook"}}, "feedback.note"},
		{"/assign", url.Values{"assignee": {cara.String()}}, "feedback.assign"},
		{"/status", url.Values{"status": {"approved"}}, "feedback.approve"},
	}
	for i, st := range steps {
		st.form.Set("version", fmt.Sprint(i+1))
		res := c.PostForm(item+st.path, st.form).Must(t, http.StatusSeeOther)
		if res.Header.Get("Location") != item {
			t.Errorf("%s redirected to %s", st.path, res.Header.Get("Location"))
		}
		if n := auditCount(t, s, st.action, id.String()); n != 1 {
			t.Errorf("%s: %d audit entries %s, want 1", st.path, n, st.action)
		}
	}
	status, correction, v, tags, assignee := feedbackRow(t, s, id)
	if status != "approved" || correction != "Refunds take 30 days." || v != 6 || !slices.Equal(tags, []string{"refunds", "billing"}) ||
		assignee == nil || *assignee != cara {
		t.Errorf("row after actions: %s %q v%d %v %v", status, correction, v, tags, assignee)
	}

	page = c.Get(item).Must(t, http.StatusOK)
	// "two weeks" became "30 days": the diff shows exactly that replacement.
	for _, want := range []string{"<del>two weeks</del><ins>30 days</ins>", "checked the handbook", "Approved.", `class="tag">refunds<`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("item page after actions lacks %q", want)
		}
	}
	// My queue lists what is assigned to me.
	mine := c.Get("/feedback?assignee="+cara.String()).Must(t, http.StatusOK)
	if got := rowIDs(mine.Body); !slices.Equal(got, []string{id.String()}) {
		t.Errorf("my queue %v", got)
	}
	if !strings.Contains(mine.Body, `id="my-queue" aria-current="page"`) {
		t.Error("My queue is not marked current")
	}

	// An empty correction is refused beside its field.
	res := c.PostForm(item+"/correction", url.Values{"version": {"6"}, "correction": {"  "}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-correction"`) {
		t.Error("empty correction: no message beside the field")
	}
	c.PostForm(item+"/status", url.Values{"version": {"6"}, "status": {"shipped"}}).Must(t, http.StatusUnprocessableEntity)
}

// Viewers read the queue but cannot act; another organisation's item is
// simply not there.
func TestFeedbackRolesAndOrganisations(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	acme, other := s.Org("acme"), s.Org("other")
	s.User(acme, "vic@acme.test", "viewer")
	s.User(acme, "cara@acme.test", "curator")
	mine := ingest(t, s, acme, feedback.Item{Query: "q1", Response: "r1", FeedbackType: "thumbs_up"})[0]
	theirs := ingest(t, s, other, feedback.Item{Query: "q2", Response: "r2", FeedbackType: "thumbs_up"})[0]

	vic := s.SignedIn("vic@acme.test")
	page := vic.Get("/feedback").Must(t, http.StatusOK)
	if strings.Contains(page.Body, `id="bulk"`) {
		t.Error("viewer sees the bulk form")
	}
	item := vic.Get("/feedback/"+mine.String()).Must(t, http.StatusOK)
	if strings.Contains(item.Body, `id="approve"`) || strings.Contains(item.Body, `id="correction"`) {
		t.Error("viewer sees review forms")
	}
	for _, p := range []string{"/status", "/correction", "/tags", "/note", "/assign"} {
		vic.PostForm("/feedback/"+mine.String()+p, url.Values{"version": {"1"}, "status": {"approved"}, "correction": {"x"}, "tags": {"x"}, "note": {"x"}}).
			Must(t, http.StatusForbidden)
	}
	vic.PostForm("/feedback/bulk", url.Values{"op": {"approve"}, "ids": {mine.String()}, "confirm": {"1"}}).Must(t, http.StatusForbidden)

	cara := s.SignedIn("cara@acme.test")
	cara.Get("/feedback/"+theirs.String()).Must(t, http.StatusNotFound)
	cara.Get("/feedback/not-a-uuid").Must(t, http.StatusNotFound)
	cara.PostForm("/feedback/"+theirs.String()+"/status", url.Values{"version": {"1"}, "status": {"approved"}}).Must(t, http.StatusNotFound)
	// A bulk selection naming their item changes nothing of theirs.
	res := cara.PostForm("/feedback/bulk", url.Values{"op": {"approve"}, "ids": {theirs.String()}, "confirm": {"1"}})
	if res.Status == http.StatusSeeOther {
		t.Error("bulk over another organisation's id reported success")
	}
	if status, _, _, _, _ := feedbackRow(t, s, theirs); status != "pending" {
		t.Errorf("their item became %s", status)
	}
	if status, _, _, _, _ := feedbackRow(t, s, mine); status != "pending" {
		t.Errorf("viewer changed the item to %s", status)
	}
	// Unsigned visitors are sent to sign in.
	anon := s.Client().Get("/feedback").Must(t, http.StatusSeeOther)
	if !strings.HasPrefix(anon.Header.Get("Location"), "/login") {
		t.Errorf("anonymous queue visit went to %s", anon.Header.Get("Location"))
	}
}

// A bulk action first asks to confirm its exact count; a count that no
// longer matches is refused and nothing changes; the right count applies it
// to every item at once.
func TestFeedbackBulkConfirm(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	var items []feedback.Item
	for i := range 4 {
		model := "m1"
		if i == 3 {
			model = "m2"
		}
		items = append(items, feedback.Item{Query: fmt.Sprintf("q %d", i), Response: fmt.Sprintf("r %d", i), FeedbackType: "thumbs_up", Model: model})
	}
	ids := ingest(t, s, org, items...)
	c := s.SignedIn("cara@acme.test")
	c.Get("/feedback")

	form := url.Values{"op": {"approve"}, "all": {"1"}, "filter": {"model=m1"}}
	res := c.PostForm("/feedback/bulk", form).Must(t, http.StatusOK)
	if !strings.Contains(res.Body, "Apply Approve to 3 items?") || !strings.Contains(res.Body, `name="confirm" value="3"`) {
		t.Fatalf("confirmation page: %s", res.Body)
	}

	form.Set("confirm", "2")
	res = c.PostForm("/feedback/bulk", form).Must(t, http.StatusConflict)
	if !strings.Contains(res.Body, "the selection changed since you confirmed it (now 3 items)") {
		t.Errorf("mismatch answer: %s", res.Body)
	}
	for _, id := range ids {
		if st, _, _, _, _ := feedbackRow(t, s, id); st != "pending" {
			t.Fatalf("a refused bulk action changed an item to %s", st)
		}
	}

	form.Set("confirm", "3")
	res = c.PostForm("/feedback/bulk", form).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/feedback?model=m1" {
		t.Errorf("bulk redirected to %s", loc)
	}
	for i, id := range ids {
		want := "approved"
		if i == 3 {
			want = "pending"
		}
		if st, _, _, _, _ := feedbackRow(t, s, id); st != want {
			t.Errorf("item %d: %s, want %s", i, st, want)
		}
	}
	if n := auditCount(t, s, "feedback.bulk", ""); n != 1 {
		t.Errorf("%d bulk audit entries, want 1", n)
	}
	if page := c.Get("/feedback").Body; !strings.Contains(page, "Approve: applied to 3 items.") {
		t.Error("no flash after the bulk action")
	}

	// Selected rows: tag two of them.
	sel := url.Values{"op": {"tag"}, "tag": {"Reviewed"}, "ids": {ids[0].String(), ids[3].String()}}
	res = c.PostForm("/feedback/bulk", sel).Must(t, http.StatusOK)
	if !strings.Contains(res.Body, "Apply Add tag “reviewed” to 2 items?") {
		t.Fatalf("confirmation page: %s", res.Body)
	}
	sel.Set("confirm", "2")
	c.PostForm("/feedback/bulk", sel).Must(t, http.StatusSeeOther)
	for i, id := range ids {
		_, _, _, tags, _ := feedbackRow(t, s, id)
		if want := i == 0 || i == 3; slices.Contains(tags, "reviewed") != want {
			t.Errorf("item %d tags %v", i, tags)
		}
	}
	c.PostForm("/feedback/bulk", url.Values{"op": {"approve"}}).Must(t, http.StatusUnprocessableEntity)
	c.PostForm("/feedback/bulk", url.Values{"op": {"explode"}, "ids": {ids[0].String()}}).Must(t, http.StatusUnprocessableEntity)
}
