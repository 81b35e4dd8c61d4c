package stats_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/internal/stats"
)

// readSamples reads a testdata file of two lines of numbers.
func readSamples(t *testing.T, name string) (a, b []float64) {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	parse := func(line string) []float64 {
		var out []float64
		for _, f := range strings.Fields(line) {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, x)
		}
		return out
	}
	return parse(lines[0]), parse(lines[1])
}

// The samples in testdata were drawn with NumPy 1.24
// (default_rng(7): normal and beta draws, rounded so that some values tie)
// and the expected values are scipy.stats.ks_2samp(a, b) from SciPy 1.10.1
// with its default method, which is exact at these sizes.
func TestKS2SampleAgainstSciPy(t *testing.T) {
	cases := []struct {
		file   string
		d, p   float64
		na, nb int
	}{
		{"ks_unequal.txt", 0.44, 0.006798409744627261, 25, 30},
		{"ks_equal.txt", 0.2, 0.8319696107963263, 20, 20},
		{"ks_ties.txt", 0.42777777777777776, 0.00010181735001192076, 60, 45},
		{"ks_large.txt", 0.096, 0.03119594496540539, 500, 400},
		{"ks_scores.txt", 0.364, 1.4355636027239633e-16, 300, 250},
	}
	for _, c := range cases {
		a, b := readSamples(t, c.file)
		if len(a) != c.na || len(b) != c.nb {
			t.Fatalf("%s: %d and %d values", c.file, len(a), len(b))
		}
		got, err := stats.KS2Sample(a, b)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		near(t, c.file+" D", got.D, c.d, 1e-12)
		near(t, c.file+" p", got.PValue, c.p, 1e-9)
		// The test is symmetric.
		back, _ := stats.KS2Sample(b, a)
		near(t, c.file+" p reversed", back.PValue, c.p, 1e-9)
	}
	same, err := stats.KS2Sample([]float64{1, 2, 3}, []float64{3, 2, 1})
	if err != nil || same.D != 0 || same.PValue != 1 {
		t.Errorf("one sample against itself: %+v, %v", same, err)
	}
	for _, bad := range [][2][]float64{{nil, {1}}, {{1, 2}, {}}} {
		if _, err := stats.KS2Sample(bad[0], bad[1]); !errors.Is(err, stats.ErrNotEnoughData) {
			t.Errorf("empty sample: %v", err)
		}
	}
	if _, err := stats.KS2Sample(make([]float64, stats.MaxKSValues+1), []float64{1}); !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("too many values: %v", err)
	}
}

func TestPSI(t *testing.T) {
	// By hand: shares (0.5, 0.5) against (0.25, 0.75):
	// (0.25 − 0.5)·ln(0.25/0.5) + (0.75 − 0.5)·ln(0.75/0.5)
	// = 0.25·ln 2 + 0.25·ln 1.5 = 0.17329 + 0.10137 = 0.27465.
	got, err := stats.PSI([]float64{0.1, 0.2, 0.7, 0.9}, []float64{0.3, 0.6, 0.8, 0.95}, []float64{0, 0.5, 1})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "PSI by hand", got, 0.25*0.6931471805599453+0.25*0.4054651081081644, 1e-12)
	// The ks_scores samples (judge-like scores in 0–1) over ten bins of
	// 0.1, computed independently in NumPy 1.24: shares from
	// np.searchsorted(edges, v, side="right") − 1, empty bins floored at
	// 1e-4, Σ (a − e)·ln(a/e).
	a, b := readSamples(t, "ks_scores.txt")
	edges := []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	got, err = stats.PSI(a, b, edges)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "PSI of the scores", got, 0.7302082044562386, 1e-9)
	if same, _ := stats.PSI(a, a, edges); same != 0 {
		t.Errorf("PSI of a sample against itself = %v", same)
	}
	if _, err := stats.PSI(a, b, []float64{0, 1}); !errors.Is(err, stats.ErrInvalid) {
		t.Errorf("one bin: %v", err)
	}
}

// Holm's and Benjamini–Hochberg's adjusted p-values for these four, by
// hand: Holm 4·0.01, max(3·0.02, 0.04), max(2·0.03, 0.06), max(1·0.04,
// 0.06) → 0.04, 0.06, 0.06, 0.06; BH the smallest p·4/k over the ranks k at
// or above each one's → 0.04 for all. The interval alphas are Bonferroni's
// 0.05/4 and Benjamini and Yekutieli's 0.05·R/4.
func TestAdjust(t *testing.T) {
	ps := []float64{0.02, 0.01, 0.04, 0.03}
	holm, a := stats.Adjust(stats.CorrectionHolm, ps, 0.05)
	for i, want := range []float64{0.06, 0.04, 0.06, 0.06} {
		near(t, "holm", holm[i], want, 1e-12)
	}
	near(t, "Bonferroni's interval alpha", a, 0.0125, 1e-12)
	bh, a := stats.Adjust(stats.CorrectionBH, ps, 0.05)
	for i := range bh {
		near(t, "bh", bh[i], 0.04, 1e-12)
	}
	// All four are discoveries: the intervals are drawn at 0.05·4/4.
	near(t, "FCR interval alpha", a, 0.05, 1e-12)
	_, a = stats.Adjust(stats.CorrectionBH, []float64{0.5, 0.2, 0.04, 0.9}, 0.05)
	near(t, "FCR interval alpha without discoveries", a, 0.0125, 1e-12)
	one, a := stats.Adjust(stats.CorrectionHolm, []float64{0.03}, 0.05)
	if one[0] != 0.03 || a != 0.05 {
		t.Errorf("one metric: %v at %v", one, a)
	}
	none, a := stats.Adjust(stats.CorrectionNone, ps, 0.05)
	if none[1] != 0.01 || a != 0.05 {
		t.Errorf("no correction: %v at %v", none, a)
	}
}
