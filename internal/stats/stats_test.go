package stats

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Resampling {0, 1} with replacement gives the means 0, 0.5 and 1 with
// probabilities 1/4, 1/2, 1/4 (two fair coin draws, worked by hand). A
// 40% interval takes the 30th and 70th percentiles, both inside the 0.5
// mass; a 95% interval the 2.5th and 97.5th, at 0 and 1.
func TestMeanCITwoPoints(t *testing.T) {
	xs := []float64{0, 1}
	for _, tc := range []struct {
		level  float64
		lo, hi float64
	}{{0.40, 0.5, 0.5}, {0.95, 0, 1}} {
		mean, ci, err := MeanCI(xs, Bootstrap{Level: tc.level, Resamples: 10000, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if mean != 0.5 || ci.Lo != tc.lo || ci.Hi != tc.hi {
			t.Errorf("level %v: mean %v ci %v; want 0.5 [%v, %v]", tc.level, mean, ci, tc.lo, tc.hi)
		}
	}
}

// For a large sample the percentile interval approaches the normal one:
// 1,000 values 0..9 repeated have mean 4.5 and population variance 8.25,
// so the standard error is sqrt(8.25/1000) = 0.090830 and the 95% interval
// 4.5 ± 1.959964·0.090830 = [4.32198, 4.67802] (hand calculation).
func TestMeanCIApproachesNormal(t *testing.T) {
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(i % 10)
	}
	mean, ci, err := MeanCI(xs, Bootstrap{Level: 0.95, Resamples: 20000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if mean != 4.5 || !near(ci.Lo, 4.32198, 0.01) || !near(ci.Hi, 4.67802, 0.01) {
		t.Errorf("mean %v ci %v; want 4.5 [4.322, 4.678]", mean, ci)
	}
}

func TestMeanCIIsDeterministic(t *testing.T) {
	xs := []float64{0.2, 0.9, 0.4, 0.7, 0.1, 0.8, 0.65}
	_, a, _ := MeanCI(xs, Bootstrap{Level: 0.9, Resamples: 500, Seed: 42})
	_, b, _ := MeanCI(xs, Bootstrap{Level: 0.9, Resamples: 500, Seed: 42})
	_, c, _ := MeanCI(xs, Bootstrap{Level: 0.9, Resamples: 500, Seed: 43})
	if a != b {
		t.Errorf("same seed gave %v and %v", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave the same interval %v", a)
	}
	if !(a.Lo < a.Hi && a.Lo >= 0.1 && a.Hi <= 0.9) {
		t.Errorf("interval %v is not inside the data's range", a)
	}
}

func TestMeanCIRefuses(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		b    Bootstrap
		want error
	}{
		{[]float64{1}, DefaultBootstrap, ErrNotEnoughData},
		{nil, DefaultBootstrap, ErrNotEnoughData},
		{[]float64{1, math.NaN()}, DefaultBootstrap, ErrInvalid},
		{[]float64{1, 2}, Bootstrap{Level: 1, Resamples: 1000}, ErrInvalid},
		{[]float64{1, 2}, Bootstrap{Level: 0.95, Resamples: 10}, ErrInvalid},
		{[]float64{1, 2}, Bootstrap{Level: 0.95, Resamples: MaxResamples + 1}, ErrInvalid},
	} {
		if _, _, err := MeanCI(tc.xs, tc.b); !errors.Is(err, tc.want) {
			t.Errorf("MeanCI(%v, %+v) = %v; want %v", tc.xs, tc.b, err, tc.want)
		}
	}
}

func TestRanks(t *testing.T) {
	got := Ranks([]float64{30, 10, 20, 20, 10, 10})
	// 10 takes ranks 1..3 (average 2), 20 ranks 4..5 (4.5), 30 rank 6.
	want := []float64{6, 2, 4.5, 4.5, 2, 2}
	if !slices.Equal(got, want) {
		t.Errorf("Ranks = %v; want %v", got, want)
	}
}

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		want float64
	}{
		// Wikipedia, "Spearman's rank correlation coefficient", example:
		// IQ against hours of TV per week, ρ = −29/165.
		{"wikipedia", []float64{106, 100, 86, 101, 99, 103, 97, 113, 112, 110},
			[]float64{7, 27, 2, 50, 28, 29, 20, 12, 6, 17}, -29.0 / 165},
		// By hand: ranks x = [1, 2.5, 2.5, 4], y = [1, 2, 3, 4]; deviations
		// [-1.5, 0, 0, 1.5] and [-1.5, -.5, .5, 1.5] give 4.5/sqrt(4.5·5) = sqrt(0.9).
		{"ties", []float64{1, 2, 2, 3}, []float64{1, 2, 3, 4}, math.Sqrt(0.9)},
		{"monotone", []float64{1, 2, 3, 4}, []float64{1, 4, 9, 16}, 1},
		{"reversed", []float64{1, 2, 3}, []float64{0.9, 0.5, 0.1}, -1},
	} {
		got, err := Spearman(tc.x, tc.y)
		if err != nil || !near(got, tc.want, 1e-12) {
			t.Errorf("%s: Spearman = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !errors.Is(err, ErrNotEnoughData) {
		t.Errorf("constant series: %v", err)
	}
	if _, err := Spearman([]float64{1, 2}, []float64{1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("lengths differ: %v", err)
	}
}

func repeat(pairs ...any) (a, b []string) {
	for i := 0; i < len(pairs); i += 3 {
		for range pairs[i+2].(int) {
			a = append(a, pairs[i].(string))
			b = append(b, pairs[i+1].(string))
		}
	}
	return a, b
}

func TestCohenKappa(t *testing.T) {
	// Wikipedia, "Cohen's kappa", simple example: 50 grant proposals, both
	// yes 20, A yes B no 5, A no B yes 10, both no 15: p_o = 0.7,
	// p_e = 0.5·0.6 + 0.5·0.4 = 0.5, κ = 0.4.
	a, b := repeat("yes", "yes", 20, "yes", "no", 5, "no", "yes", 10, "no", "no", 15)
	ag, err := CohenKappa(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !near(ag.Kappa, 0.4, 1e-12) || !near(ag.Observed, 0.7, 1e-12) || !near(ag.Expected, 0.5, 1e-12) || ag.N != 50 {
		t.Errorf("agreement %+v; want κ 0.4, p_o 0.7, p_e 0.5", ag)
	}
	if !slices.Equal(ag.Categories, []string{"no", "yes"}) ||
		!slices.Equal(ag.Table[0], []int{15, 10}) || !slices.Equal(ag.Table[1], []int{5, 20}) {
		t.Errorf("table %v %v; want no/yes [[15 10] [5 20]]", ag.Categories, ag.Table)
	}

	// Three categories, by hand: 10 items, agreement on 7 (p_o = 0.7);
	// marginals A (bad 3, good 4, ok 3), B (bad 4, good 3, ok 3) give
	// p_e = (3·4 + 4·3 + 3·3)/100 = 0.33, κ = 0.37/0.67 = 37/67.
	a, b = repeat("good", "good", 3, "good", "bad", 1, "bad", "bad", 2, "bad", "ok", 1,
		"ok", "ok", 2, "ok", "bad", 1)
	ag, err = CohenKappa(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !near(ag.Kappa, 37.0/67, 1e-12) || !near(ag.Expected, 0.33, 1e-12) {
		t.Errorf("three categories: %+v; want κ 37/67, p_e 0.33", ag)
	}
	if !slices.Equal(ag.Table[0], []int{2, 0, 1}) || !slices.Equal(ag.Table[1], []int{1, 3, 0}) || !slices.Equal(ag.Table[2], []int{1, 0, 2}) {
		t.Errorf("table %v", ag.Table)
	}

	// Perfect disagreement beyond chance: A says yes when B says no.
	a, b = repeat("yes", "no", 5, "no", "yes", 5)
	if ag, err = CohenKappa(a, b); err != nil || !near(ag.Kappa, -1, 1e-12) {
		t.Errorf("opposite raters: %v, %v; want -1", ag.Kappa, err)
	}

	a, b = repeat("up", "up", 4)
	if _, err := CohenKappa(a, b); !errors.Is(err, ErrNotEnoughData) {
		t.Errorf("one category: %v; want not enough data", err)
	}
	if _, err := CohenKappa([]string{"a"}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("lengths differ: %v", err)
	}
}

func TestPaired(t *testing.T) {
	cand := []float64{0.9, 0.5, 0.84, 0.2, 0.7}
	base := []float64{0.6, 0.5, 0.80, 0.9, 0.7}
	// Differences 0.3, 0, 0.04, -0.7, 0: with tolerance 0 one win, one
	// near-tie counted as a win too, one loss, two ties.
	w, err := Paired(cand, base, 0)
	if err != nil || w != (WinsTiesLosses{Wins: 2, Ties: 2, Losses: 1}) {
		t.Errorf("tolerance 0: %+v, %v", w, err)
	}
	w, err = Paired(cand, base, 0.05)
	if err != nil || w != (WinsTiesLosses{Wins: 1, Ties: 3, Losses: 1}) {
		t.Errorf("tolerance 0.05: %+v, %v", w, err)
	}
	if _, err := Paired(cand, base[:2], 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("lengths differ: %v", err)
	}
	if _, err := Paired(cand, base, -0.1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative tolerance: %v", err)
	}
	if _, err := Paired([]float64{math.NaN()}, []float64{1}, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("NaN: %v", err)
	}
}
