// Package stats is Curate's statistics engine: the numbers evaluation
// reports and experiments rest on, computed from plain slices with no
// database and no HTTP. Distributions and quantiles come from gonum; what
// is written here is the glue each method needs (ranks with ties, the
// bootstrap's resampling, the agreement table).
//
// Every function refuses input it cannot answer honestly (too few values,
// NaN, series of different lengths, a statistic that is 0/0) with an error
// wrapping ErrNotEnoughData or ErrInvalid, never with a number that only
// looks like a result.
package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

var (
	// ErrNotEnoughData: the input is too small, or too uniform, for the
	// statistic to be defined (one value, a constant series for a
	// correlation, raters who only ever use one category).
	ErrNotEnoughData = errors.New("not enough data")
	// ErrInvalid: the input is malformed (NaN or infinite values, series of
	// different lengths, a parameter out of range).
	ErrInvalid = errors.New("invalid input")
)

func notEnough(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotEnoughData, fmt.Sprintf(format, args...))
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// finite checks that every value is a real number.
func finite(name string, xs []float64) error {
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return invalid("%s[%d] is %v", name, i, x)
		}
	}
	return nil
}

// Interval is a confidence interval [Lo, Hi].
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Bootstrap configures a percentile bootstrap.
type Bootstrap struct {
	// Level is the interval's coverage, in (0, 1): 0.95 for a 95% interval.
	Level float64
	// Resamples is how many resamples are drawn, 100 to MaxResamples. 2,000 is
	// enough for a 95% interval's ends to settle to about a hundredth of a
	// standard error on typical evaluation sets.
	Resamples int
	// Seed makes the interval reproducible: the same data and seed give the
	// same interval on every run and machine.
	Seed uint64
}

// MaxResamples bounds the work one interval may ask for.
const MaxResamples = 100000

// DefaultBootstrap is a 95% interval from 2,000 resamples with seed 1.
var DefaultBootstrap = Bootstrap{Level: 0.95, Resamples: 2000, Seed: 1}

// MeanCI returns the mean of xs and its percentile bootstrap confidence
// interval: xs is resampled with replacement b.Resamples times, and the
// interval is the (1-Level)/2 and (1+Level)/2 empirical quantiles of the
// resampled means (Efron & Tibshirani, An Introduction to the Bootstrap,
// ch. 13). It needs at least two values.
func MeanCI(xs []float64, b Bootstrap) (mean float64, ci Interval, err error) {
	if err := finite("values", xs); err != nil {
		return 0, Interval{}, err
	}
	if len(xs) < 2 {
		return 0, Interval{}, notEnough("a confidence interval needs at least 2 values, got %d", len(xs))
	}
	if !(b.Level > 0 && b.Level < 1) {
		return 0, Interval{}, invalid("level %v is not between 0 and 1", b.Level)
	}
	if b.Resamples < 100 || b.Resamples > MaxResamples {
		return 0, Interval{}, invalid("%d resamples; 100 to %d", b.Resamples, MaxResamples)
	}
	// PCG seeded from the caller's seed alone: no global state, so two
	// intervals computed in parallel do not disturb each other.
	rng := rand.New(rand.NewPCG(b.Seed, 0x9e3779b97f4a7c15))
	n := len(xs)
	means := make([]float64, b.Resamples)
	for r := range means {
		sum := 0.0
		for range n {
			sum += xs[rng.IntN(n)]
		}
		means[r] = sum / float64(n)
	}
	slices.Sort(means)
	alpha := 1 - b.Level
	ci = Interval{
		Lo: stat.Quantile(alpha/2, stat.Empirical, means, nil),
		Hi: stat.Quantile(1-alpha/2, stat.Empirical, means, nil),
	}
	return stat.Mean(xs, nil), ci, nil
}

// Ranks returns the rank of each value (1 for the smallest), ties sharing
// the average of the ranks they span: [10, 20, 20, 30] ranks [1, 2.5, 2.5, 4].
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case xs[a] < xs[b]:
			return -1
		case xs[a] > xs[b]:
			return 1
		}
		return 0
	})
	ranks := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		// Positions i..j (0-based) hold ranks i+1..j+1; their average.
		avg := float64(i+j+2) / 2
		for k := i; k <= j; k++ {
			ranks[idx[k]] = avg
		}
		i = j + 1
	}
	return ranks
}

// Spearman returns Spearman's rank correlation of paired series x and y:
// the Pearson correlation of their ranks, ties by average ranks. It needs
// at least two pairs and neither series constant (the correlation is then
// 0/0).
func Spearman(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, invalid("the series have %d and %d values", len(x), len(y))
	}
	if err := finite("x", x); err != nil {
		return 0, err
	}
	if err := finite("y", y); err != nil {
		return 0, err
	}
	if len(x) < 2 {
		return 0, notEnough("a correlation needs at least 2 pairs, got %d", len(x))
	}
	rx, ry := Ranks(x), Ranks(y)
	if constant(rx) || constant(ry) {
		return 0, notEnough("a series with one distinct value has no rank correlation")
	}
	return stat.Correlation(rx, ry, nil), nil
}

func constant(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// Agreement is Cohen's kappa for two raters over the same items, with the
// table it was computed from.
type Agreement struct {
	// Kappa is (Observed - Expected) / (1 - Expected): 1 for perfect
	// agreement, 0 for what chance alone would give, negative for less.
	Kappa float64 `json:"kappa"`
	// Observed is the share of items both raters put in the same category;
	// Expected the share chance would give from each rater's marginals.
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
	// Categories are the labels either rater used, sorted.
	Categories []string `json:"categories"`
	// Table[i][j] counts the items rater A put in Categories[i] and rater B
	// in Categories[j]; the diagonal is agreement.
	Table [][]int `json:"table"`
	N     int     `json:"n"`
}

// CohenKappa returns the agreement of raters a and b, where a[k] and b[k]
// are their labels for item k (Cohen 1960). Kappa is undefined, and an
// ErrNotEnoughData error returned, when chance agreement is total: both
// raters used one and the same category for every item.
func CohenKappa(a, b []string) (Agreement, error) {
	if len(a) != len(b) {
		return Agreement{}, invalid("the raters labelled %d and %d items", len(a), len(b))
	}
	if len(a) == 0 {
		return Agreement{}, notEnough("no items were rated")
	}
	var cats []string
	for _, s := range [][]string{a, b} {
		for _, c := range s {
			if !slices.Contains(cats, c) {
				cats = append(cats, c)
			}
		}
	}
	slices.Sort(cats)
	table := make([][]int, len(cats))
	for i := range table {
		table[i] = make([]int, len(cats))
	}
	for k := range a {
		table[slices.Index(cats, a[k])][slices.Index(cats, b[k])]++
	}
	n := float64(len(a))
	var agree int
	var expected float64
	for i := range cats {
		agree += table[i][i]
		rowSum, colSum := 0, 0
		for j := range cats {
			rowSum += table[i][j]
			colSum += table[j][i]
		}
		expected += float64(rowSum) / n * float64(colSum) / n
	}
	observed := float64(agree) / n
	ag := Agreement{Observed: observed, Expected: expected, Categories: cats, Table: table, N: len(a)}
	if expected >= 1 {
		return ag, notEnough("both raters gave every item the same one category; kappa is undefined")
	}
	ag.Kappa = (observed - expected) / (1 - expected)
	return ag, nil
}

// WinsTiesLosses counts paired comparisons of a candidate against a
// baseline on the same items.
type WinsTiesLosses struct {
	Wins   int `json:"wins"`
	Ties   int `json:"ties"`
	Losses int `json:"losses"`
}

// Paired compares candidate[k] with baseline[k] for each item k: a win
// when the candidate scores more than tolerance above the baseline, a loss
// when more than tolerance below, a tie otherwise (so a tolerance of 0.05
// calls 0.80 against 0.84 a tie). The tolerance must be at least 0.
func Paired(candidate, baseline []float64, tolerance float64) (WinsTiesLosses, error) {
	if len(candidate) != len(baseline) {
		return WinsTiesLosses{}, invalid("%d candidate scores against %d baseline scores", len(candidate), len(baseline))
	}
	if math.IsNaN(tolerance) || math.IsInf(tolerance, 0) || tolerance < 0 {
		return WinsTiesLosses{}, invalid("tolerance %v is not a number at least 0", tolerance)
	}
	if err := finite("candidate", candidate); err != nil {
		return WinsTiesLosses{}, err
	}
	if err := finite("baseline", baseline); err != nil {
		return WinsTiesLosses{}, err
	}
	var w WinsTiesLosses
	for k := range candidate {
		switch d := candidate[k] - baseline[k]; {
		case d > tolerance:
			w.Wins++
		case d < -tolerance:
			w.Losses++
		default:
			w.Ties++
		}
	}
	return w, nil
}
