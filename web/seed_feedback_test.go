package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/web/webtest"
)

// seedObject is a stored feedback item as the API answers it.
type seedObject struct {
	ID           string          `json:"id"`
	ExternalID   *string         `json:"external_id"`
	SessionID    string          `json:"session_id"`
	TraceID      string          `json:"trace_id"`
	UserID       string          `json:"user_id"`
	Query        string          `json:"query"`
	Response     string          `json:"response"`
	Context      json.RawMessage `json:"context"`
	FeedbackType string          `json:"feedback_type"`
	Rating       *int            `json:"rating"`
	Dimensions   struct {
		Accuracy, Helpfulness, Clarity, Safety *int
	} `json:"dimensions"`
	Comment        string    `json:"comment"`
	Correction     string    `json:"correction"`
	CreatedAt      time.Time `json:"created_at"`
	IsTrainingData bool      `json:"is_training_data"`
	GivenByID      *string   `json:"given_by_id"`
	// The seeds' names are never answered.
	RatingOverall any `json:"rating_overall"`
	TextFeedback  any `json:"text_feedback"`
	FeedbackValue any `json:"feedback_value"`
}

func (o seedObject) dims() string {
	n := func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	d := o.Dimensions
	return n(d.Accuracy) + n(d.Helpfulness) + n(d.Clarity) + n(d.Safety)
}

func intOr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// Seed 001's feedback record, sent as that system stores it, on an answer
// best-of-N logged: the answer, its question and its context come from the
// log, the seed's names land in Curate's fields, the time is when it was
// given, and is_training_data is a person's decision. The answer is in
// Curate's names.
func TestSeed001FeedbackRecord(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "assistant", "curator")

	var answer bestOfNDoc
	s.API(key, http.MethodPost, "/api/best-of-n", map[string]any{"query": "Làm sao để đặt lại mật khẩu?",
		"context":    map[string]any{"documents": []string{"KB-12"}},
		"candidates": []string{"Dùng liên kết Quên mật khẩu.", "Tôi không biết."},
		"scorer":     map[string]any{"rules": []any{map[string]any{"name": "dunno", "kind": "forbidden", "phrases": []string{"không biết"}}}},
	}).Must(t, http.StatusOK).JSON(t, &answer)
	if answer.Response != "Dùng liên kết Quên mật khẩu." || answer.ResponseID == "" {
		t.Fatalf("best-of-N answered %+v", answer)
	}

	// The record in the shape of seed 001's feedback_data table, every
	// field of it, with no query or answer of its own beyond the context.
	record := `{
  "feedback_id": "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b",
  "response_id": "` + answer.ResponseID + `",
  "user_id": "user-8812",
  "session_id": "sess-2231",
  "rating_overall": 4,
  "rating_dimensions": {
    "accuracy": 5, "helpfulness": 4,
    "clarity": 3, "safety": 5
  },
  "text_feedback": "Đúng, nhưng hơi ngắn.",
  "reaction_type": "thumbs_up",
  "context": {"query": "Làm sao để đặt lại mật khẩu?", "previous_messages": [{"role": "user", "content": "Xin chào"}, {"role": "assistant", "content": "Chào bạn!"}], "user_profile": {"age": 34, "location": "Hà Nội", "preferences": {"language": "vi"}}},
  "timestamp": "2025-11-03T08:15:30Z",
  "is_training_data": false
}`
	res := s.API(key, http.MethodPost, "/api/feedback", rawJSON(record)).Must(t, http.StatusCreated)
	var got seedObject
	res.JSON(t, &got)
	var ctxObj map[string]any
	if err := json.Unmarshal(got.Context, &ctxObj); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"external_id", *got.ExternalID, "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"},
		{"trace_id", got.TraceID, answer.ResponseID},
		{"user_id", got.UserID, "user-8812"},
		{"session_id", got.SessionID, "sess-2231"},
		{"query", got.Query, "Làm sao để đặt lại mật khẩu?"},
		{"response", got.Response, "Dùng liên kết Quên mật khẩu."}, // the answer best-of-N selected
		{"feedback_type", got.FeedbackType, "thumbs_up"},
		{"rating", intOr(got.Rating), 4},
		{"dimensions", got.dims(), "5435"},
		{"comment", got.Comment, "Đúng, nhưng hơi ngắn."},
		{"created_at", got.CreatedAt.UTC().Format(time.RFC3339), "2025-11-03T08:15:30Z"},
		{"is_training_data", got.IsTrainingData, false},
		{"context.messages", fmt.Sprint(ctxObj["messages"]), "[map[content:Xin chào role:user] map[content:Chào bạn! role:assistant]]"},
		{"context.user_profile", fmt.Sprint(ctxObj["user_profile"]), "map[age:34 location:Hà Nội preferences:map[language:vi]]"},
		{"context.documents", fmt.Sprint(ctxObj["documents"]), "[KB-12]"}, // from the logged answer
		{"context keys", len(ctxObj), 3}, // query moved out, previous_messages renamed
		{"rating_overall echoed", got.RatingOverall, nil},
		{"text_feedback echoed", got.TextFeedback, nil},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	// The decision is a person's: it names the sender, and hygiene leaves it.
	var decidedBy string
	if err := s.Pool.QueryRow(context.Background(), "SELECT training_set_by FROM feedback WHERE id = $1", got.ID).Scan(&decidedBy); err != nil || decidedBy != "assistant" {
		t.Errorf("training_set_by = %q (%v), want the key's name", decidedBy, err)
	}
	// The logged answer lists the feedback on it.
	var logged struct {
		FeedbackIDs []string `json:"feedback_ids"`
	}
	s.API(key, http.MethodGet, "/api/best-of-n/"+answer.ResponseID, nil).Must(t, http.StatusOK).JSON(t, &logged)
	if fmt.Sprint(logged.FeedbackIDs) != "["+got.ID+"]" {
		t.Errorf("the logged answer lists %v, want [%s]", logged.FeedbackIDs, got.ID)
	}
	// Sent again: the stored one, by its feedback_id.
	var again seedObject
	s.API(key, http.MethodPost, "/api/feedback", rawJSON(record)).Must(t, http.StatusOK).JSON(t, &again)
	if again.ID != got.ID || feedbackCount(t, s) != 1 {
		t.Fatalf("re-sent record stored anew: %s, %d rows", again.ID, feedbackCount(t, s))
	}

	// A neutral reaction on an answer the record carries itself, naming
	// a response Curate never logged: kept as the trace.
	var neutral seedObject
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"feedback_id": "fb-2", "response_id": "resp-from-elsewhere",
		"reaction_type": "neutral", "context": map[string]any{"query": "Giờ mở cửa?"}, "response": "8 giờ sáng.",
		"timestamp": "2025-11-04 09:00:00+07"}).Must(t, http.StatusCreated).JSON(t, &neutral)
	if neutral.FeedbackType != "neutral" || neutral.TraceID != "resp-from-elsewhere" || neutral.Query != "Giờ mở cửa?" ||
		!neutral.CreatedAt.Equal(time.Date(2025, 11, 4, 2, 0, 0, 0, time.UTC)) || !neutral.IsTrainingData {
		t.Errorf("neutral record stored as %+v", neutral)
	}

	// The pages call the reaction by its name: the queue's type filter
	// offers it, the queue and the item show it.
	s.User(org, "vera@acme.test", "viewer")
	browser := s.SignedIn("vera@acme.test")
	queuePage := browser.Get("/feedback?type=neutral").Must(t, http.StatusOK).Body
	if !strings.Contains(queuePage, `<option value="neutral" selected>Neutral</option>`) || !strings.Contains(queuePage, "<td>Neutral</td>") ||
		strings.Contains(queuePage, "Thumbs up") && strings.Contains(queuePage, "<td>Thumbs up</td>") {
		t.Errorf("the queue filtered by the neutral reaction does not show it as Neutral:\n%s", queuePage)
	}
	if itemPage := browser.Get("/feedback/"+neutral.ID).Must(t, http.StatusOK).Body; !strings.Contains(itemPage, "<span>Neutral</span>") {
		t.Errorf("the item page does not call the reaction Neutral:\n%s", itemPage)
	}

	// Refusals name the field as the record spelt it, and store nothing.
	before := feedbackCount(t, s)
	for _, c := range []struct {
		name   string
		body   map[string]any
		fields string
	}{
		{"no such answer and none carried", map[string]any{"response_id": "0b9f3c1e-0000-4000-8000-000000000000", "reaction_type": "thumbs_down",
			"context": map[string]any{"query": "q"}}, "response_id"},
		{"given in the future", map[string]any{"response_id": answer.ResponseID, "reaction_type": "thumbs_up",
			"timestamp": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "timestamp"},
		{"not a time", map[string]any{"response_id": answer.ResponseID, "reaction_type": "thumbs_up", "timestamp": "yesterday"}, "timestamp"},
		{"not a reaction", map[string]any{"response_id": answer.ResponseID, "reaction_type": "meh"}, "reaction_type"},
		{"bad ratings", map[string]any{"response_id": answer.ResponseID, "reaction_type": "thumbs_up", "rating_overall": 7,
			"rating_dimensions": map[string]any{"clarity": 0}}, "rating_overall,rating_dimensions.clarity"},
		{"both names", map[string]any{"response_id": answer.ResponseID, "reaction_type": "thumbs_up", "feedback_type": "thumbs_up"}, "reaction_type"},
		{"unknown field", map[string]any{"response_id": answer.ResponseID, "reaction_type": "thumbs_up", "reaction": "up"}, "reaction"},
	} {
		var p problemDoc
		s.API(key, http.MethodPost, "/api/feedback", c.body).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != c.fields {
			t.Errorf("%s: refused naming %q, want %q (%+v)", c.name, p.fields(), c.fields, p.Errors)
		}
	}
	if n := feedbackCount(t, s); n != before {
		t.Errorf("refused records stored %d rows", n-before)
	}
}

// Seed 004's rlhf_feedback rows of every feedback_type, as that table
// holds them, in one batch: feedback_value read by the type, the curator
// resolved to the organisation's user, the organisation checked, the time
// kept. A batch with one bad row stores none.
func TestSeed004FeedbackRows(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.Org("globex")
	ada := s.User(org, "ada@acme.test", "curator")
	key := s.APIKey(org, "betabase", "curator")

	row := func(id, typ, value, at string) string {
		return `{"id": "` + id + `", "session_id": "aoma-77", "query": "How do I export a report?",
  "response": "Open Reports and press Export.", "feedback_type": "` + typ + `", "feedback_value": ` + value + `,
  "curator_email": "Ada@Acme.test", "organization": "Acme", "created_at": "` + at + `"}`
	}
	rows := []string{
		row("a1b2c3d4-0000-4000-8000-000000000001", "thumbs_up", `true`, "2025-10-01 09:00:00+00"),
		row("a1b2c3d4-0000-4000-8000-000000000002", "thumbs_down", `{"comment": "Misses the CSV option."}`, "2025-10-02 10:30:00.250+00"),
		row("a1b2c3d4-0000-4000-8000-000000000003", "rating", `4`, "2025-10-03T11:00:00Z"),
		row("a1b2c3d4-0000-4000-8000-000000000004", "correction", `"Open Reports, choose CSV or PDF, and press Export."`, "2025-10-04T12:00:00+02:00"),
		row("a1b2c3d4-0000-4000-8000-000000000005", "detailed", `{"accuracy": 2, "helpfulness": 3, "clarity": 4, "safety": 5, "rating": 3, "comment": "Right idea, vague."}`, "2025-10-05 13:00:00"),
	}
	batch := rawJSON(`{"items": [` + strings.Join(rows, ",\n") + `]}`)
	var res struct{ Inserted, Duplicates int }
	s.API(key, http.MethodPost, "/api/feedback/batch", batch).Must(t, http.StatusOK).JSON(t, &res)
	if res.Inserted != 5 || res.Duplicates != 0 {
		t.Fatalf("batch stored %+v", res)
	}
	var list struct{ Data []seedObject }
	s.API(key, http.MethodGet, "/api/feedback?limit=10&duplicates=show", nil).Must(t, http.StatusOK).JSON(t, &list)
	byID := map[string]seedObject{}
	for _, o := range list.Data {
		byID[*o.ExternalID] = o
	}
	want := []struct {
		id, typ, comment, correction, dims, at string
		rating                                 int
	}{
		{"…01", "thumbs_up", "", "", "----", "2025-10-01T09:00:00Z", 0},
		{"…02", "thumbs_down", "Misses the CSV option.", "", "----", "2025-10-02T10:30:00.25Z", 0},
		{"…03", "rating", "", "", "----", "2025-10-03T11:00:00Z", 4},
		{"…04", "correction", "", "Open Reports, choose CSV or PDF, and press Export.", "----", "2025-10-04T10:00:00Z", 0},
		{"…05", "detailed", "Right idea, vague.", "", "2345", "2025-10-05T13:00:00Z", 3},
	}
	for _, w := range want {
		id := "a1b2c3d4-0000-4000-8000-0000000000" + strings.TrimPrefix(w.id, "…")
		o, ok := byID[id]
		if !ok {
			t.Errorf("row %s not stored", id)
			continue
		}
		got := fmt.Sprint(o.FeedbackType, "|", o.Comment, "|", o.Correction, "|", o.dims(), "|", o.CreatedAt.UTC().Format(time.RFC3339Nano), "|", intOr(o.Rating))
		if exp := fmt.Sprint(w.typ, "|", w.comment, "|", w.correction, "|", w.dims, "|", w.at, "|", w.rating); got != exp {
			t.Errorf("row %s stored as %s, want %s", id, got, exp)
		}
		if o.SessionID != "aoma-77" || o.Query != "How do I export a report?" || o.Response != "Open Reports and press Export." ||
			o.GivenByID == nil || *o.GivenByID != ada.String() || o.FeedbackValue != nil {
			t.Errorf("row %s: session %q, query %q, response %q, given_by_id %v, feedback_value %v", id, o.SessionID, o.Query, o.Response, o.GivenByID, o.FeedbackValue)
		}
	}

	// The item's page says who gave it, and when.
	page := s.SignedIn("ada@acme.test").Get("/feedback/"+byID["a1b2c3d4-0000-4000-8000-000000000003"].ID).Must(t, http.StatusOK).Body
	if !strings.Contains(page, `<dd id="given-by">ada@acme.test</dd>`) || !strings.Contains(page, "2025-10-03") {
		t.Errorf("the item page does not say who gave it and when:\n%s", page)
	}

	// One bad row refuses the batch, each fault named by its row and field:
	// what a row says, and then what it names.
	for _, c := range []struct {
		rows   []string
		fields string
	}{
		{[]string{
			row("b-1", "rating", `9`, "2025-10-06T00:00:00Z"),
			row("b-2", "thumbs_up", `true`, "2025-10-06T00:00:00Z"),
			row("b-3", "detailed", `{"accuracy": 2, "tone": 5}`, "2025-10-06T00:00:00Z"),
			row("b-4", "correction", `{"correction": ""}`, "2025-10-06T00:00:00Z"),
		}, "items[0].feedback_value,items[2].feedback_value.tone,items[3].feedback_value.correction"},
		{[]string{
			strings.Replace(row("b-1", "rating", `5`, "2025-10-06T00:00:00Z"), "Ada@Acme.test", "nobody@acme.test", 1),
			strings.Replace(row("b-2", "thumbs_up", `true`, "2025-10-06T00:00:00Z"), `"Acme"`, `"Globex"`, 1),
			row("b-3", "rating", `{"rating": 5}`, "2099-01-01T00:00:00Z"),
		}, "items[0].curator_email,items[1].organization,items[2].created_at"},
	} {
		var p problemDoc
		s.API(key, http.MethodPost, "/api/feedback/batch", rawJSON(`{"items": [`+strings.Join(c.rows, ",")+`]}`)).
			Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != c.fields {
			t.Errorf("bad batch refused naming %q, want %q (%+v)", p.fields(), c.fields, p.Errors)
		}
	}
	if n := feedbackCount(t, s); n != 5 {
		t.Errorf("refused batches left %d rows, want 5", n)
	}
}

// History sent with its dates is the queue's order and the stats' days:
// items given on three days, sent out of order, list newest first by when
// they were given and count on their own day.
func TestSeedHistoryKeepsItsDates(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	key := s.APIKey(org, "importer", "curator")
	day := func(ago int) time.Time {
		return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -ago).Add(10 * time.Hour)
	}
	items := []map[string]any{
		{"feedback_id": "h-3", "query": "q3", "response": "r3", "reaction_type": "thumbs_down", "timestamp": day(3).Format(time.RFC3339)},
		{"feedback_id": "h-9", "query": "q9", "response": "r9", "reaction_type": "thumbs_up", "timestamp": day(9).Format(time.RFC3339)},
		{"feedback_id": "h-5a", "query": "q5a", "response": "r5a", "reaction_type": "thumbs_up", "timestamp": day(5).Format(time.RFC3339)},
		{"feedback_id": "h-5b", "query": "q5b", "response": "r5b", "rating_overall": 2, "timestamp": day(5).Add(time.Hour).Format(time.RFC3339)},
	}
	s.API(key, http.MethodPost, "/api/feedback/batch", map[string]any{"items": items}).Must(t, http.StatusOK)
	// One sent now, without a time.
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"feedback_id": "now", "query": "qn", "response": "rn",
		"reaction_type": "thumbs_up"}).Must(t, http.StatusCreated)

	var list struct{ Data []seedObject }
	s.API(key, http.MethodGet, "/api/feedback", nil).Must(t, http.StatusOK).JSON(t, &list)
	var order []string
	for _, o := range list.Data {
		order = append(order, *o.ExternalID)
	}
	if got := strings.Join(order, " "); got != "now h-3 h-5b h-5a h-9" {
		t.Errorf("queue order %q, want newest given first", got)
	}

	r, err := s.App.FeedbackStats.Report(context.Background(), org, feedbackstats.Window{Days: 30}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	byDay := map[string]feedbackstats.Counts{}
	for i, c := range r.Daily {
		byDay[r.Since.AddDate(0, 0, i).Format("2006-01-02")] = c
	}
	for _, c := range []struct {
		ago                 int
		total, up, down, rt int
	}{{9, 1, 1, 0, 0}, {5, 2, 1, 0, 1}, {3, 1, 0, 1, 0}, {0, 1, 1, 0, 0}, {4, 0, 0, 0, 0}} {
		got := byDay[day(c.ago).Format("2006-01-02")]
		if got.Total != c.total || got.ThumbsUp != c.up || got.ThumbsDown != c.down || got.Ratings != c.rt {
			t.Errorf("%d days ago: %+v, want total %d, up %d, down %d, ratings %d", c.ago, got, c.total, c.up, c.down, c.rt)
		}
	}
}
