package web_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/curate/curate/db"
	"github.com/curate/curate/web/webtest"
)

type problemDoc struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (p problemDoc) fields() string {
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return strings.Join(out, ",")
}

func feedbackCount(t *testing.T, s *webtest.Server) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feedback").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFeedbackCreateIsIdempotent(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "assistant", "curator")
	item := map[string]any{
		"external_id": "msg-1", "session_id": "s1", "user_id": "u1", "query": "How do I reset my password?",
		"response": "Click 'Forgot password'. Write to ada@example.com if it fails.", "feedback_type": "rating", "rating": 2,
		"dimensions": map[string]int{"accuracy": 2, "safety": 5}, "model": "support-v2", "latency_ms": 840,
		"tags": []string{" Login ", "login", "billing"}, "context": map[string]any{"documents": []string{"KB-12"}},
	}
	var created map[string]any
	res := s.API(key, http.MethodPost, "/api/feedback", item).Must(t, http.StatusCreated)
	res.JSON(t, &created)
	if created["status"] != "pending" || created["source"] != "api" || fmt.Sprint(created["tags"]) != "[login billing]" {
		t.Fatalf("created %v", created)
	}
	if fmt.Sprint(created["pii"]) != "[EMAIL]" {
		t.Errorf("pii = %v, want [EMAIL]", created["pii"])
	}
	if res.Header.Get("ETag") != `W/"1"` {
		t.Errorf("ETag %q", res.Header.Get("ETag"))
	}
	var again map[string]any
	s.API(key, http.MethodPost, "/api/feedback", item).Must(t, http.StatusOK).JSON(t, &again)
	if again["id"] != created["id"] || feedbackCount(t, s) != 1 {
		t.Fatalf("re-sending the external_id stored a second row")
	}
	// The 201's object is the stored row: the same as the row read back.
	if !reflect.DeepEqual(again, created) {
		t.Errorf("created object differs from the stored row:\n%v\n%v", created, again)
	}

	// The same query and response again, without an external id: a duplicate, linked to the first.
	delete(item, "external_id")
	var dup map[string]any
	s.API(key, http.MethodPost, "/api/feedback", item).Must(t, http.StatusCreated).JSON(t, &dup)
	if dup["duplicate_of"] != created["id"] {
		t.Fatalf("duplicate_of = %v, want %v", dup["duplicate_of"], created["id"])
	}
}

func TestFeedbackValidation(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "assistant", "curator")
	for _, tc := range []struct {
		body   string
		fields string
	}{
		{`{"query":"q","response":"r","feedback_type":"rating","rating":7}`, "rating"},
		{`{"query":"q","response":"r","feedback_type":"love"}`, "feedback_type"},
		{`{"query":"","response":"r","feedback_type":"thumbs_up"}`, "query"},
		{`{"query":"q","response":"r","feedback_type":"thumbs_up","dimensions":{"clarity":0}}`, "dimensions.clarity"},
		{`{"query":"q","response":"r","feedback_type":"thumbs_up","rating":"five"}`, "rating"},
		{`{"query":"q","response":"r","feedback_type":"thumbs_up","colour":"red"}`, "colour"},
		{`{"query":"q","response":"r","feedback_type":"correction"}`, "correction"},
		{`{"query":"q","response":"r","feedback_type":"thumbs_up","tags":["` + strings.Repeat(`a","`, 40) + `a"]}`, "tags"},
		{`{"query":"q","response":"` + strings.Repeat("x", 70000) + `","feedback_type":"thumbs_up"}`, "response"},
		{`{"query":"q",`, ""},
	} {
		res := s.Client().Do(http.MethodPost, "/api/feedback", strings.NewReader(tc.body),
			http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}})
		if res.Status != http.StatusUnprocessableEntity || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%.60s: %d %s", tc.body, res.Status, res.Header.Get("Content-Type"))
			continue
		}
		var p problemDoc
		res.JSON(t, &p)
		if tc.fields != "" && p.fields() != tc.fields {
			t.Errorf("%.60s: fields %q, want %q (%s)", tc.body, p.fields(), tc.fields, res.Body)
		}
	}
	// Invalid UTF-8 is refused, not silently repaired.
	bad := "{\"query\":\"q\xff\",\"response\":\"r\",\"feedback_type\":\"thumbs_up\"}"
	res := s.Client().Do(http.MethodPost, "/api/feedback", strings.NewReader(bad),
		http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}})
	if res.Status != http.StatusUnprocessableEntity || !strings.Contains(res.Body, "UTF-8") {
		t.Errorf("invalid UTF-8: %d %s", res.Status, res.Body)
	}
	if n := feedbackCount(t, s); n != 0 {
		t.Fatalf("bad input stored %d rows", n)
	}
	// A viewer key reads but cannot write.
	viewer := s.APIKey(org, "dashboard", "viewer")
	s.API(viewer, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up"}).Must(t, http.StatusForbidden)
	s.API(viewer, http.MethodGet, "/api/feedback", nil).Must(t, http.StatusOK)
}

func TestFeedbackBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "assistant", "curator")
	items := make([]map[string]any, 100)
	for i := range items {
		items[i] = map[string]any{"external_id": fmt.Sprintf("b-%d", i), "query": fmt.Sprintf("question %d", i),
			"response": "answer", "feedback_type": "thumbs_down"}
	}
	items[57]["rating"] = 9
	var p problemDoc
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "items[57].rating" {
		t.Fatalf("fields %q", p.fields())
	}
	if n := feedbackCount(t, s); n != 0 {
		t.Fatalf("a refused batch stored %d rows", n)
	}

	delete(items[57], "rating")
	var res struct{ Inserted, Duplicates int }
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK).JSON(t, &res)
	if res.Inserted != 100 || res.Duplicates != 0 {
		t.Fatalf("first batch: %+v", res)
	}
	// Re-sending it, with two new items, stores only the new ones.
	items = append(items, map[string]any{"external_id": "b-100", "query": "q", "response": "r", "feedback_type": "thumbs_up"},
		map[string]any{"external_id": "b-100", "query": "q", "response": "r", "feedback_type": "thumbs_up"})
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK).JSON(t, &res)
	if res.Inserted != 1 || res.Duplicates != 101 || feedbackCount(t, s) != 101 {
		t.Fatalf("second batch: %+v, rows %d", res, feedbackCount(t, s))
	}
	// Too many items.
	many := make([]map[string]any, 10001)
	for i := range many {
		many[i] = map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up"}
	}
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": many}).Must(t, http.StatusUnprocessableEntity)
}

func TestFeedbackListPatchAndConflict(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org, other := s.Org("acme"), s.Org("globex")
	key := s.APIKey(org, "assistant", "curator")
	otherKey := s.APIKey(other, "theirs", "admin")
	items := make([]map[string]any, 120)
	for i := range items {
		typ := "thumbs_up"
		if i%3 == 0 {
			typ = "thumbs_down"
		}
		items[i] = map[string]any{"query": fmt.Sprintf("q%d about invoices", i), "response": fmt.Sprintf("r%d", i), "feedback_type": typ, "model": "m1"}
	}
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)

	// Keyset pages of 50 over the 40 thumbs-down items and all 120.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Data []struct {
				ID           string `json:"id"`
				FeedbackType string `json:"feedback_type"`
			} `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		s.API(key, http.MethodGet, "/api/feedback?limit=50&cursor="+cursor, nil).Must(t, http.StatusOK).JSON(t, &page)
		for _, r := range page.Data {
			if seen[r.ID] {
				t.Fatalf("row %s on two pages", r.ID)
			}
			seen[r.ID] = true
		}
		if page.NextCursor == "" {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 120 {
		t.Fatalf("paged through %d rows, want 120", len(seen))
	}
	var down struct {
		Data []struct {
			ID           string `json:"id"`
			FeedbackType string `json:"feedback_type"`
		} `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/feedback?type=thumbs_down&limit=500&q=invoices", nil).Must(t, http.StatusOK).JSON(t, &down)
	if len(down.Data) != 40 {
		t.Fatalf("thumbs_down filter: %d rows, want 40", len(down.Data))
	}
	s.API(key, http.MethodGet, "/api/feedback?rating_min=9", nil).Must(t, http.StatusUnprocessableEntity)
	s.API(key, http.MethodGet, "/api/feedback?cursor=garbage!", nil).Must(t, http.StatusUnprocessableEntity)

	id := down.Data[0].ID
	patch := func(k, version string, body any) webtest.Response {
		h := http.Header{"Authorization": {"Bearer " + k}, "Content-Type": {"application/json"}}
		if version != "" {
			h.Set("If-Match", version)
		}
		return s.Client().Do(http.MethodPatch, "/api/feedback/"+id, strings.NewReader(mustJSON(t, body)), h)
	}
	var updated map[string]any
	patch(key, `W/"1"`, map[string]any{"correction": "The invoice is under Billing > Invoices."}).Must(t, http.StatusOK).JSON(t, &updated)
	if updated["status"] != "corrected" || updated["version"] != float64(2) {
		t.Fatalf("after correction: %v", updated)
	}
	// A second writer still holding version 1 is refused with the current item.
	var conflict struct {
		Status  int            `json:"status"`
		Current map[string]any `json:"current"`
	}
	patch(key, `W/"1"`, map[string]any{"status": "rejected"}).Must(t, http.StatusConflict).JSON(t, &conflict)
	if conflict.Current["status"] != "corrected" || conflict.Current["version"] != float64(2) {
		t.Fatalf("conflict body %+v", conflict)
	}
	patch(key, `"2"`, map[string]any{"status": "approved", "note": "checked against KB"}).Must(t, http.StatusOK)
	var got struct {
		Status  string `json:"status"`
		History []struct{ Action, Note string }
	}
	s.API(key, http.MethodGet, "/api/feedback/"+id, nil).Must(t, http.StatusOK).JSON(t, &got)
	if got.Status != "approved" || len(got.History) != 2 || got.History[1].Note != "checked against KB" {
		t.Fatalf("item after review: %+v", got)
	}
	// Another organisation sees nothing and changes nothing.
	s.API(otherKey, http.MethodGet, "/api/feedback/"+id, nil).Must(t, http.StatusNotFound)
	patch(otherKey, `"3"`, map[string]any{"status": "rejected"}).Must(t, http.StatusNotFound)
	var row db.Feedback
	if err := s.Pool.QueryRow(context.Background(), "SELECT status FROM feedback WHERE id = $1", id).Scan(&row.Status); err != nil || row.Status != "approved" {
		t.Fatalf("status %s %v", row.Status, err)
	}
	assertAudit(t, s, "feedback.correct", "feedback.approve")
}

func TestFeedbackRateLimits(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *cfgT) { c.APIRate = 0.001; c.APIBurst = 15 }})
	org := s.Org("acme")
	key := s.APIKey(org, "assistant", "curator")
	item := func(user string, i int) map[string]any {
		return map[string]any{"user_id": user, "query": fmt.Sprintf("q%d", i), "response": "r", "feedback_type": "thumbs_up"}
	}
	for i := range 10 {
		s.API(key, http.MethodPost, "/api/feedback", item("flooder", i)).Must(t, http.StatusCreated)
	}
	res := s.API(key, http.MethodPost, "/api/feedback", item("flooder", 10)).Must(t, http.StatusTooManyRequests)
	if res.Header.Get("Retry-After") == "" || !strings.Contains(res.Body, "flooder") {
		t.Fatalf("per-user limit: %v %s", res.Header, res.Body)
	}
	// Another user is not affected, until the key's own bucket (15) runs dry.
	for i := range 4 {
		s.API(key, http.MethodPost, "/api/feedback", item("calm", i)).Must(t, http.StatusCreated)
	}
	res = s.API(key, http.MethodPost, "/api/feedback", item("calm", 5)).Must(t, http.StatusTooManyRequests)
	if res.Header.Get("Retry-After") == "" || !strings.Contains(res.Body, "API key") {
		t.Fatalf("per-key limit: %s", res.Body)
	}
}
