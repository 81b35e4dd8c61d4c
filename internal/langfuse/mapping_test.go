package langfuse

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

var scoredAt = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

func sampleTrace() Trace {
	return Trace{
		ID:        "tr-1",
		SessionID: "sess-1",
		UserID:    "u-1",
		Input:     json.RawMessage(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the capital of Australia?"}]}`),
		Output:    json.RawMessage(`{"role":"assistant","content":"Sydney."}`),
		Metadata:  json.RawMessage(`{"model":"gpt-4o"}`),
		Tags:      []string{"prod"},
	}
}

func intp(v int) *int { return &v }

func TestMap(t *testing.T) {
	score := func(dt DataType, name string, v float64, sv string) Score {
		return Score{ID: "sc-1", TraceID: "tr-1", Name: name, DataType: dt, Value: v, StringValue: sv, Comment: "c", Timestamp: scoredAt}
	}
	// want builds the feedback every successful case shares, written out
	// from sampleTrace by hand.
	want := func(typ string, rating *int, correction string) Feedback {
		return Feedback{
			ExternalID: "langfuse:sc-1", TraceID: "tr-1", SessionID: "sess-1", UserID: "u-1",
			Query: "What is the capital of Australia?", Response: "Sydney.", Model: "gpt-4o",
			Type: typ, Rating: rating, Correction: correction, Comment: "c",
			Tags: []string{"prod"}, CreatedAt: scoredAt,
		}
	}
	for _, tc := range []struct {
		name   string
		score  Score
		want   Feedback
		ok     bool
		reason SkipReason
	}{
		{"boolean true is thumbs up", score(DataBoolean, "helpful", 1, "True"), want(TypeThumbsUp, nil, ""), true, ""},
		{"boolean false is thumbs down", score(DataBoolean, "helpful", 0, "False"), want(TypeThumbsDown, nil, ""), true, ""},
		{"boolean other value", score(DataBoolean, "helpful", 2, ""), Feedback{}, false, SkipOutOfRange},
		{"numeric thumbs 1", score(DataNumeric, "thumbs", 1, ""), want(TypeThumbsUp, nil, ""), true, ""},
		{"numeric user-feedback -1", score(DataNumeric, "user-feedback", -1, ""), want(TypeThumbsDown, nil, ""), true, ""},
		{"numeric User_Feedback 0", score(DataNumeric, "User_Feedback", 0, ""), want(TypeThumbsDown, nil, ""), true, ""},
		{"numeric thumbs_up 0", score(DataNumeric, "thumbs_up", 0, ""), want(TypeThumbsDown, nil, ""), true, ""},
		{"thumbs name with a rating value is a rating", score(DataNumeric, "thumbs", 4, ""), want(TypeRating, intp(4), ""), true, ""},
		{"rating 4", score(DataNumeric, "rating", 4, ""), want(TypeRating, intp(4), ""), true, ""},
		{"rating 5", score(DataNumeric, "rating", 5, ""), want(TypeRating, intp(5), ""), true, ""},
		{"rating 1 reads on the 1..5 scale", score(DataNumeric, "rating", 1, ""), want(TypeRating, intp(1), ""), true, ""},
		{"rating 3.6 rounds to 4", score(DataNumeric, "rating", 3.6, ""), want(TypeRating, intp(4), ""), true, ""},
		{"0..1 score 0 is 1", score(DataNumeric, "quality", 0, ""), want(TypeRating, intp(1), ""), true, ""},
		{"0..1 score 0.25 is 2", score(DataNumeric, "quality", 0.25, ""), want(TypeRating, intp(2), ""), true, ""},
		{"0..1 score 0.5 is 3", score(DataNumeric, "quality", 0.5, ""), want(TypeRating, intp(3), ""), true, ""},
		{"0..1 score 0.9 is 5", score(DataNumeric, "quality", 0.9, ""), want(TypeRating, intp(5), ""), true, ""},   // 1 + round(3.6)
		{"0..1 score 0.12 is 1", score(DataNumeric, "quality", 0.12, ""), want(TypeRating, intp(1), ""), true, ""}, // 1 + round(0.48)
		{"rating above 5", score(DataNumeric, "rating", 5.5, ""), Feedback{}, false, SkipOutOfRange},
		{"rating below 0", score(DataNumeric, "rating", -0.1, ""), Feedback{}, false, SkipOutOfRange},
		{"-1 outside a thumbs name", score(DataNumeric, "rating", -1, ""), Feedback{}, false, SkipOutOfRange},
		{"NaN", score(DataNumeric, "rating", math.NaN(), ""), Feedback{}, false, SkipOutOfRange},
		{"infinity", score(DataNumeric, "rating", math.Inf(1), ""), Feedback{}, false, SkipOutOfRange},
		{"correction", score(DataCorrection, "output", 0, "Canberra."), want(TypeCorrection, nil, "Canberra."), true, ""},
		{"blank correction", score(DataCorrection, "output", 0, "  \n"), Feedback{}, false, SkipEmptyCorrection},
		{"categorical", score(DataCategorical, "tone", 0, "formal"), Feedback{}, false, SkipCategorical},
		{"text", score(DataText, "notes", 0, "some note"), Feedback{}, false, SkipText},
		{"unknown data type", score("VECTOR", "emb", 0, "[1,2]"), Feedback{}, false, SkipUnknownType},
		{"session score", Score{ID: "sc-1", SessionID: "sess-1", DataType: DataNumeric, Value: 5}, Feedback{}, false, SkipNoTrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, reason := Map(tc.score, sampleTrace())
			if ok != tc.ok || reason != tc.reason {
				t.Fatalf("Map ok, reason = %v, %q; want %v, %q", ok, reason, tc.ok, tc.reason)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Map =\n %+v\nwant\n %+v", got, tc.want)
			}
			if mok, mreason := Mappable(tc.score); mok != tc.ok || mreason != tc.reason {
				t.Errorf("Mappable = %v, %q; want %v, %q (no trace-dependent reason here)", mok, mreason, tc.ok, tc.reason)
			}
		})
	}
}

func TestMapNeedsTraceContent(t *testing.T) {
	rating := Score{ID: "r", TraceID: "tr-1", Name: "rating", DataType: DataNumeric, Value: 4, Timestamp: scoredAt}
	correction := Score{ID: "c", TraceID: "tr-1", Name: "output", DataType: DataCorrection, StringValue: "Canberra.", Timestamp: scoredAt}

	if _, ok, reason := Map(rating, Trace{}); ok || reason != SkipTraceNotFound {
		t.Errorf("zero trace: %v, %q; want false, %q", ok, reason, SkipTraceNotFound)
	}

	noInput := sampleTrace()
	noInput.Input = nil
	if _, ok, reason := Map(rating, noInput); ok || reason != SkipNoQuery {
		t.Errorf("no input: %v, %q; want false, %q", ok, reason, SkipNoQuery)
	}

	noOutput := sampleTrace()
	noOutput.Output = nil
	if _, ok, reason := Map(rating, noOutput); ok || reason != SkipNoResponse {
		t.Errorf("no output: %v, %q; want false, %q", ok, reason, SkipNoResponse)
	}
	// A correction supplies the answer itself, so the original may be missing.
	f, ok, _ := Map(correction, noOutput)
	if !ok || f.Correction != "Canberra." || f.Response != "" {
		t.Errorf("correction without output = %+v, %v; want kept with empty Response", f, ok)
	}
}

func TestMapObservationScore(t *testing.T) {
	tr := sampleTrace()
	tr.Observations = []Observation{{
		ID: "obs-9", Type: "GENERATION", Model: "claude-sonnet",
		Input:  json.RawMessage(`[{"role":"user","content":"Summarise the memo."}]`),
		Output: json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"The memo asks for budgets."}]}`),
	}}
	s := Score{ID: "o", TraceID: "tr-1", ObservationID: "obs-9", Name: "helpful", DataType: DataBoolean, Value: 1, CreatedAt: scoredAt}

	f, ok, reason := Map(s, tr)
	if !ok {
		t.Fatalf("Map skipped: %q", reason)
	}
	if f.Query != "Summarise the memo." || f.Response != "The memo asks for budgets." || f.Model != "claude-sonnet" {
		t.Errorf("Query, Response, Model = %q, %q, %q; want the scored observation's", f.Query, f.Response, f.Model)
	}
	if !f.CreatedAt.Equal(scoredAt) {
		t.Errorf("CreatedAt = %s, want the score's creation time %s when its timestamp is unset", f.CreatedAt, scoredAt)
	}
	if f.SessionID != "sess-1" || f.UserID != "u-1" {
		t.Errorf("SessionID, UserID = %q, %q; want the trace's", f.SessionID, f.UserID)
	}
}
