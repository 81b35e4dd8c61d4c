package stats

import (
	"math"
	"slices"
)

// MaxKSValues bounds each sample of KS2Sample: up to it SciPy's ks_2samp
// computes its exact p-value too (its method "auto"), and so does this.
const MaxKSValues = 10000

// KS is a two-sample Kolmogorov–Smirnov test's answer: the statistic D,
// the largest distance between the two empirical distribution functions,
// and the two-sided p-value of seeing one as large when both samples come
// from one continuous distribution.
type KS struct {
	D      float64
	PValue float64
}

// KS2Sample is the two-sided two-sample Kolmogorov–Smirnov test as SciPy's
// ks_2samp computes it with its default method for samples of at most
// MaxKSValues values: D from the empirical distribution functions (ties
// counted as SciPy's searchsorted(side="right") counts them) and the exact
// p-value P(D ≥ d), counted over the lattice paths of the merged sample
// (Hodges 1957) as probabilities, which stay finite where path counts
// would overflow.
func KS2Sample(a, b []float64) (KS, error) {
	if len(a) == 0 || len(b) == 0 {
		return KS{}, notEnough("each sample needs at least one value")
	}
	if len(a) > MaxKSValues || len(b) > MaxKSValues {
		return KS{}, invalid("at most %d values per sample", MaxKSValues)
	}
	if err := finite("values", a); err != nil {
		return KS{}, err
	}
	if err := finite("values", b); err != nil {
		return KS{}, err
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	n1, n2 := len(x), len(y)
	// The distance at every value of the merged sample, in units of
	// 1/(n1·n2): |i·n2 − j·n1| with i and j the values of each sample at
	// or below it. Integers keep the boundary exact.
	h, i, j := 0, 0, 0
	for i < n1 || j < n2 {
		var v float64
		switch {
		case j == n2 || i < n1 && x[i] <= y[j]:
			v = x[i]
		default:
			v = y[j]
		}
		for i < n1 && x[i] == v {
			i++
		}
		for j < n2 && y[j] == v {
			j++
		}
		h = max(h, abs(i*n2-j*n1))
	}
	out := KS{D: float64(h) / float64(n1*n2)}
	if h == 0 {
		out.PValue = 1
		return out, nil
	}
	out.PValue = min(1, max(0, 1-insideProbability(n1, n2, h)))
	return out, nil
}

// insideProbability is the probability that a uniformly random lattice
// path from (0, 0) to (n1, n2), one step per value of the merged sample,
// keeps |i·n2 − j·n1| < h at every point: P(D < h/(n1·n2)). Each point's
// probability is its predecessors' times the chance of the step between
// them, (values of that sample left) / (values left).
func insideProbability(n1, n2, h int) float64 {
	row := make([]float64, n2+1)
	total := n1 + n2
	for i := 0; i <= n1; i++ {
		for j := 0; j <= n2; j++ {
			if abs(i*n2-j*n1) >= h {
				row[j] = 0
				continue
			}
			if i == 0 && j == 0 {
				row[j] = 1
				continue
			}
			left := float64(total - i - j + 1)
			p := 0.0
			if i > 0 {
				p += row[j] * float64(n1-i+1) / left // from (i−1, j): row still holds it
			}
			if j > 0 {
				p += row[j-1] * float64(n2-j+1) / left
			}
			row[j] = p
		}
	}
	return row[n2]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// PSIFloor is the share an empty bin counts with in PSI, so that its
// logarithm stays finite.
const PSIFloor = 1e-4

// PSI is the population stability index of actual against expected over
// the bins the edges make (a value v falls in bin k when edges[k] ≤ v <
// edges[k+1]; the last bin includes its upper edge, values outside all
// bins count in the nearest end bin): Σ (aₖ − eₖ) · ln(aₖ / eₖ) over the
// shares of each sample in each bin, an empty bin counting PSIFloor.
// Below 0.1 is usually read as stable, above 0.25 as a major shift.
func PSI(expected, actual, edges []float64) (float64, error) {
	if len(expected) == 0 || len(actual) == 0 {
		return 0, notEnough("each sample needs at least one value")
	}
	if len(edges) < 3 {
		return 0, invalid("give at least 3 edges: 2 bins")
	}
	if err := finite("edges", edges); err != nil {
		return 0, err
	}
	if !slices.IsSorted(edges) {
		return 0, invalid("edges must rise")
	}
	e, err := binShares(expected, edges)
	if err != nil {
		return 0, err
	}
	a, err := binShares(actual, edges)
	if err != nil {
		return 0, err
	}
	psi := 0.0
	for k := range e {
		psi += (a[k] - e[k]) * math.Log(a[k]/e[k])
	}
	return psi, nil
}

// binShares is each bin's share of the values, PSIFloor for an empty one.
func binShares(values, edges []float64) ([]float64, error) {
	if err := finite("values", values); err != nil {
		return nil, err
	}
	bins := len(edges) - 1
	counts := make([]float64, bins)
	for _, v := range values {
		k, found := slices.BinarySearch(edges, v)
		if !found {
			k-- // edges[k] < v < edges[k+1]
		}
		counts[min(max(k, 0), bins-1)]++
	}
	for k := range counts {
		counts[k] = max(counts[k]/float64(len(values)), PSIFloor)
	}
	return counts, nil
}

// EqualBins are n equal-width bins' edges from lo to hi.
func EqualBins(lo, hi float64, n int) []float64 {
	out := make([]float64, n+1)
	for k := range out {
		out[k] = lo + (hi-lo)*float64(k)/float64(n)
	}
	return out
}
