package experiments

import (
	"hash/fnv"
	"strconv"
)

// fnv1a32 is the 32-bit FNV-1a hash of s.
func fnv1a32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Hash is GrowthBook's version-2 hash of a unit: FNV-1a 32 of the seed
// followed by the unit id, hashed again as its decimal string, modulo
// 10,000, over 10,000. It lies in [0, 1), spreads evenly, and is the same in
// every GrowthBook SDK, so a split can be reproduced outside Curate.
func Hash(seed, unit string) float64 {
	n := fnv1a32(strconv.FormatUint(uint64(fnv1a32(seed+unit)), 10))
	return float64(n%10000) / 10000
}

// Choose places a hash value in an arm: arm i takes [c·Σ_{j<i} w_j,
// c·Σ_{j≤i} w_j) of [0, 1) for coverage c; a value past c·Σw is not in the
// experiment (-1).
func Choose(v, coverage float64, weights []float64) int {
	lo := 0.0
	for i, w := range weights {
		hi := lo + coverage*w
		if v >= lo && v < hi {
			return i
		}
		lo = hi
	}
	return -1
}
