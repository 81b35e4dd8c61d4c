package feedback

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/errs"
)

// The seeds' records map to Curate's fields, and each fault is named as
// the record spelt it.
func TestIncomingMap(t *testing.T) {
	n := func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	summary := func(it Item) string {
		d := Dimensions{}
		if it.Dimensions != nil {
			d = *it.Dimensions
		}
		at := "-"
		if it.GivenAt != nil {
			at = it.GivenAt.UTC().Format(time.RFC3339Nano)
		}
		return strings.Join([]string{it.ExternalID, it.TraceID, it.FeedbackType, n(it.Rating),
			n(d.Accuracy) + n(d.Helpfulness) + n(d.Clarity) + n(d.Safety), it.Comment, it.Correction, at, it.Query, string(it.Context)}, "|")
	}
	for _, c := range []struct {
		name, record, shape string
		want, fields        string
	}{
		{"seed 001 record", `{"feedback_id": "f1", "response_id": "r1", "rating_overall": 4, "rating_dimensions": {"accuracy": 5, "safety": 4},
			"text_feedback": "ok", "reaction_type": "neutral", "timestamp": "2025-01-15T10:30:00+07:00",
			"context": {"query": "q?", "previous_messages": ["hi"], "user_profile": {"age": 3}}}`, ShapeSeed001,
			`f1|r1|neutral|4|5--4|ok||2025-01-15T03:30:00Z|q?|{"messages":["hi"],"user_profile":{"age":3}}`, ""},
		{"only rated", `{"rating_overall": 2}`, "", "||rating|2|----|||-||", ""},
		{"only dimensions", `{"rating_dimensions": {"clarity": 1}}`, "", "||detailed|-|--1-|||-||", ""},
		{"postgres time", `{"created_at": "2025-10-02 10:30:00.25+00"}`, "", "|||-|----|||2025-10-02T10:30:00.25Z||", ""},
		{"python time", `{"created_at": "2025-10-02 10:30:00.123456+02:00"}`, "", "|||-|----|||2025-10-02T08:30:00.123456Z||", ""},
		{"no zone is UTC", `{"timestamp": "2025-10-02T10:30:00"}`, "", "|||-|----|||2025-10-02T10:30:00Z||", ""},
		{"seed 004 thumbs", `{"id": "x", "feedback_type": "thumbs_down", "feedback_value": "too long"}`, ShapeSeed004,
			"x||thumbs_down|-|----|too long||-||", ""},
		{"seed 004 rating", `{"feedback_type": "rating", "feedback_value": 5.0}`, "", "||rating|5|----|||-||", ""},
		{"seed 004 rating object", `{"feedback_type": "rating", "feedback_value": {"rating": 3, "comment": "meh"}}`, "", "||rating|3|----|meh||-||", ""},
		{"seed 004 correction", `{"feedback_type": "correction", "feedback_value": {"correction": "Paris", "comment": "capital"}}`, "",
			"||correction|-|----|capital|Paris|-||", ""},
		{"seed 004 detailed", `{"feedback_type": "detailed", "feedback_value": {"accuracy": 1, "helpfulness": 2, "clarity": 3, "safety": 4, "rating": 2}}`, "",
			"||detailed|2|1234|||-||", ""},

		{"both names", `{"feedback_id": "a", "external_id": "b", "text_feedback": "x", "comment": "y"}`, "", "", "feedback_id,text_feedback"},
		{"two seed ids", `{"feedback_id": "a", "id": "b"}`, "", "", "id"},
		{"not a reaction", `{"reaction_type": "rating"}`, "", "", "reaction_type"},
		{"not a time", `{"timestamp": 1736937000}`, "", "", "timestamp"},
		{"bad values", `{"feedback_type": "detailed", "feedback_value": {"accuracy": 6, "clarity": 2.5, "tone": 1}}`, "", "",
			"feedback_value.accuracy,feedback_value.clarity,feedback_value.tone"},
		{"value said twice", `{"feedback_type": "rating", "rating": 4, "feedback_value": 4}`, "", "", "feedback_value"},
		{"thumb denied", `{"feedback_type": "thumbs_up", "feedback_value": false}`, "", "", "feedback_value"},
		{"previous_messages twice", `{"context": {"messages": [], "previous_messages": []}}`, "", "", "context.previous_messages"},
		{"seed 004 field in a seed 001 file", `{"feedback_id": "a", "curator_email": "a@b.c"}`, ShapeSeed001, "", "curator_email"},
		{"seed 001 field in a seed 004 file", `{"id": "a", "reaction_type": "thumbs_up"}`, ShapeSeed004, "", "reaction_type"},
	} {
		var in Incoming
		if err := json.Unmarshal([]byte(c.record), &in); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v := &errs.Invalid{}
		it := in.Map(v, "", c.shape)
		if got := strings.Join(v.Fields(), ","); got != c.fields {
			t.Errorf("%s: faults named %q, want %q (%v)", c.name, got, c.fields, v.Errors)
			continue
		}
		if c.fields == "" {
			if got := summary(it); got != c.want {
				t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
			}
		}
	}
}

// Validate names Curate's fields as the record spelt them.
func TestValidateNamesTheSeedsFields(t *testing.T) {
	var in Incoming
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if err := json.Unmarshal([]byte(`{"feedback_id": "`+strings.Repeat("x", 300)+`", "rating_overall": 9, "rating_dimensions": {"safety": 0},
		"reaction_type": "thumbs_up", "context": {"query": "q"}, "response": "r", "timestamp": "`+future+`"}`), &in); err != nil {
		t.Fatal(err)
	}
	v := &errs.Invalid{}
	it := in.Map(v, "items[2].", ShapeAny)
	it.Validate(v, "items[2].")
	want := "items[2].feedback_id,items[2].rating_dimensions.safety,items[2].rating_overall,items[2].timestamp" // sorted
	if got := strings.Join(v.Fields(), ","); got != want {
		t.Errorf("faults named %q, want %q (%v)", got, want, v.Errors)
	}
}
