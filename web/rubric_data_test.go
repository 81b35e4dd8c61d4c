package web_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/web/webtest"
)

// Rubric answers in the API's data routes: a dataset filter naming an
// unknown rubric question or answer is refused as problem+json by its
// field, and the judge route refuses a request naming no item.
func TestRubricAnswersDataAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	admin := s.APIKey(s.Org("acme"), "admin-key", "admin")
	var r rubricDoc
	s.API(admin, http.MethodPost, "/api/rubrics", triageRubric).Must(t, http.StatusCreated).JSON(t, &r)
	var d struct {
		ID uuid.UUID `json:"id"`
	}
	s.API(admin, http.MethodPost, "/api/training-datasets", map[string]any{"name": "Triage SFT", "dataset_type": "instruction_tuning"}).
		Must(t, http.StatusCreated).JSON(t, &d)
	for field, filter := range map[string]map[string]string{
		"rubric_question": {"rubric_id": r.ID.String(), "rubric_question": "urgency", "rubric_answer": "none"},
		"rubric_answer":   {"rubric_id": r.ID.String(), "rubric_question": "urgency_missed", "rubric_answer": "severe"},
	} {
		var p problemDoc
		s.API(admin, http.MethodPost, "/api/training-datasets/"+d.ID.String()+"/members", map[string]any{"filter": filter}).
			Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if byField(p)[field] == "" {
			t.Errorf("filter %v: errors %v, want one on %s", filter, byField(p), field)
		}
	}
	var p problemDoc
	s.API(admin, http.MethodPost, "/api/rubrics/"+r.ID.String()+"/judge", map[string]any{"endpoint": "judge", "feedback_ids": []string{}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if byField(p)["feedback_ids"] == "" {
		t.Errorf("judge without items: %v", byField(p))
	}
}
