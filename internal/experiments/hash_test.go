package experiments_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/stats"
)

// GrowthBook's published hash cases for version 2 ([seed, value, version,
// expected] in packages/sdk-js/test/cases.json, section "hash").
func TestHashGrowthBookCases(t *testing.T) {
	cases := []struct {
		seed, value string
		want        float64
	}{
		{"seed", "a", 0.0505},
		{"seed", "b", 0.2696},
		{"foo", "ab", 0.2575},
		{"foo", "def", 0.2019},
		{"89123klj", "8952klfjas09ujkasdf", 0.124},
		{"90850943850283058242805", "123", 0.7516},
		{"()**(%$##$%#$#", `___)((*":&`, 0.0128},
	}
	for _, c := range cases {
		if got := experiments.Hash(c.seed, c.value); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Hash(%q, %q) = %v, want %v", c.seed, c.value, got, c.want)
		}
	}
}

// The assignment contract's ranges, [c·Σ_{j<i} w_j, c·Σ_{j≤i} w_j), checked
// at their edges: 50/50 at full and half coverage, and weights 0.2/0.3/0.5
// at coverage 0.2. (They are contiguous; GrowthBook's SDKs instead start
// each arm's range at Σ_{j<i} w_j.)
func TestChoose(t *testing.T) {
	cases := []struct {
		v, coverage float64
		weights     []float64
		want        int
	}{
		{0.49, 1, []float64{0.5, 0.5}, 0},
		{0.5, 1, []float64{0.5, 0.5}, 1},
		{0.99, 1, []float64{0.5, 0.5}, 1},
		{0.2, 0.5, []float64{0.5, 0.5}, 0},
		{0.3, 0.5, []float64{0.5, 0.5}, 1},
		{0.6, 0.5, []float64{0.5, 0.5}, -1},
		{0.03, 0.2, []float64{0.2, 0.3, 0.5}, 0},
		{0.05, 0.2, []float64{0.2, 0.3, 0.5}, 1},
		{0.19, 0.2, []float64{0.2, 0.3, 0.5}, 2},
		{0.2, 0.2, []float64{0.2, 0.3, 0.5}, -1},
	}
	for _, c := range cases {
		if got := experiments.Choose(c.v, c.coverage, c.weights); got != c.want {
			t.Errorf("Choose(%v, %v, %v) = %d, want %d", c.v, c.coverage, c.weights, got, c.want)
		}
	}
}

// 100,000 unit ids split 50/50 within the sample-ratio check's tolerance,
// and 10/90 too.
func TestHashSplit(t *testing.T) {
	for _, w := range [][]float64{{0.5, 0.5}, {0.9, 0.1}} {
		counts := make([]float64, 2)
		for i := range 100000 {
			counts[experiments.Choose(experiments.Hash("support-v3", fmt.Sprintf("u-%d", i)), 1, w)]++
		}
		p, err := stats.SRM(counts, w)
		if err != nil || p < stats.SRMThreshold {
			t.Errorf("weights %v: counts %v, SRM p %v (%v)", w, counts, p, err)
		}
	}
}
