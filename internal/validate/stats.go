package validate

import (
	"math"
	"slices"
)

// distribution summarises values; the zero Distribution when empty.
func distribution(values []int) Distribution {
	if len(values) == 0 {
		return Distribution{}
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sum := 0
	for _, v := range sorted {
		sum += v
	}
	return Distribution{
		Min:    sorted[0],
		Max:    sorted[len(sorted)-1],
		Mean:   float64(sum) / float64(len(sorted)),
		Median: percentile(sorted, 50),
		P5:     percentile(sorted, 5),
		P95:    percentile(sorted, 95),
	}
}

// percentile interpolates linearly between the closest ranks of sorted,
// as numpy.percentile does by default.
func percentile(sorted []int, p float64) float64 {
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return float64(sorted[lo]) + frac*float64(sorted[hi]-sorted[lo])
}

// Robust outlier rule; see outlierMethod.
const (
	outlierDeviations = 3
	madToSigma        = 1.4826 // MAD of a normal distribution × this = σ
	meanADToSigma     = 1.2533 // mean absolute deviation × this = σ
	outlierMinCount   = 5
)

type outlier struct {
	index  int
	median float64
}

// lengthOutliers returns the indexes of values farther than
// outlierDeviations robust standard deviations from the median.
func lengthOutliers(values []int) []outlier {
	if len(values) < outlierMinCount {
		return nil
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	median := percentile(sorted, 50)
	devs := make([]float64, len(values))
	sumDev := 0.0
	for i, v := range values {
		devs[i] = math.Abs(float64(v) - median)
		sumDev += devs[i]
	}
	sortedDevs := slices.Clone(devs)
	slices.Sort(sortedDevs)
	mad := medianFloat(sortedDevs)
	sigma := madToSigma * mad
	if mad == 0 {
		// More than half the values equal the median; fall back to the
		// mean deviation so a lone extreme value is still caught.
		sigma = meanADToSigma * sumDev / float64(len(values))
	}
	if sigma == 0 {
		return nil
	}
	var out []outlier
	for i, d := range devs {
		if d > outlierDeviations*sigma {
			out = append(out, outlier{index: i, median: median})
		}
	}
	return out
}

func medianFloat(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
