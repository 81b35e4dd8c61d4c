// Package sampling picks a share of items the same way on every run, so a
// job that samples again after a crash picks exactly what it picked before.
package sampling

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/google/uuid"
)

// Sampled says whether the sampler (a live scorer, a shadow) takes an item
// at its share: a hash of the two ids, read as a number in [0, 1).
func Sampled(sampler, item uuid.UUID, share float64) bool {
	h := fnv.New64a()
	h.Write(sampler[:])
	h.Write(item[:])
	x := binary.BigEndian.Uint64(h.Sum(nil)) >> 11 // 53 bits: exact in a float64
	return float64(x)/float64(uint64(1)<<53) < share
}
