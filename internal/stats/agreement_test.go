package stats_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/curate/curate/internal/stats"
)

// ratings builds a matrix from rows of numbers, strings and nil (missing).
func ratings(rows ...[]any) stats.Ratings {
	r := make(stats.Ratings, len(rows))
	for u, row := range rows {
		r[u] = make([]stats.Rating, len(row))
		for i, v := range row {
			switch v := v.(type) {
			case int:
				r[u][i] = stats.Number(float64(v))
			case float64:
				r[u][i] = stats.Number(v)
			case string:
				r[u][i] = stats.Text(v)
			}
		}
	}
	return r
}

// transpose turns rater rows (as sources print them) into unit rows.
func transpose(raters ...[]any) stats.Ratings {
	units := make([][]any, len(raters[0]))
	for u := range units {
		for _, r := range raters {
			units[u] = append(units[u], r[u])
		}
	}
	return ratings(units...)
}

func figure(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6f, want %.6f (±%g)", what, got, want, tol)
	}
}

// Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011),
// sections C to F: 4 observers, 12 units, 7 labels missing and unit 12
// labelled once. The paper gives α = 0.743 (nominal), 0.815 (ordinal),
// 0.849 (interval) and 0.797 (ratio), from 40 pairable values in 11 units.
func TestAlphaKrippendorff2011(t *testing.T) {
	var n any // missing
	data := transpose(
		[]any{1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n},
		[]any{1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3},
		[]any{n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n},
		[]any{1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n},
	)
	for _, tc := range []struct {
		level stats.Level
		want  float64
	}{
		{stats.LevelNominal, 0.743}, {stats.LevelOrdinal, 0.815}, {stats.LevelInterval, 0.849}, {stats.LevelRatio, 0.797},
	} {
		rel, err := stats.Alpha(data, tc.level)
		if err != nil {
			t.Fatalf("%s: %v", tc.level, err)
		}
		figure(t, string(tc.level)+" alpha", rel.Value, tc.want, 0.0005)
		if rel.Units != 11 || rel.Raters != 4 || rel.Pairable != 40 || rel.Metric != stats.MetricKrippendorffAlpha || rel.Level != tc.level {
			t.Errorf("%s: units %d raters %d pairable %d (%s %s); want 11, 4, 40", tc.level, rel.Units, rel.Raters, rel.Pairable, rel.Metric, rel.Level)
		}
	}

	// The counts behind the nominal figure, worked by hand from the data
	// (the paper's coincidence matrix): value 1 is used 9 times, 2 13, 3 10,
	// 4 5 and 5 3; o₁₁ = 7 (units 1, 8 and 11), o₁₂ = 4/3 (units 6 and 8),
	// o₅₅ = 3 (unit 10). D_o = 8/40 = 1/5 and D_e = (40² - Σn_c²)/(40·39) =
	// 1216/1560; α = 1 - 39·8/1216.
	rel, err := stats.Alpha(data, stats.LevelNominal)
	if err != nil {
		t.Fatal(err)
	}
	if want := []stats.Rating{stats.Number(1), stats.Number(2), stats.Number(3), stats.Number(4), stats.Number(5)}; !slices.Equal(rel.Values, want) {
		t.Errorf("values %v, want %v", rel.Values, want)
	}
	if !slices.Equal(rel.Counts, []int{9, 13, 10, 5, 3}) {
		t.Errorf("counts %v, want [9 13 10 5 3]", rel.Counts)
	}
	figure(t, "o11", rel.Coincidences[0][0], 7, 1e-12)
	figure(t, "o12", rel.Coincidences[0][1], 4.0/3, 1e-12)
	figure(t, "o21", rel.Coincidences[1][0], 4.0/3, 1e-12)
	figure(t, "o55", rel.Coincidences[4][4], 3, 1e-12)
	figure(t, "D_o", rel.Observed, 0.2, 1e-12)
	figure(t, "D_e", rel.Expected, 1216.0/1560, 1e-12)
	figure(t, "alpha", rel.Value, 1-39.0*8/1216, 1e-12)
	for c, row := range rel.Coincidences {
		sum := 0.0
		for _, o := range row {
			sum += o
		}
		figure(t, "coincidence row sum", sum, float64(rel.Counts[c]), 1e-9)
	}
}

// Wikipedia, "Krippendorff's alpha", section "A computational example":
// 3 coders, 15 units (units 2 and 14 unlabelled, unit 1 labelled once),
// n = 26 pairable values;
// α = 0.691 nominal and 0.811 interval.
func TestAlphaWikipediaExample(t *testing.T) {
	var n any
	data := transpose(
		[]any{n, n, n, n, n, 3, 4, 1, 2, 1, 1, 3, 3, n, 3},
		[]any{1, n, 2, 1, 3, 3, 4, 3, n, n, n, n, n, n, n},
		[]any{n, n, 2, 1, 3, 4, 4, n, 2, 1, 1, 3, 3, n, 4},
	)
	rel, err := stats.Alpha(data, stats.LevelNominal)
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "nominal alpha", rel.Value, 0.691, 0.0005)
	if rel.Units != 12 || rel.Pairable != 26 || rel.Raters != 3 {
		t.Errorf("units %d pairable %d raters %d; want 12 pairable units holding 26 values from 3 coders", rel.Units, rel.Pairable, rel.Raters)
	}
	rel, err = stats.Alpha(data, stats.LevelInterval)
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "interval alpha", rel.Value, 0.811, 0.0005)
}

// Wikipedia, "Fleiss' kappa", worked example: 14 raters put 10 subjects
// into 5 categories; P̄ = 0.378, P̄e = 0.213, κ = 0.210.
func TestFleissWikipediaExample(t *testing.T) {
	counts := [][]int{
		{0, 0, 0, 0, 14}, {0, 2, 6, 4, 2}, {0, 0, 3, 5, 6}, {0, 3, 9, 2, 0}, {2, 2, 8, 1, 1},
		{7, 7, 0, 0, 0}, {3, 2, 6, 3, 0}, {2, 5, 3, 2, 2}, {6, 5, 2, 1, 0}, {0, 2, 2, 3, 7},
	}
	var rows [][]any
	for _, c := range counts {
		var row []any
		for j, k := range c {
			for range k {
				row = append(row, j+1)
			}
		}
		rows = append(rows, row)
	}
	rel, err := stats.Fleiss(ratings(rows...))
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "kappa", rel.Value, 0.210, 0.0005)
	figure(t, "P-bar", rel.Observed, 0.378, 0.0005)
	figure(t, "P-bar e", rel.Expected, 0.213, 0.0005)
	// The example's column totals, p_j·140: 20, 28, 39, 21, 32.
	if rel.Units != 10 || rel.Raters != 14 || rel.Pairable != 140 || !slices.Equal(rel.Counts, []int{20, 28, 39, 21, 32}) {
		t.Errorf("units %d raters %d pairable %d counts %v", rel.Units, rel.Raters, rel.Pairable, rel.Counts)
	}
}

// Fleiss' kappa does not know who gave a label: units where different
// raters are missing give the kappa of the same labels packed to the left,
// as long as each unit has the same number. A unit nobody labelled is not
// a unit; one with a label too few is refused, naming it.
func TestFleissMissingRaters(t *testing.T) {
	var n any
	packed, err := stats.Fleiss(ratings(
		[]any{"up", "up", "down"}, []any{"down", "down", "down"}, []any{"up", "up", "up"}, []any{"up", "down", "down"}))
	if err != nil {
		t.Fatal(err)
	}
	// By hand: P_i = 1/3, 1, 1, 1/3 so P̄ = 2/3; p(down) = p(up) = 1/2 so
	// P̄e = 1/2; κ = (2/3 - 1/2)/(1/2) = 1/3.
	figure(t, "packed kappa", packed.Value, 1.0/3, 1e-12)
	spread, err := stats.Fleiss(ratings(
		[]any{"up", n, "up", n, "down"}, []any{n, "down", "down", "down", n}, []any{n, n, n, n, n},
		[]any{"up", "up", n, "up", n}, []any{n, "up", n, "down", "down"}))
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "spread kappa", spread.Value, packed.Value, 1e-12)
	if spread.Units != 4 || spread.Raters != 5 || spread.Pairable != 12 {
		t.Errorf("units %d raters %d pairable %d; want 4, 5, 12", spread.Units, spread.Raters, spread.Pairable)
	}

	_, err = stats.Fleiss(ratings([]any{"up", "up", "down"}, []any{n, n, n}, []any{"up", n, "down"}))
	var ue *stats.UnitError
	if !errors.As(err, &ue) || ue.Unit != 2 || !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("unequal labels: %v; want unit 2 refused", err)
	}
	if _, err := stats.Fleiss(ratings([]any{"up", n}, []any{n, "down"})); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("one label per unit: %v", err)
	}
	if _, err := stats.Fleiss(ratings([]any{"up", "up"}, []any{"up", "up"})); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("one category: %v", err)
	}
}

// Wikipedia, "Cohen's kappa": the simple example (50 grant proposals: both
// yes 20, A yes B no 5, A no B yes 10, both no 15; p_o = 0.7, p_e = 0.5,
// κ = 0.4) and the two tables with the same 60% agreement but different
// marginals: 45/15/25/15 gives p_e = 0.6·0.7 + 0.4·0.3 = 0.54 and
// κ = 0.1304; 25/35/5/35 gives p_e = 0.6·0.3 + 0.4·0.7 = 0.46 and κ = 0.2593.
func TestCohenWikipediaExamples(t *testing.T) {
	table := func(yy, yn, ny, nn int) stats.Ratings {
		var rows [][]any
		for _, c := range []struct {
			a, b string
			k    int
		}{{"yes", "yes", yy}, {"yes", "no", yn}, {"no", "yes", ny}, {"no", "no", nn}} {
			for range c.k {
				rows = append(rows, []any{c.a, c.b})
			}
		}
		return ratings(rows...)
	}
	for _, tc := range []struct {
		yy, yn, ny, nn int
		po, pe, kappa  float64
	}{
		{20, 5, 10, 15, 0.7, 0.5, 0.4},
		{45, 15, 25, 15, 0.6, 0.54, 0.1304},
		{25, 35, 5, 35, 0.6, 0.46, 0.2593},
	} {
		rel, err := stats.Cohen(table(tc.yy, tc.yn, tc.ny, tc.nn))
		if err != nil {
			t.Fatal(err)
		}
		figure(t, "kappa", rel.Value, tc.kappa, 0.00005)
		figure(t, "p_o", rel.Observed, tc.po, 1e-12)
		figure(t, "p_e", rel.Expected, tc.pe, 1e-12)
	}

	// Units one rater left out are skipped; the table is rater 1 by
	// rater 2 over the values in order (no, yes).
	var n any
	r := table(20, 5, 10, 15)
	r = append(r, ratings([]any{"yes", n}, []any{n, "no"}, []any{n, n})...)
	rel, err := stats.Cohen(r)
	if err != nil {
		t.Fatal(err)
	}
	figure(t, "kappa with gaps", rel.Value, 0.4, 1e-12)
	if rel.Units != 50 || rel.Raters != 2 || rel.Pairable != 100 ||
		!slices.Equal(rel.Values, []stats.Rating{stats.Text("no"), stats.Text("yes")}) ||
		!slices.Equal(rel.Contingency[0], []int{15, 10}) || !slices.Equal(rel.Contingency[1], []int{5, 20}) {
		t.Errorf("units %d raters %d pairable %d values %v table %v", rel.Units, rel.Raters, rel.Pairable, rel.Values, rel.Contingency)
	}
	// Coincidences count both orders: o(no, yes) = 10 + 5.
	figure(t, "o(no,yes)", rel.Coincidences[0][1], 15, 1e-12)

	// The same labels as numbers give the same kappa.
	var num [][]any
	for _, row := range r {
		conv := make([]any, 2)
		for i, v := range row {
			switch v.String() {
			case "yes":
				conv[i] = 1
			case "no":
				conv[i] = 0
			}
		}
		num = append(num, conv)
	}
	if rel, err := stats.Cohen(ratings(num...)); err != nil || math.Abs(rel.Value-0.4) > 1e-12 {
		t.Errorf("numeric labels: %v, %v", rel.Value, err)
	}

	if _, err := stats.Cohen(ratings([]any{1, 2, 3}, []any{1, 2, 3})); !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("three raters: %v", err)
	}
	if _, err := stats.Cohen(ratings([]any{1, 2}, []any{1, n})); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("one unit both labelled: %v", err)
	}
	if _, err := stats.Cohen(ratings([]any{"a", "a"}, []any{"a", "a"})); !errors.Is(err, stats.ErrNotEnoughData) {
		t.Errorf("one category: %v", err)
	}
}

// Perfect agreement with variation is 1 at every level, zeros included at
// the ratio level (0 against 0 is no difference).
func TestAlphaPerfectAgreement(t *testing.T) {
	data := ratings([]any{0, 0, 0}, []any{1, 1, nil}, []any{2, 2, 2})
	for _, level := range []stats.Level{stats.LevelNominal, stats.LevelOrdinal, stats.LevelInterval, stats.LevelRatio} {
		rel, err := stats.Alpha(data, level)
		if err != nil || rel.Value != 1 {
			t.Errorf("%s: %v, %v; want 1", level, rel.Value, err)
		}
	}
	// Two texts and a number at the nominal level: three categories.
	rel, err := stats.Alpha(ratings([]any{"a", "a"}, []any{"b", "b"}, []any{1, 1}), stats.LevelNominal)
	if err != nil || rel.Value != 1 || !slices.Equal(rel.Values, []stats.Rating{stats.Number(1), stats.Text("a"), stats.Text("b")}) {
		t.Errorf("mixed labels: %v %v, %v", rel.Value, rel.Values, err)
	}
}

// Bad input is refused with the unit it is in; input too small or too
// uniform is not enough data.
func TestAlphaRefusals(t *testing.T) {
	var n any
	unitOf := func(err error) int {
		var ue *stats.UnitError
		if !errors.As(err, &ue) || !errors.Is(err, stats.ErrInvalid) {
			return -1
		}
		return ue.Unit
	}
	good := [][]any{{1, 2}, {2, 2}, {3, n}}
	with := func(u int, row []any) stats.Ratings {
		rows := slices.Clone(good)
		rows[u] = row
		return ratings(rows...)
	}
	for _, tc := range []struct {
		name  string
		r     stats.Ratings
		level stats.Level
		unit  int
	}{
		{"text at ordinal", with(2, []any{3, "high"}), stats.LevelOrdinal, 2},
		{"text at interval", with(1, []any{"2", 2}), stats.LevelInterval, 1},
		{"NaN", with(0, []any{math.NaN(), 1}), stats.LevelNominal, 0},
		{"infinity", with(1, []any{math.Inf(1), 1}), stats.LevelInterval, 1},
		{"negative at ratio", with(2, []any{-1, 1}), stats.LevelRatio, 2},
		{"ragged row", with(1, []any{1, 2, 3}), stats.LevelNominal, 1},
	} {
		if _, err := stats.Alpha(tc.r, tc.level); unitOf(err) != tc.unit {
			t.Errorf("%s: %v; want unit %d refused", tc.name, err, tc.unit)
		}
	}
	// Text is fine at the nominal level, negatives at the interval level.
	if _, err := stats.Alpha(with(2, []any{"x", -1}), stats.LevelNominal); err != nil {
		t.Errorf("nominal text: %v", err)
	}
	if _, err := stats.Alpha(with(2, []any{-3, -1}), stats.LevelInterval); err != nil {
		t.Errorf("interval negatives: %v", err)
	}

	for name, r := range map[string]stats.Ratings{
		"no units":          nil,
		"one pairable unit": ratings([]any{1, 2}, []any{3, n}, []any{n, n}),
		"no variation":      ratings([]any{4, 4}, []any{4, 4}, []any{4, n}),
	} {
		if _, err := stats.Alpha(r, stats.LevelInterval); !errors.Is(err, stats.ErrNotEnoughData) {
			t.Errorf("%s: %v; want not enough data", name, err)
		}
	}
	if _, err := stats.Alpha(ratings([]any{1, 2}, []any{2, 2}), "circular"); !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("unknown level: %v", err)
	}
	var many [][]any
	for i := range stats.MaxValues/2 + 1 {
		many = append(many, []any{2 * i, 2*i + 1})
	}
	if _, err := stats.Alpha(ratings(many...), stats.LevelInterval); !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("%d distinct labels: %v", stats.MaxValues+2, err)
	}
}

// A label reads back as the number or text it was, and missing as null.
func TestRatingJSON(t *testing.T) {
	b, err := json.Marshal([]stats.Rating{stats.Number(2.5), stats.Text(`say "hi"`), {}, stats.Number(math.Copysign(0, -1))})
	if err != nil || string(b) != `[2.5,"say \"hi\"",null,0]` {
		t.Errorf("JSON %s, %v", b, err)
	}
	if x, ok := stats.Number(3).Float(); !ok || x != 3 {
		t.Errorf("Float %v %v", x, ok)
	}
	if _, ok := stats.Text("3").Float(); ok || stats.Text("3") == stats.Number(3) || !(stats.Rating{}).Missing() {
		t.Error("a text label is not a number, and the zero Rating is missing")
	}
}

// The largest matrix the API takes (10,000 units, 100 raters) with every
// unit's labels distinct, the worst case for the coincidence matrix.
func BenchmarkAlphaLargest(b *testing.B) {
	r := make(stats.Ratings, 10000)
	for u := range r {
		r[u] = make([]stats.Rating, 100)
		for i := range r[u] {
			r[u][i] = stats.Number(float64((u*7 + i*13) % stats.MaxValues))
		}
	}
	for b.Loop() {
		if _, err := stats.Alpha(r, stats.LevelOrdinal); err != nil {
			b.Fatal(err)
		}
	}
}

// Alpha does not depend on the labels' unit at the interval and ratio
// levels: numbers near the float64 limits (whose differences or squares
// overflow, or underflow to 0) give the alpha of the same labels at a
// unit scale, and never a non-finite figure.
func TestAlphaExtremeMagnitudes(t *testing.T) {
	unit := ratings([]any{1, -1}, []any{1, 1}, []any{-1, 0})
	positive := ratings([]any{1, 2}, []any{1, 1}, []any{2, 0})
	for _, tc := range []struct {
		level stats.Level
		base  stats.Ratings
		scale float64
	}{
		{stats.LevelInterval, unit, 1e200}, // the matrix
		{stats.LevelInterval, unit, 1.7e308},
		{stats.LevelInterval, unit, 1e-320},
		{stats.LevelRatio, positive, 8e307},
		{stats.LevelRatio, positive, 5e-324},
	} {
		want, err := stats.Alpha(tc.base, tc.level)
		if err != nil {
			t.Fatal(err)
		}
		big := make(stats.Ratings, len(tc.base))
		for u, row := range tc.base {
			for _, r := range row {
				x, _ := r.Float()
				big[u] = append(big[u], stats.Number(x*tc.scale))
			}
		}
		got, err := stats.Alpha(big, tc.level)
		if err != nil {
			t.Errorf("%s ×%g: %v", tc.level, tc.scale, err)
			continue
		}
		for _, x := range []float64{got.Value, got.Observed, got.Expected} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%s ×%g: %+v is not finite", tc.level, tc.scale, got)
				break
			}
		}
		figure(t, fmt.Sprintf("%s alpha ×%g", tc.level, tc.scale), got.Value, want.Value, 1e-9)
	}
}

// FuzzAlpha: whatever the labels, from 0 to ±1e308, every metric and
// level answers a finite reliability or an error of the statistics
// (not enough data, invalid input), never a NaN or an infinity.
func FuzzAlpha(f *testing.F) {
	f.Add(uint8(2), 1e200, -1e200, 1e200, 1e200, -1e200, 0.0)
	f.Add(uint8(3), 1e308, 1.7e308, 0.0, 5e-324, 1e308, 1e-300)
	f.Add(uint8(2), 1.0, 2.0, 3.0, 3.0, 2.0, 1.0)
	f.Add(uint8(0), 1.0, 1.0, 2.0, 2.0, 1.0, 2.0)
	f.Add(uint8(5), -1.7976931348623157e308, 1.7976931348623157e308, 0.0, math.Copysign(0, -1), 1e-310, 4.0)
	f.Fuzz(func(t *testing.T, how uint8, a, b, c, d, e, g float64) {
		r := stats.Ratings{{stats.Number(a), stats.Number(b)}, {stats.Number(c), stats.Number(d)}, {stats.Number(e), stats.Number(g)}}
		levels := []stats.Level{stats.LevelNominal, stats.LevelOrdinal, stats.LevelInterval, stats.LevelRatio}
		var rel stats.Reliability
		var err error
		switch how % 6 {
		case 4:
			rel, err = stats.Cohen(r)
		case 5:
			rel, err = stats.Fleiss(r)
		default:
			rel, err = stats.Alpha(r, levels[how%6])
		}
		if err != nil {
			if !errors.Is(err, stats.ErrInvalid) && !errors.Is(err, stats.ErrNotEnoughData) {
				t.Fatalf("%v: %v is neither invalid input nor not enough data", r, err)
			}
			return
		}
		for _, x := range []float64{rel.Value, rel.Observed, rel.Expected} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%v (%d): %+v is not finite", r, how, rel)
			}
		}
	})
}
