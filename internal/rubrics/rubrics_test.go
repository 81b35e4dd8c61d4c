package rubrics

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

func intp(n int) *int { return &n }

func triage() Rubric {
	return Rubric{Name: "Triage", Version: 3, Questions: []Question{
		{Key: "urgency", Kind: KindLabel, Title: "Urgency", Options: []string{"none", "minor", "critical"}, Required: true},
		{Key: "flags", Kind: KindLabels, Title: "Flags", Options: []string{"dose", "referral", "tone"}, Max: intp(2)},
		{Key: "accuracy", Kind: KindRating, Title: "Accuracy", Min: intp(1), Max: intp(5)},
		{Key: "best", Kind: KindRanking, Title: "Best", Options: []string{"a", "b", "c"}},
		{Key: "why", Kind: KindText, Title: "Why", Max: intp(10)},
		{Key: "wrong", Kind: KindSpan, Title: "Wrong", Options: []string{"error"}},
	}}
}

func raw(t *testing.T, m map[string]any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for k, v := range m {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

// Answers are checked question by question, every problem named by its
// key; accepted ones come back tidied (labels in the options' order,
// spans by start).
func TestCheckAnswers(t *testing.T) {
	r := triage()
	_, err := r.Check(raw(t, map[string]any{
		"flags": []string{"dose", "dose"}, "accuracy": 6, "best": []string{"a", "b"}, "why": "far too long a text",
		"wrong": []map[string]any{{"start": 3, "end": 2, "label": "error"}}, "extra": 1,
	}), "héllo wörld")
	var invalid *errs.Invalid
	if !asInvalid(err, &invalid) {
		t.Fatalf("err %v", err)
	}
	got := invalid.ByField()
	for _, f := range []string{"answers.urgency", "answers.flags", "answers.accuracy", "answers.best", "answers.why", "answers.wrong", "answers.extra"} {
		if _, ok := got[f]; !ok {
			t.Errorf("no problem at %s: %v", f, got)
		}
	}
	vals, err := r.Check(raw(t, map[string]any{
		"urgency": "minor", "flags": []string{"tone", "dose"}, "accuracy": 4.0, "best": []string{"c", "a", "b"}, "why": "wörld",
		"wrong": []map[string]any{{"start": 6, "end": 11, "label": "error"}, {"start": 0, "end": 5, "label": "error"}},
	}), "héllo wörld")
	if err != nil {
		t.Fatal(err)
	}
	if f := vals["flags"].([]string); f[0] != "dose" || f[1] != "tone" {
		t.Errorf("labels %v, want the options' order", f)
	}
	if s := vals["wrong"].([]Span); s[0].Start != 0 || s[1].Start != 6 {
		t.Errorf("spans %v, want by start", s)
	}
	if vals["accuracy"] != 4 {
		t.Errorf("rating %v", vals["accuracy"])
	}
	// A span's end is in characters, not bytes: "wörld" ends at 11.
	if _, err := r.Check(raw(t, map[string]any{"urgency": "none", "wrong": []map[string]any{{"start": 6, "end": 12, "label": "error"}}}), "héllo wörld"); err == nil {
		t.Error("a span past the answer's last character is accepted")
	}
}

func asInvalid(err error, target **errs.Invalid) bool {
	i, ok := err.(*errs.Invalid)
	*target = i
	return ok
}

// Rubric definitions are refused field by field.
func TestValidateRubric(t *testing.T) {
	in := Input{Name: " ", Questions: []Question{
		{Key: "a", Kind: KindLabel, Options: []string{"x"}},
		{Key: "a", Kind: KindRating, Min: intp(1), Max: intp(20)},
		{Key: "c", Kind: KindText, Level: "interval"},
	}}
	err := in.validate()
	var invalid *errs.Invalid
	if !asInvalid(err, &invalid) {
		t.Fatalf("err %v", err)
	}
	got := invalid.ByField()
	for _, f := range []string{"name", "questions[0].options", "questions[1].key", "questions[1].max", "questions[2].level"} {
		if _, ok := got[f]; !ok {
			t.Errorf("no problem at %s: %v", f, got)
		}
	}
}

// Guidelines render a little Markdown and nothing of the author's own
// markup: a script, an attribute and a javascript: link stay text.
func TestGuidelinesHTML(t *testing.T) {
	out := GuidelinesHTML("# Read\n- **bold** and *em* and `<b>`\n- [ok](https://example.org/a?b=1&c=2)\n\n<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>")
	for _, want := range []string{"<h3>Read</h3>", "<li><strong>bold</strong> and <em>em</em> and <code>&lt;b&gt;</code></li>",
		`<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer">ok</a>`, "&lt;script&gt;", "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "<script") || strings.Contains(out, `href="javascript`) || strings.Contains(out, "<img") {
		t.Errorf("markup got through: %s", out)
	}
}

// Spans are measured token by token: a token a span touches takes its
// label, any other "none".
func TestSpanUnits(t *testing.T) {
	tokens := Tokens("  one two\tthree  ")
	if len(tokens) != 3 || tokens[0].Start != 2 || tokens[0].End != 5 || tokens[2].Start != 10 || tokens[2].End != 15 {
		t.Fatalf("tokens %+v", tokens)
	}
	q := Question{Key: "w", Kind: KindSpan}
	units, ok := q.Units(json.RawMessage(`[{"start":4,"end":7,"label":"error"}]`), tokens)
	if !ok || units["000000"] != stats.Text("error") || units["000001"] != stats.Text("error") || units["000002"] != stats.Text("none") {
		t.Errorf("units %v", units)
	}
	if q.AgreementLevel() != stats.LevelNominal || (Question{Kind: KindRating, Level: "interval"}).AgreementLevel() != stats.LevelInterval ||
		(Question{Kind: KindRating}).AgreementLevel() != stats.LevelOrdinal || (Question{Kind: KindText}).AgreementLevel() != "" {
		t.Error("levels by kind")
	}
}
