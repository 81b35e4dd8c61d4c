package handlers

import (
	"fmt"
	"testing"

	"github.com/curate/curate/internal/errs"
)

// A p-value is shown to four decimals; below that precision it reads
// "< 0.0001", never 0 (the expected texts are the rule written out).
func TestFormatP(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want string
	}{
		{0, "< 0.0001"},
		{1e-300, "< 0.0001"},
		{0.0000999, "< 0.0001"},
		{0.0001, "0.0001"},
		{0.01294, "0.0129"},
		{0.05, "0.0500"},
		{0.32514, "0.3251"},
		{1, "1.0000"},
	} {
		if got := formatP(tc.p); got != tc.want {
			t.Errorf("formatP(%g) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// Shares are typed in percent and read as fractions: a split strictly
// between 0% and 100%, a coverage above 0% and up to 100%.
func TestPercentInput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		upTo bool
		want float64
		msg  string
	}{
		{"30", false, 0.3, ""},
		{" 12.5% ", false, 0.125, ""},
		{"100", true, 1, ""},
		{"100", false, 0, "must be above 0% and below 100%"},
		{"0", true, 0, "must be above 0% and at most 100%"},
		{"half", false, 0, "must be a number of percent, such as 50"},
		{"NaN", true, 0, "must be a number of percent, such as 50"},
		{"", false, 0, "is required: a share in percent"},
	} {
		v := &errs.Invalid{}
		got, ok := percentInput(v, "f", tc.in, true, tc.upTo)
		if msg := v.ByField()["f"]; msg != tc.msg || ok != (tc.msg == "") || got != tc.want {
			t.Errorf("percentInput(%q, %v) = %v, %v, %q; want %v, %q", tc.in, tc.upTo, got, ok, msg, tc.want, tc.msg)
		}
	}
}

// A rollout's steps read in any of the ways people write them, rising to
// 100%.
func TestStepsInput(t *testing.T) {
	for _, tc := range []struct {
		in, want, msg string
	}{
		{"10, 50, 100", "[0.1 0.5 1]", ""},
		{"10% → 50% → 100%", "[0.1 0.5 1]", ""},
		{"25;100", "[0.25 1]", ""},
		{"100", "[1]", ""},
		{"10, 50", "[]", "must end at 100: the full rollout"},
		{"50, 10, 100", "[]", "must rise from step to step, each above 0% (step 2 is 10%)"},
		{"0, 100", "[]", "must rise from step to step, each above 0% (step 1 is 0%)"},
		{"-10, 100", "[]", "must rise from step to step, each above 0% (step 1 is -10%)"},
		{"ten, 100", "[]", "give shares in percent separated by commas, such as 10, 50, 100"},
		{"", "[]", "give 1 to 10 shares in percent, such as 10, 50, 100"},
		{"1,2,3,4,5,6,7,8,9,10,100", "[]", "give 1 to 10 shares in percent, such as 10, 50, 100"},
	} {
		v := &errs.Invalid{}
		got := stepsInput(v, tc.in)
		if msg := v.ByField()["rollout_steps"]; msg != tc.msg || fmt.Sprint(got) != tc.want {
			t.Errorf("stepsInput(%q) = %v, %q; want %s, %q", tc.in, got, msg, tc.want, tc.msg)
		}
	}
}

func TestKeySuggestion(t *testing.T) {
	for in, want := range map[string]string{
		"support-1.1.0":         "support-1.1.0",
		"Support Bot-2.0.0-rc1": "support-bot-2.0.0-rc1",
		"-a+b-":                 "a-b",
	} {
		if got := keySuggestion(in); got != want {
			t.Errorf("keySuggestion(%q) = %q, want %q", in, got, want)
		}
	}
	long := keySuggestion("m" + fmt.Sprintf("%070d", 0))
	if len(long) != 64 {
		t.Errorf("a long key is %d bytes", len(long))
	}
}

func TestHoldText(t *testing.T) {
	for mins, want := range map[int]string{0: "0 minutes", 1: "1 minute", 90: "90 minutes", 60: "1 hour", 180: "3 hours", 1440: "1 day", 2880: "2 days"} {
		if got := holdText(mins); got != want {
			t.Errorf("holdText(%d) = %q, want %q", mins, got, want)
		}
	}
}
