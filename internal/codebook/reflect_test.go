package codebook_test

import (
	"strings"
	"testing"

	"github.com/curate/curate/internal/codebook"
)

// The reflector's answer becomes a suggestion only when it is a rule a
// curator could have typed: anything else is refused with its reason.
func TestParseReflection(t *testing.T) {
	r, err := codebook.ParseReflection(" {\"section\": \" Billing  Policy \", \"rule\": \"When asked about refunds,\\n say 14 days.\"} ")
	if err != nil || r.Section != "billing policy" || r.Content != "When asked about refunds, say 14 days." || r.Status != "draft" {
		t.Fatalf("parsed %+v, %v", r, err)
	}
	if r, err := codebook.ParseReflection(`{"rule": "Cite the 2024 guideline."}`); err != nil || r.Section != "general" {
		t.Errorf("no section: %+v, %v", r, err)
	}
	for answer, want := range map[string]string{
		"Here is a rule: ship faster.":          "not a JSON object",
		`{"section": "billing"}`:                "no rule",
		`{"section": "billing", "rule": "   "}`: "no rule",
		`{"section": "a#b", "rule": "x"}`:       "section",
		`{"section": "billing", "rule": "` + strings.Repeat("x", codebook.MaxContent+1) + `"}`: "content",
		`{"section": "billing", "rule": "bad \u0000 byte"}`:                                    "content",
	} {
		if _, err := codebook.ParseReflection(answer); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want an error naming %q", answer, err, want)
		}
	}
}
