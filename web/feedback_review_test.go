package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// reviewItems stores items for the review-loop tests with creation times a
// minute apart in the order given (the first is the newest, so it heads
// the queue), and returns their ids in that order.
func reviewItems(t *testing.T, s *webtest.Server, org uuid.UUID, models ...string) []uuid.UUID {
	t.Helper()
	items := make([]feedback.Item, len(models))
	for i, m := range models {
		items[i] = feedback.Item{Query: fmt.Sprintf("question %d for %s", i, m), Response: fmt.Sprintf("answer %d", i), FeedbackType: "thumbs_down", Model: m}
	}
	ids := ingest(t, s, org, items...)
	for i, id := range ids {
		if _, err := s.Pool.Exec(context.Background(), "UPDATE feedback SET created_at = now() - $2 * interval '1 minute' WHERE id = $1", id, i); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

var (
	positionRE = regexp.MustCompile(`id="item-position"[^>]*>([^<]*)<`)
	prevRE     = regexp.MustCompile(`href="([^"]+)" id="prev-item"`)
	nextRE     = regexp.MustCompile(`href="([^"]+)" id="next-item"`)
)

// itemPlace reads an item page's position text and its previous and next
// links ("" where there is none).
func itemPlace(t *testing.T, body string) (position, prev, next string) {
	t.Helper()
	m := positionRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("the item page shows no position")
	}
	position = strings.Join(strings.Fields(html.UnescapeString(m[1])), " ")
	if m := prevRE.FindStringSubmatch(body); m != nil {
		prev = html.UnescapeString(m[1])
	}
	if m := nextRE.FindStringSubmatch(body); m != nil {
		next = html.UnescapeString(m[1])
	}
	return position, prev, next
}

// An item opened from a filtered queue knows its place in that filter: the
// queue's links carry the filter, the first item has no Previous, the last
// no Next, a filter of one item has neither, and an item outside the
// filter still finds its neighbours by its place in the queue's order.
func TestFeedbackItemPlace(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "vic@acme.test", "viewer")
	// Newest first: m, m, solo, m, m. "solo" sits between the second and
	// third "m".
	ids := reviewItems(t, s, org, "m", "m", "solo", "m", "m")
	inM := []uuid.UUID{ids[0], ids[1], ids[3], ids[4]}
	// Another organisation's items are never neighbours.
	other := s.Org("other")
	reviewItems(t, s, other, "m", "m")
	c := s.SignedIn("vic@acme.test")

	queue := c.Get("/feedback?model=m").Must(t, http.StatusOK)
	if want := `href="/feedback/` + inM[0].String() + `?model=m"`; !strings.Contains(queue.Body, want) {
		t.Fatalf("the queue does not link to its first item with its filter (%s)", want)
	}

	for i, id := range inM {
		pos, prev, next := itemPlace(t, c.Get("/feedback/"+id.String()+"?model=m").Must(t, http.StatusOK).Body)
		if want := fmt.Sprintf("%d of 4", i+1); pos != want {
			t.Errorf("item %d: position %q, want %q", i, pos, want)
		}
		wantPrev, wantNext := "", ""
		if i > 0 {
			wantPrev = "/feedback/" + inM[i-1].String() + "?model=m"
		}
		if i < len(inM)-1 {
			wantNext = "/feedback/" + inM[i+1].String() + "?model=m"
		}
		if prev != wantPrev || next != wantNext {
			t.Errorf("item %d: previous %q next %q, want %q and %q", i, prev, next, wantPrev, wantNext)
		}
	}

	// A filter with one item.
	body := c.Get("/feedback/"+ids[2].String()+"?model=solo").Must(t, http.StatusOK).Body
	if pos, prev, next := itemPlace(t, body); pos != "1 of 1" || prev != "" || next != "" {
		t.Errorf("the only item: position %q previous %q next %q", pos, prev, next)
	}
	if !strings.Contains(body, `id="prev-item-none"`) || !strings.Contains(body, `id="next-item-none"`) {
		t.Error("the only item does not say there is no previous and no next")
	}

	// An item outside the filter: no position, neighbours by its key.
	pos, prev, next := itemPlace(t, c.Get("/feedback/"+ids[2].String()+"?model=m").Must(t, http.StatusOK).Body)
	if pos != "Not in this filter (4 items)" || prev != "/feedback/"+ids[1].String()+"?model=m" || next != "/feedback/"+ids[3].String()+"?model=m" {
		t.Errorf("item outside the filter: position %q previous %q next %q", pos, prev, next)
	}

	// No filter: the whole queue.
	if pos, _, _ := itemPlace(t, c.Get("/feedback/"+ids[2].String()).Must(t, http.StatusOK).Body); pos != "3 of 5" {
		t.Errorf("unfiltered: position %q, want 3 of 5", pos)
	}
	// The queue's page is kept for the way back, and a status filter counts.
	if _, err := s.Pool.Exec(context.Background(), "UPDATE feedback SET status = 'approved' WHERE id = $1", inM[1]); err != nil {
		t.Fatal(err)
	}
	if pos, _, next := itemPlace(t, c.Get("/feedback/"+inM[0].String()+"?model=m&status=pending").Must(t, http.StatusOK).Body); pos != "1 of 3" ||
		next != "/feedback/"+inM[2].String()+"?model=m&status=pending" {
		t.Errorf("pending under m: position %q next %q", pos, next)
	}

	// Bad filter parameters are refused as the queue refuses them, by name.
	for _, q := range []string{"status=bogus", "rating_min=9", "from=yesterday", "cursor=not-a-cursor", "assignee=nobody"} {
		res := c.Get("/feedback/" + inM[0].String() + "?" + q)
		if res.Status != http.StatusUnprocessableEntity {
			t.Errorf("?%s: status %d, want 422", q, res.Status)
		}
		if field := strings.SplitN(q, "=", 2)[0]; !strings.Contains(res.Body, field) {
			t.Errorf("?%s: the answer does not name %s", q, field)
		}
		if qs := c.Get("/feedback?" + q); qs.Status != res.Status {
			t.Errorf("?%s: the queue answers %d, the item %d", q, qs.Status, res.Status)
		}
	}
}

// Auto-advance is a per-user setting kept on the server. When on, approve,
// reject, needs-correction and a saved correction go on to the next item
// of the filter, and the last one back to the queue with the filter done;
// without it, or for other changes, the curator stays on the item.
func TestFeedbackAutoAdvance(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	cara := s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	s.User(org, "vic@acme.test", "viewer")
	ids := reviewItems(t, s, org, "m", "m", "m", "m", "m")
	c := s.SignedIn("cara@acme.test")
	item := func(i int) string { return "/feedback/" + ids[i].String() }
	const filter = "?model=m&status=pending"

	if body := c.Get(item(0)+filter).Must(t, http.StatusOK).Body; !strings.Contains(body, `aria-pressed="false">Auto-advance: off`) {
		t.Fatal("auto-advance is not shown off at first")
	}
	// Off: approving stays on the item.
	res := c.PostForm(item(0)+"/status"+filter, url.Values{"version": {"1"}, "status": {"approved"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != item(0)+filter {
		t.Errorf("approve with auto-advance off went to %s", loc)
	}

	// Turn it on: remembered for cara, not for dan.
	res = c.PostForm(item(1)+"/auto-advance"+filter, url.Values{"auto_advance": {"on"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != item(1)+filter {
		t.Errorf("turning auto-advance on went to %s", loc)
	}
	var on bool
	if err := s.Pool.QueryRow(context.Background(), "SELECT auto_advance FROM user_preferences WHERE org_id = $1 AND user_id = $2", org, cara).Scan(&on); err != nil || !on {
		t.Fatalf("cara's setting: %v %v", on, err)
	}
	if body := s.SignedIn("cara@acme.test").Get(item(1)+filter).Must(t, http.StatusOK).Body; !strings.Contains(body, `aria-pressed="true">Auto-advance: on`) {
		t.Error("a new session of cara's does not show auto-advance on")
	}
	if body := s.SignedIn("dan@acme.test").Get(item(1)+filter).Must(t, http.StatusOK).Body; !strings.Contains(body, `aria-pressed="false"`) {
		t.Error("dan sees cara's setting")
	}

	// Each verdict goes to the next pending item of the filter (item 0 is
	// approved already, so item 1 is the first).
	for i, st := range []struct {
		path string
		form url.Values
	}{
		{"/status", url.Values{"status": {"rejected"}}},
		{"/status", url.Values{"status": {"needs_correction"}}},
		{"/correction", url.Values{"correction": {"a better answer"}}},
	} {
		st.form.Set("version", "1")
		res := c.PostForm(item(i+1)+st.path+filter, st.form).Must(t, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); loc != item(i+2)+filter {
			t.Errorf("%s on item %d went to %s, want item %d", st.path, i+1, loc, i+2)
		}
	}
	// Other changes stay on the item.
	res = c.PostForm(item(4)+"/tags"+filter, url.Values{"version": {"1"}, "tags": {"x"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != item(4)+filter {
		t.Errorf("tagging went to %s", loc)
	}
	// htmx gets the next address to load; the last item leads back to the
	// queue with the filter done.
	res = c.Do(http.MethodPost, item(4)+"/status"+filter, strings.NewReader(url.Values{"version": {"2"}, "status": {"approved"}, "_csrf": {c.CSRF()}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Hx-Request": {"true"}}).Must(t, http.StatusNoContent)
	if loc := res.Header.Get("HX-Redirect"); loc != "/feedback"+filter {
		t.Errorf("approving the last item sent htmx to %q", loc)
	}
	if body := c.Get("/feedback"+filter).Must(t, http.StatusOK).Body; !strings.Contains(body, "the filter is done") {
		t.Error("the queue does not say the filter is done")
	}
	for i, want := range []string{"approved", "rejected", "needs_correction", "corrected", "approved"} {
		if status, _, _, _, _ := feedbackRow(t, s, ids[i]); status != want {
			t.Errorf("item %d is %s, want %s", i, status, want)
		}
	}

	// Turned off again, approving stays put.
	c.PostForm(item(0)+"/auto-advance", url.Values{"auto_advance": {"off"}}).Must(t, http.StatusSeeOther)
	res = c.PostForm(item(0)+"/status", url.Values{"version": {"2"}, "status": {"rejected"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != item(0) {
		t.Errorf("after turning auto-advance off, rejecting went to %s", loc)
	}

	// Refusals: a bad value, a bad filter (nothing changes), a viewer.
	c.PostForm(item(0)+"/auto-advance", url.Values{"auto_advance": {"maybe"}}).Must(t, http.StatusUnprocessableEntity)
	c.PostForm(item(0)+"/status?status=bogus", url.Values{"version": {"3"}, "status": {"approved"}}).Must(t, http.StatusUnprocessableEntity)
	if status, _, version, _, _ := feedbackRow(t, s, ids[0]); status != "rejected" || version != 3 {
		t.Errorf("a post with a bad filter changed the item: %s, version %d", status, version)
	}
	s.SignedIn("vic@acme.test").PostForm(item(0)+"/auto-advance", url.Values{"auto_advance": {"on"}}).Must(t, http.StatusForbidden)
}

// The live diff compares what is being typed with the response, word by
// word, through the same diff as the saved correction.
func TestFeedbackLiveDiff(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "vic@acme.test", "viewer")
	id := ingest(t, s, org, feedback.Item{Query: "Capital of Australia?", Response: "The capital is Sydney.", FeedbackType: "thumbs_down"})[0]
	c := s.SignedIn("cara@acme.test")
	path := "/feedback/" + id.String() + "/diff"
	c.Get("/feedback/"+id.String()).Must(t, http.StatusOK)

	body := c.PostForm(path, url.Values{"correction": {"The capital is Canberra."}}).Must(t, http.StatusOK).Body
	if !strings.Contains(body, "<del>Sydney</del>") || !strings.Contains(body, "<ins>Canberra</ins>") || !strings.Contains(body, `id="live-diff"`) {
		t.Errorf("live diff: %s", body)
	}
	if body := c.PostForm(path, url.Values{"correction": {"  "}}).Must(t, http.StatusOK).Body; strings.Contains(body, "<del>") {
		t.Errorf("an empty correction shows a diff: %s", body)
	}
	if body := c.PostForm(path, url.Values{"correction": {"bad \xff text"}}).Must(t, http.StatusUnprocessableEntity).Body; !strings.Contains(body, "not valid UTF-8") {
		t.Errorf("bad UTF-8: %s", body)
	}
	c.PostForm("/feedback/"+uuid.NewString()+"/diff", url.Values{"correction": {"x"}}).Must(t, http.StatusNotFound)
	s.SignedIn("vic@acme.test").PostForm(path, url.Values{"correction": {"x"}}).Must(t, http.StatusForbidden)
	if status, correction, _, _, _ := feedbackRow(t, s, id); status != "pending" || correction != "" {
		t.Errorf("the live diff changed the item: %s %q", status, correction)
	}
}

// The bulk confirmation lists the first items with the exact count.
func TestFeedbackBulkConfirmLists(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	ids := reviewItems(t, s, org, "m", "m", "m", "m", "m", "m", "m")
	c := s.SignedIn("cara@acme.test")
	c.Get("/feedback")
	var sel []string
	for _, id := range ids {
		sel = append(sel, id.String())
	}
	itemRE := regexp.MustCompile(`<li><a href="/feedback/([0-9a-f-]{36})">([^<]*)</a>`)
	check := func(name string, form url.Values) {
		t.Helper()
		body := c.PostForm("/feedback/bulk", form).Must(t, http.StatusOK).Body
		got := itemRE.FindAllStringSubmatch(body, -1)
		if len(got) != 5 {
			t.Fatalf("%s: the confirmation lists %d items, want 5", name, len(got))
		}
		for i, m := range got {
			if m[1] != sel[i] || m[2] != fmt.Sprintf("question %d for m", i) {
				t.Errorf("%s: item %d is %s %q", name, i, m[1], m[2])
			}
		}
		if !strings.Contains(body, "Apply Approve to 7 items?") || !strings.Contains(body, "and 2 more items") {
			t.Errorf("%s: the confirmation does not give the count 7 and 2 more", name)
		}
	}
	check("selection", url.Values{"op": {"approve"}, "ids": {strings.Join(sel, ",")}})
	check("filter", url.Values{"op": {"approve"}, "all": {"1"}, "filter": {"model=m"}})
}
