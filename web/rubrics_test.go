package web_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// rubricDoc is a rubric as the API answers it.
type rubricDoc struct {
	ID        uuid.UUID `json:"id"`
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	Questions []struct {
		Key  string `json:"key"`
		Kind string `json:"kind"`
		Min  *int   `json:"min"`
		Max  *int   `json:"max"`
	} `json:"questions"`
	AppliesTo struct {
		Tags []string `json:"tags"`
	} `json:"applies_to"`
}

// byField is a problem's field errors by field.
func byField(p problemDoc) map[string]string {
	out := map[string]string{}
	for _, e := range p.Errors {
		out[e.Field] = e.Message
	}
	return out
}

// triageRubric has a label, a rating, a span and a text question.
var triageRubric = map[string]any{
	"name":       "Clinical triage",
	"guidelines": "# Urgency\n- **critical**: a red flag was missed\n<script>alert(1)</script>",
	"questions": []map[string]any{
		{"key": "urgency_missed", "kind": "label", "title": "Urgency missed?", "options": []string{"none", "minor", "critical"}, "required": true},
		{"key": "accuracy", "kind": "rating", "title": "Accuracy", "min": 1, "max": 5, "options": []string{"wrong", "poor", "fair", "good", "exact"}},
		{"key": "wrong", "kind": "span", "title": "Which words are wrong?", "options": []string{"error", "unsafe"}},
		{"key": "why", "kind": "text", "title": "Why?"},
	},
	"applies_to": map[string]any{"tags": []string{"clinical"}},
}

// The rubric API: an admin defines a rubric (201, version 1), a curator
// may not; a malformed question is refused by its field; editing makes
// version 2; answers are checked per key (answers.<key>) and refused
// whole, and an accepted answer records the version it answered; a span
// lies within the answer's characters.
func TestRubricAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "admin-key", "admin")
	curator := s.APIKey(org, "curator-key", "curator")
	viewer := s.APIKey(org, "viewer-key", "viewer")
	ids := ingest(t, s, org, feedback.Item{Query: "chest pain?", Response: "one two three four", FeedbackType: "thumbs_down", Tags: []string{"clinical"}})

	s.API(curator, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusForbidden)
	bad := map[string]any{"name": "Bad", "questions": []map[string]any{{"key": "Bad Key", "kind": "stars"}, {"key": "r", "kind": "rating", "min": 3, "max": 2}}}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/rubrics", bad).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	for _, f := range []string{"questions[0].key", "questions[0].kind", "questions[1].max"} {
		if _, ok := byField(p)[f]; !ok {
			t.Errorf("a malformed rubric is not refused at %s: %v", f, byField(p))
		}
	}

	var r rubricDoc
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusCreated).JSON(t, &r)
	if r.ID == uuid.Nil || r.Version != 1 || len(r.Questions) != 4 || r.AppliesTo.Tags[0] != "clinical" {
		t.Fatalf("created rubric %+v", r)
	}
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusUnprocessableEntity)
	var list struct{ Data []rubricDoc }
	s.API(viewer, http.MethodGet, "/api/rubrics", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != r.ID {
		t.Fatalf("list %+v", list)
	}
	edited := map[string]any{}
	for k, v := range triageRubric {
		edited[k] = v
	}
	edited["guidelines"] = "Read the answer twice."
	var r2 rubricDoc
	s.API(admin, http.MethodPatch, "/api/rubrics/"+r.ID.String(), edited).Must(t, http.StatusOK).JSON(t, &r2)
	if r2.ID != r.ID || r2.Version != 2 {
		t.Fatalf("an edit made %+v, want version 2 of the same rubric", r2)
	}
	var v1 rubricDoc
	s.API(viewer, http.MethodGet, "/api/rubrics/"+r.ID.String()+"?version=1", nil).Must(t, http.StatusOK).JSON(t, &v1)
	if v1.Version != 1 {
		t.Errorf("version 1 reads as %d", v1.Version)
	}

	answers := "/api/feedback/" + ids[0].String() + "/answers"
	// Several problems at once, each by its key, and nothing stored.
	p = problemDoc{}
	s.API(curator, http.MethodPost, answers, map[string]any{"rubric_id": r.ID, "answers": map[string]any{
		"accuracy": 9, "wrong": []map[string]any{{"start": 2, "end": 40, "label": "error"}}, "mood": "happy",
	}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	for _, f := range []string{"answers.urgency_missed", "answers.accuracy", "answers.wrong", "answers.mood"} {
		if _, ok := byField(p)[f]; !ok {
			t.Errorf("a bad answer is not refused at %s: %v", f, byField(p))
		}
	}
	var got struct {
		Data []struct {
			RubricVersion int `json:"rubric_version"`
		}
	}
	s.API(curator, http.MethodGet, answers, nil).Must(t, http.StatusOK).JSON(t, &got)
	if len(got.Data) != 0 {
		t.Fatalf("a refused answer left %d stored", len(got.Data))
	}
	s.API(curator, http.MethodPost, answers, map[string]any{"rubric_id": r.ID, "answers": map[string]any{"urgency_missed": "none", "accuracy": 2.5}}).
		Must(t, http.StatusUnprocessableEntity)
	s.API(viewer, http.MethodPost, answers, map[string]any{"rubric_id": r.ID, "answers": map[string]any{"urgency_missed": "none"}}).
		Must(t, http.StatusForbidden)
	var a struct {
		RubricVersion int            `json:"rubric_version"`
		Answers       map[string]any `json:"answers"`
	}
	s.API(curator, http.MethodPost, answers, map[string]any{"rubric_id": r.ID, "answers": map[string]any{
		"urgency_missed": "minor", "accuracy": 4, "wrong": []map[string]any{{"start": 4, "end": 7, "label": "error"}}, "why": "two is off",
	}}).Must(t, http.StatusCreated).JSON(t, &a)
	if a.RubricVersion != 2 || a.Answers["urgency_missed"] != "minor" || a.Answers["accuracy"] != float64(4) {
		t.Fatalf("stored answer %+v", a)
	}
	s.API(curator, http.MethodGet, answers, nil).Must(t, http.StatusOK).JSON(t, &got)
	if len(got.Data) != 1 || got.Data[0].RubricVersion != 2 {
		t.Fatalf("answers %+v", got)
	}
}

// Agreement per question: two curators answer a label question and a span
// question on four items; POST /api/stats/agreement with the question
// gives Krippendorff's alpha at the question's level. Both questions are
// laid out so that their units are (a,a), (b,b), (a,b), (b,b) (for the
// span, token by token: a token both marked, one only the second marked,
// two neither marked), whose nominal alpha is 1 − (2/8)/(30/56) = 0.5333
// by the coincidence-matrix formula of Krippendorff, "Computing
// Krippendorff's Alpha-Reliability" (2011), and the ratings-matrix form
// of the same endpoint agrees.
func TestRubricQuestionAgreement(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "admin-key", "admin")
	one := s.APIKey(org, "one", "curator")
	two := s.APIKey(org, "two", "curator")
	viewer := s.APIKey(org, "viewer-key", "viewer")
	var items []feedback.Item
	for i := 0; i < 4; i++ {
		items = append(items, feedback.Item{Query: "question " + string(rune('a'+i)), Response: "one two three four", FeedbackType: "thumbs_down",
			Tags: []string{"clinical"}})
	}
	ids := ingest(t, s, org, items...)
	var r rubricDoc
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusCreated).JSON(t, &r)
	labels := [][2]string{{"none", "none"}, {"minor", "minor"}, {"none", "minor"}, {"minor", "minor"}}
	for i, id := range ids {
		for k, key := range []string{one, two} {
			body := map[string]any{"urgency_missed": labels[i][k]}
			if i == 0 {
				// Tokens: "one" both; "two" only the second; the rest neither.
				end := 3
				if k == 1 {
					end = 7
				}
				body["wrong"] = []map[string]any{{"start": 0, "end": end, "label": "error"}}
			}
			s.API(key, http.MethodPost, "/api/feedback/"+id.String()+"/answers", map[string]any{"rubric_id": r.ID, "answers": body}).
				Must(t, http.StatusCreated)
		}
	}
	type figure struct {
		Value          *float64 `json:"value"`
		Level          string   `json:"level"`
		Units          int      `json:"units"`
		Raters         int      `json:"raters"`
		PairableValues int      `json:"pairable_values"`
	}
	const want = 1 - (2.0/8)/(30.0/56)
	for _, q := range []string{"urgency_missed", "wrong"} {
		var f figure
		s.API(viewer, http.MethodPost, "/api/stats/agreement", map[string]any{"rubric_id": r.ID, "question": q}).
			Must(t, http.StatusOK).JSON(t, &f)
		if f.Value == nil || math.Abs(*f.Value-want) > 1e-4 || f.Level != "nominal" || f.Units != 4 || f.Raters != 2 || f.PairableValues != 8 {
			t.Errorf("%s: agreement %+v, want alpha %.4f over 4 units, 2 raters, 8 values", q, f, want)
		}
	}
	var m figure
	s.API(viewer, http.MethodPost, "/api/stats/agreement", map[string]any{"metric": "krippendorff_alpha", "level": "nominal",
		"ratings": [][]string{{"a", "a"}, {"b", "b"}, {"a", "b"}, {"b", "b"}}}).Must(t, http.StatusOK).JSON(t, &m)
	if m.Value == nil || math.Abs(*m.Value-want) > 1e-4 {
		t.Errorf("the ratings matrix gives %v, want %.4f", m.Value, want)
	}
	var p problemDoc
	s.API(viewer, http.MethodPost, "/api/stats/agreement", map[string]any{"rubric_id": r.ID, "question": "why"}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if _, ok := byField(p)["question"]; !ok {
		t.Errorf("a text question's agreement is not refused at question: %v", byField(p))
	}
	s.API(viewer, http.MethodPost, "/api/stats/agreement", map[string]any{"rubric_id": uuid.New(), "question": "why"}).
		Must(t, http.StatusUnprocessableEntity)
	// The export carries every answer with its item, one line each.
	s.API(viewer, http.MethodGet, "/api/rubrics/"+r.ID.String()+"/export", nil).Must(t, http.StatusForbidden)
	exp := s.API(one, http.MethodGet, "/api/rubrics/"+r.ID.String()+"/export", nil).Must(t, http.StatusOK)
	lines := strings.Split(strings.TrimSpace(exp.Body), "\n")
	if len(lines) != 8 || !strings.HasPrefix(exp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("the export has %d lines (%s), want 8", len(lines), exp.Header.Get("Content-Type"))
	}
	var line struct {
		FeedbackID    uuid.UUID      `json:"feedback_id"`
		Response      string         `json:"response"`
		RubricVersion int            `json:"rubric_version"`
		Answers       map[string]any `json:"answers"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.FeedbackID != ids[0] || line.Response != "one two three four" || line.RubricVersion != 1 || line.Answers["urgency_missed"] != "none" {
		t.Errorf("the first export line is %+v", line)
	}
	// GET /api/agreement takes the question too.
	var g figure
	s.API(viewer, http.MethodGet, "/api/agreement?rubric_id="+r.ID.String()+"&question=wrong", nil).Must(t, http.StatusOK).JSON(t, &g)
	if g.Value == nil || math.Abs(*g.Value-want) > 1e-4 {
		t.Errorf("GET /api/agreement for the span question: %+v", g)
	}
	// The agreement page shows the question's figure.
	s.User(org, "vic@acme.test", "viewer")
	page := s.SignedIn("vic@acme.test").Get("/review/agreement?rubric_id="+r.ID.String()+"&question=urgency_missed").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "0.533") || !strings.Contains(page.Body, "Urgency missed?") {
		t.Error("the agreement page does not show the question's alpha")
	}
	// The rubric's page counts the answers: none 3 times, minor 5.
	rubricPage := s.SignedIn("vic@acme.test").Get("/rubrics/"+r.ID.String()).Must(t, http.StatusOK)
	for _, want := range []string{`data-breakdown="urgency_missed"`, "8 answers", `>none</a></td><td class="num">3`,
		`>minor</a></td><td class="num">5`} {
		if !strings.Contains(rubricPage.Body, want) {
			t.Errorf("the rubric's page lacks %s", want)
		}
	}
	// Each count leads to its items: "none" was answered on the first and third.
	vic := s.SignedIn("vic@acme.test")
	listed := vic.Get("/rubrics/"+r.ID.String()+"/items?question=urgency_missed&value=none").Must(t, http.StatusOK)
	if n := strings.Count(listed.Body, `href="/feedback/`); n != 2 || !strings.Contains(listed.Body, ids[0].String()) || !strings.Contains(listed.Body, ids[2].String()) {
		t.Errorf("the items answered none: %d listed", n)
	}
	vic.Get("/rubrics/"+r.ID.String()+"/items?question=urgency_missed&value=maybe").Must(t, http.StatusUnprocessableEntity)
	vic.Get("/rubrics/"+r.ID.String()+"/items?question=why&value=x").Must(t, http.StatusUnprocessableEntity)
}

// The rubric pages: an admin defines a rubric with the form; the item
// page shows it beside an item with its tag, with its guidelines rendered
// and the author's markup escaped; a curator's answers are refused beside
// the question, then saved.
func TestRubricPages(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cara@acme.test", "curator")
	ids := ingest(t, s, org,
		feedback.Item{Query: "chest pain?", Response: "Rest and drink water", FeedbackType: "thumbs_down", Tags: []string{"clinical"}},
		feedback.Item{Query: "weather?", Response: "Sunny", FeedbackType: "thumbs_up", Tags: []string{"chat"}})
	admin := s.SignedIn("ada@acme.test")
	admin.Get("/rubrics/new").Must(t, http.StatusOK)
	form := url.Values{"name": {"Clinical triage"}, "tags": {"clinical"},
		"guidelines": {"# Urgency\n- **critical**: a red flag was missed\n<script>alert(1)</script>"},
		"q0_key":     {"urgency_missed"}, "q0_kind": {"label"}, "q0_title": {"Urgency missed?"}, "q0_options": {"none\nminor\ncritical"}, "q0_required": {"1"},
		"q1_key": {"accuracy"}, "q1_kind": {"rating"}, "q1_title": {"Accuracy"}, "q1_min": {"1"}, "q1_max": {"5"},
		"q2_key": {"wrong"}, "q2_kind": {"span"}, "q2_title": {"Which words are wrong?"}, "q2_options": {"error"},
		"q3_key": {""}, "q3_kind": {"label"}}
	bad := cloneForm(form)
	bad.Set("q1_max", "1")
	if page := admin.PostForm("/rubrics", bad).Must(t, http.StatusUnprocessableEntity); !strings.Contains(page.Body, `id="err-questions[1].max"`) {
		t.Error("a rating with max below min is not refused beside its field")
	}
	admin.PostForm("/rubrics", form).Must(t, http.StatusSeeOther)
	list := admin.Get("/rubrics").Must(t, http.StatusOK)
	if !strings.Contains(list.Body, "Clinical triage") || !strings.Contains(list.Body, "Urgency missed? (one label)") {
		t.Error("the rubric is not listed with its questions")
	}
	var rubricID uuid.UUID
	if err := s.Pool.QueryRow(context.Background(), "SELECT id FROM rubrics").Scan(&rubricID); err != nil {
		t.Fatal(err)
	}

	cara := s.SignedIn("cara@acme.test")
	page := cara.Get("/feedback/"+ids[0].String()).Must(t, http.StatusOK)
	for _, want := range []string{`data-rubric="` + rubricID.String() + `"`, "<strong>critical</strong>", "&lt;script&gt;", `data-question="urgency_missed"`,
		`data-span-text`, `data-s="5" data-e="8"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the item page lacks %s", want)
		}
	}
	if strings.Contains(page.Body, "<script>alert(1)") {
		t.Error("the guidelines' script reached the page")
	}
	if other := cara.Get("/feedback/"+ids[1].String()).Must(t, http.StatusOK); strings.Contains(other.Body, `data-rubric="`) {
		t.Error("a rubric for clinical items is asked of a chat item")
	}
	path := "/feedback/" + ids[0].String() + "/answers"
	refused := cara.PostForm(path, url.Values{"rubric_id": {rubricID.String()}, "a.accuracy": {"4"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(refused.Body, `id="err-answers.urgency_missed"`) {
		t.Error("a missing required answer is not refused beside its question")
	}
	// Saved without a script: back to the item's own address, with a flash.
	saved := cara.PostForm(path, url.Values{"rubric_id": {rubricID.String()}, "a.urgency_missed": {"critical"}, "a.accuracy": {"2"},
		"a.wrong": {`[{"start":0,"end":4,"label":"error"}]`}}).Must(t, http.StatusSeeOther)
	if loc := saved.Header.Get("Location"); loc != "/feedback/"+ids[0].String() {
		t.Errorf("saved answers go to %s", loc)
	}
	if page := cara.Get("/feedback/"+ids[0].String()).Must(t, http.StatusOK); !strings.Contains(page.Body, "Answers saved") ||
		!strings.Contains(page.Body, "You answered version 1") {
		t.Error("saved answers are not confirmed on the page")
	}
	// With htmx, the item's fragment comes back in place.
	h := http.Header{"HX-Request": {"true"}, "Content-Type": {"application/x-www-form-urlencoded"}}
	form2 := url.Values{"_csrf": {cara.CSRF()}, "rubric_id": {rubricID.String()}, "a.urgency_missed": {"critical"}, "a.accuracy": {"2"},
		"a.wrong": {`[{"start":0,"end":4,"label":"error"}]`}}
	if frag := cara.Do(http.MethodPost, path, strings.NewReader(form2.Encode()), h).Must(t, http.StatusOK); !strings.Contains(frag.Body, `id="answers-saved"`) {
		t.Error("the fragment does not confirm the answers")
	}
	var stored string
	if err := s.Pool.QueryRow(context.Background(), "SELECT answers::text FROM rubric_answers").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, `"urgency_missed": "critical"`) || !strings.Contains(stored, `"end": 4`) {
		t.Errorf("stored answers %s", stored)
	}
}

// Rubric questions under overlapping review: two curators review an item
// of a plan and answer its rubric; they agree on the status but not on a
// question, so the item is disputed on that question; the adjudication
// page shows both answers, refuses a decision that leaves the question
// open, and the decision is recorded as the item's adjudicated answers.
func TestRubricOverlapAdjudication(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	admin := s.APIKey(org, "admin-key", "admin")
	ids := tagged(t, s, org, "clinical", 1)
	var r rubricDoc
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusCreated).JSON(t, &r)
	ada := s.SignedIn("ada@acme.test")
	ada.Get("/review")
	ada.PostForm("/review/plans", url.Values{"scope": {"tag"}, "tag": {"clinical"}, "overlap": {"2"},
		"rating_tolerance": {"1"}, "dimension_tolerance": {"1"}}).Must(t, http.StatusSeeOther)
	var plan uuid.UUID
	if err := s.Pool.QueryRow(context.Background(), "SELECT id FROM review_plans").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	item := "/feedback/" + ids[0].String()
	for who, urgency := range map[string]string{"cara@acme.test": "none", "dan@acme.test": "critical"} {
		c := s.SignedIn(who)
		c.Get("/review")
		c.PostForm("/review/plans/"+plan.String()+"/next", nil).Must(t, http.StatusSeeOther)
		c.PostForm(item+"/answers", url.Values{"rubric_id": {r.ID.String()}, "a.urgency_missed": {urgency}, "a.accuracy": {"4"}}).
			Must(t, http.StatusSeeOther)
		c.PostForm(item+"/review", url.Values{"status": {"approved"}}).Must(t, http.StatusSeeOther)
		// A submitted review's answers are final with it.
		c.PostForm(item+"/answers", url.Values{"rubric_id": {r.ID.String()}, "a.urgency_missed": {"minor"}}).Must(t, http.StatusConflict)
		if page := c.Get(item).Must(t, http.StatusOK); strings.Contains(page.Body, "data-rubric-form") || !strings.Contains(page.Body, "answers with it") {
			t.Errorf("%s is still offered the rubric's form after submitting", who)
		}
	}
	var state string
	var disagreements []string
	if err := s.Pool.QueryRow(context.Background(), "SELECT state::text, disagreements FROM review_items").Scan(&state, &disagreements); err != nil {
		t.Fatal(err)
	}
	if state != "disputed" || len(disagreements) != 1 || disagreements[0] != "question:urgency_missed" {
		t.Fatalf("the item is %s on %v, want disputed on the urgency question alone", state, disagreements)
	}
	page := ada.Get("/review/adjudication").Must(t, http.StatusOK)
	for _, want := range []string{`data-disputed-question="Urgency missed?"`, "“Urgency missed”", `name="answer.` + r.ID.String() + `.urgency_missed"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the adjudication page lacks %s", want)
		}
	}
	decide := "/review/adjudication/" + ids[0].String()
	refused := ada.PostForm(decide, url.Values{"status": {"approved"}, "note": {"urgent after all"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(refused.Body, `id="err-answers.urgency_missed"`) {
		t.Error("a decision that leaves the question open is not refused beside it")
	}
	ada.PostForm(decide, url.Values{"status": {"approved"}, "note": {"urgent after all"},
		"answer." + r.ID.String() + ".urgency_missed": {`"critical"`}}).Must(t, http.StatusSeeOther)
	var decided string
	if err := s.Pool.QueryRow(context.Background(), "SELECT answers->>'urgency_missed' FROM rubric_answers WHERE adjudicated").Scan(&decided); err != nil {
		t.Fatal(err)
	}
	if decided != "critical" {
		t.Errorf("the adjudicated answer is %q, want critical", decided)
	}
	if done := ada.Get("/review/adjudication?decided=1").Must(t, http.StatusOK); !strings.Contains(done.Body, `data-decided-question="Urgency missed?"`) {
		t.Error("the decided list does not show the question's decision")
	}
	// The plan links to each question's agreement over its items.
	if home := ada.Get("/review").Must(t, http.StatusOK); !strings.Contains(home.Body, `href="/review/agreement?tag=clinical&amp;question=urgency_missed&amp;rubric_id=`+r.ID.String()+`"`) {
		t.Error("the plan does not link to the question's agreement")
	}
}

// Bulk answers: the same answers for a selection of items, all or none.
// An item of another organisation, a span answer or a missing required
// answer refuses the whole and stores nothing; accepted, every item holds
// the answers at the rubric's version.
func TestRubricBulkAnswers(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "admin-key", "admin")
	curator := s.APIKey(org, "curator-key", "curator")
	ids := tagged(t, s, org, "clinical", 3)
	other := tagged(t, s, s.Org("globex"), "clinical", 1)
	var r rubricDoc
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusCreated).JSON(t, &r)
	path := "/api/rubrics/" + r.ID.String() + "/answers"
	count := func() int {
		var n int
		if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM rubric_answers").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var p problemDoc
	s.API(curator, http.MethodPost, path, map[string]any{"feedback_ids": []any{ids[0], other[0]}, "answers": map[string]any{"urgency_missed": "none"}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if _, ok := byField(p)["feedback_ids[1]"]; !ok {
		t.Errorf("another organisation's item is not refused by its place: %v", byField(p))
	}
	s.API(curator, http.MethodPost, path, map[string]any{"feedback_ids": ids, "answers": map[string]any{"urgency_missed": "none",
		"wrong": []map[string]any{{"start": 0, "end": 1, "label": "error"}}}}).Must(t, http.StatusUnprocessableEntity)
	s.API(curator, http.MethodPost, path, map[string]any{"feedback_ids": ids, "answers": map[string]any{"accuracy": 3}}).
		Must(t, http.StatusUnprocessableEntity)
	if n := count(); n != 0 {
		t.Fatalf("refused bulk answers left %d stored", n)
	}
	var out struct{ Answered int }
	s.API(curator, http.MethodPost, path, map[string]any{"feedback_ids": ids, "answers": map[string]any{"urgency_missed": "minor", "accuracy": 3}}).
		Must(t, http.StatusCreated).JSON(t, &out)
	if out.Answered != 3 || count() != 3 {
		t.Errorf("answered %d, %d stored; want 3", out.Answered, count())
	}
}
