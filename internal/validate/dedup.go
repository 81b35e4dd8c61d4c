package validate

import (
	"crypto/sha256"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Near-duplicate detection: MinHash signatures over word 3-grams, indexed
// with locality-sensitive hashing. Two examples whose signatures agree on
// all rows of any band become candidates, and a candidate is a near
// duplicate when the share of agreeing hashes (an estimate of the Jaccard
// similarity of their 3-gram sets) reaches nearThreshold. With 8 bands of 8
// rows a pair at similarity 0.9 becomes a candidate with probability 0.99,
// one at 0.5 with probability 0.03.
const (
	numHashes     = 64
	numBands      = 8
	bandRows      = numHashes / numBands
	nearThreshold = 0.9
	// indexLimit bounds the index (about 0.6 KB per example); later
	// examples are still compared with the indexed ones.
	indexLimit = 100_000
	// bucketLimit bounds the examples kept per band bucket, so text that
	// shares one band with very many others cannot make checks quadratic.
	bucketLimit = 32
)

// Signature is an example's MinHash signature.
type Signature [numHashes]uint32

// The multiply-shift hash functions of the signature. Fixed seeds make the
// report the same on every run, and signatures stored by an earlier run
// comparable with new ones.
var hashA, hashB = minhashSeeds()

func minhashSeeds() (a, b [numHashes]uint64) {
	state := uint64(0x9e3779b97f4a7c15)
	for i := range numHashes {
		a[i] = splitmix64(&state) | 1
		b[i] = splitmix64(&state)
	}
	return a, b
}

// dedup finds exact and near duplicates among the examples seen so far.
type dedup struct {
	seen    map[[16]byte]int // truncated SHA-256 of normalised text → first example
	sigs    []Signature
	ids     []int              // example index of each signature
	buckets map[uint64][]int32 // band key → positions in sigs
}

func newDedup() *dedup {
	return &dedup{seen: map[[16]byte]int{}, buckets: map[uint64][]int32{}}
}

// textKeys returns the keys the duplicate checks compare for a text: the
// truncated SHA-256 of its normalised form, and its MinHash signature (nil
// when the text has no words).
func textKeys(text string) ([16]byte, *Signature) {
	normal := normalise(text)
	sum := sha256.Sum256([]byte(normal))
	var key [16]byte
	copy(key[:], sum[:16])
	shingles := wordShingles(normal)
	if len(shingles) == 0 {
		return key, nil
	}
	sig := signature(shingles)
	return key, &sig
}

// normalise folds the differences that do not make two texts different:
// Unicode compatibility forms, case and runs of white space.
func normalise(text string) string {
	return strings.Join(strings.Fields(strings.ToLower(norm.NFKC.String(text))), " ")
}

// exact reports the first earlier example with the same normalised text.
func (d *dedup) exact(i int, key [16]byte) (int, bool) {
	if j, ok := d.seen[key]; ok {
		return j, true
	}
	d.seen[key] = i
	return 0, false
}

// near reports the most similar earlier example at or above the threshold.
// Examples that are not near duplicates join the index while it has room.
func (d *dedup) near(i int, sig *Signature) (match int, sim float64, ok bool) {
	if sig == nil {
		return 0, 0, false
	}
	keys := bandKeys(sig)
	best := -1
	for _, k := range keys {
		for _, pos := range d.buckets[k] {
			s := similarity(sig, &d.sigs[pos])
			if s >= nearThreshold && (best < 0 || s > sim || (s == sim && d.ids[pos] < match)) {
				best, sim, match = int(pos), s, d.ids[pos]
			}
		}
	}
	if best >= 0 {
		return match, sim, true
	}
	if len(d.sigs) < indexLimit {
		pos := int32(len(d.sigs))
		d.sigs = append(d.sigs, *sig)
		d.ids = append(d.ids, i)
		for _, k := range keys {
			if b := d.buckets[k]; len(b) < bucketLimit {
				d.buckets[k] = append(b, pos)
			}
		}
	}
	return 0, 0, false
}

// wordShingles hashes each run of three consecutive words; a text of one or
// two words is a single shingle.
func wordShingles(text string) []uint64 {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	if len(words) == 0 {
		return nil
	}
	hashes := make([]uint64, len(words))
	for i, w := range words {
		hashes[i] = fnv1a(w)
	}
	if len(hashes) < 3 {
		h := uint64(0)
		for _, w := range hashes {
			h = mix64(h ^ w)
		}
		return []uint64{h}
	}
	out := make([]uint64, 0, len(hashes)-2)
	for i := 0; i+2 < len(hashes); i++ {
		out = append(out, mix64(mix64(mix64(hashes[i])^hashes[i+1])^hashes[i+2]))
	}
	return out
}

// signature is the MinHash signature: for each of numHashes multiply-shift
// hash functions, the smallest value over the shingles.
func signature(shingles []uint64) Signature {
	var sig Signature
	for k := range sig {
		sig[k] = ^uint32(0)
	}
	for _, s := range shingles {
		for k := range sig {
			if h := uint32((hashA[k]*s + hashB[k]) >> 32); h < sig[k] {
				sig[k] = h
			}
		}
	}
	return sig
}

func bandKeys(sig *Signature) [numBands]uint64 {
	var keys [numBands]uint64
	for b := range keys {
		h := uint64(b) + 1
		for _, v := range sig[b*bandRows : (b+1)*bandRows] {
			h = mix64(h ^ uint64(v))
		}
		keys[b] = h
	}
	return keys
}

func similarity(a, b *Signature) float64 {
	same := 0
	for k := range a {
		if a[k] == b[k] {
			same++
		}
	}
	return float64(same) / numHashes
}

func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the SplitMix64 finaliser, a fast bijective bit mixer.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	return mix64(*state)
}
