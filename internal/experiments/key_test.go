package experiments

import (
	"strings"
	"testing"
)

// A key derived from a name fits the key pattern, keeps the name's words,
// and leaves room for a number after it.
func TestKeyOf(t *testing.T) {
	for name, want := range map[string]string{
		"Support v2 vs v3":         "support-v2-vs-v3",
		"  Q4 — refunds (2025)!  ": "q4-refunds-2025",
		"assistant.v3_beta":        "assistant.v3_beta",
		"__Über test":              "ber-test",
		"!!!":                      "experiment",
		"":                         "experiment",
		strings.Repeat("a", 80):    strings.Repeat("a", 56),
		strings.Repeat("ab ", 30):  strings.TrimRight(strings.Repeat("ab-", 19), "-"),
	} {
		got := KeyOf(name)
		if got != want {
			t.Errorf("KeyOf(%q) = %q, want %q", name, got, want)
		}
		if !keyPattern.MatchString(got + "-99") {
			t.Errorf("KeyOf(%q) = %q: numbered, it breaks the key pattern", name, got)
		}
	}
}
