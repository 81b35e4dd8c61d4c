package errs

import "testing"

func TestText(t *testing.T) {
	for _, tc := range []struct {
		value    string
		max      int
		required bool
		want     string // "" when fine
	}{
		{"hello", 10, true, ""},
		{"", 10, false, ""},
		{"  ", 10, true, "is required"},
		{"hello world", 5, false, "is 11 bytes; at most 5"},
		{"bad \xff byte", 100, false, "is not valid UTF-8"},
		{"nul\x00", 100, false, "contains a NUL character"},
	} {
		v := &Invalid{}
		ok := v.Text("f", tc.value, tc.max, tc.required)
		got := v.ByField()["f"]
		if got != tc.want || ok != (tc.want == "") {
			t.Errorf("Text(%q) = %v, %q; want %q", tc.value, ok, got, tc.want)
		}
	}
}
