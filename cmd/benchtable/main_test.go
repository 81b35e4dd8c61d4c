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

// A benchmark run below the size its goal was set at is named; one run at
// it is not.
func TestSizeNotes(t *testing.T) {
	notes := sizeNotes(map[string]runs{
		"BenchmarkResults": {{"rows": 200000}, {"rows": 200000}},
		"BenchmarkFreeze":  {{"rows": 1000000}},
	})
	want := "Note: results over feedback rows ran at 200,000 rows; its goal is set at 10,000,000 (CURATE_BENCH_RESULTS_ROWS=10000000). " +
		"The README's scaling section gives the largest size run."
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q, want [%q]", notes, want)
	}
}
