package main

import "testing"

// Figures over runs: the median (the mean of the middle two for an even
// count) and the range, computed by hand.
func TestFigShow(t *testing.T) {
	for _, c := range []struct {
		f    fig
		want string
	}{
		{nil, "—"},
		{fig{42}, "42 ms"},
		{fig{80, 70, 90, 60, 100}, "80 [60–100] ms"},
		{fig{4, 1, 3, 2}, "2 [1–4] ms"}, // median 2.5 written %.0f: 2 (round half to even)
	} {
		if got := c.f.show("%.0f", " ms"); got != c.want {
			t.Errorf("%v: %q, want %q", c.f, got, c.want)
		}
	}
	r := runs{{"a": 10, "b": 5}, {"a": 9, "b": 3}, {"a": 1}}
	if got := r.ratio("a", "b").show("%.1f", "×"); got != "2.5 [2.0–3.0]×" {
		t.Errorf("ratio per run: %q", got)
	}
	if got := r.fig("a").median(); got != 9 {
		t.Errorf("median of 10, 9, 1: %v", got)
	}
}
