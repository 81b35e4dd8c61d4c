package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestShare(t *testing.T) {
	// round(n × p / 100), halves up, capped at n-1: worked out by hand.
	cases := []struct{ n, p, want int }{
		{10, 20, 2}, // 2.0
		{6, 25, 2},  // 1.5 rounds up
		{4, 25, 1},  // 1.0
		{5, 10, 1},  // 0.5 rounds up
		{7, 30, 2},  // 2.1
		{1, 50, 0},  // 0.5 → 1, but one item must stay in training
		{3, 50, 2},  // 1.5 → 2
		{2, 50, 1},  // 1.0
		{9, 0, 0},
		{0, 20, 0},
	}
	for _, c := range cases {
		if got := share(c.n, c.p); got != c.want {
			t.Errorf("share(%d, %d) = %d, want %d", c.n, c.p, got, c.want)
		}
	}
}

// ids makes n distinct fixed ids.
func ids(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1))
	}
	return out
}

// seedHash is sha256(seed as 8 big-endian bytes ‖ b), written out here
// from the documented rule.
func seedHash(seed int64, b []byte) []byte {
	buf := make([]byte, 8, 8+len(b))
	binary.BigEndian.PutUint64(buf, uint64(seed))
	sum := sha256.Sum256(append(buf, b...))
	return sum[:]
}

func validationIDs(items []SplitItem, got []bool) []uuid.UUID {
	var out []uuid.UUID
	for i, v := range got {
		if v {
			out = append(out, items[i].ID)
		}
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func TestSplitRandomStratified(t *testing.T) {
	id := ids(10)
	var items []SplitItem
	for i := range 10 {
		stratum := "rating:5"
		if i >= 6 {
			stratum = "rating:1"
		}
		items = append(items, SplitItem{ID: id[i], Stratum: stratum})
	}
	cfg := SplitConfig{Strategy: SplitRandom, ValidationPercent: 25, Seed: 7}
	got := Split(items, cfg)

	// Expected by hand from the rule: 6 × 25% = 1.5 → 2 of rating:5 and
	// 4 × 25% = 1 of rating:1, the ones with the smallest sha256(seed ‖ id).
	var want []uuid.UUID
	for _, group := range [][]uuid.UUID{id[:6], id[6:]} {
		g := slices.Clone(group)
		slices.SortFunc(g, func(a, b uuid.UUID) int { return bytes.Compare(seedHash(7, a[:]), seedHash(7, b[:])) })
		k := 2
		if len(group) == 4 {
			k = 1
		}
		want = append(want, g[:k]...)
	}
	slices.SortFunc(want, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if gotIDs := validationIDs(items, got); !slices.Equal(gotIDs, want) {
		t.Fatalf("validation = %v, want %v", gotIDs, want)
	}

	// The order of the input does not matter.
	shuffled := slices.Clone(items)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if a, b := validationIDs(items, got), validationIDs(shuffled, Split(shuffled, cfg)); !slices.Equal(a, b) {
		t.Fatalf("shuffled input changed the split: %v vs %v", a, b)
	}
}

func TestSplitSeedMatters(t *testing.T) {
	id := ids(200)
	items := make([]SplitItem, len(id))
	for i := range id {
		items[i] = SplitItem{ID: id[i], Stratum: "s"}
	}
	a := Split(items, SplitConfig{Strategy: SplitRandom, ValidationPercent: 20, Seed: 1})
	b := Split(items, SplitConfig{Strategy: SplitRandom, ValidationPercent: 20, Seed: 2})
	again := Split(items, SplitConfig{Strategy: SplitRandom, ValidationPercent: 20, Seed: 1})
	if !slices.Equal(a, again) {
		t.Fatal("the same seed gave a different split")
	}
	if slices.Equal(a, b) {
		t.Fatal("seeds 1 and 2 gave the same 40 of 200 validation items")
	}
	if n := len(validationIDs(items, a)); n != 40 {
		t.Fatalf("validation has %d items, want 40", n)
	}
}

func TestSplitTemporal(t *testing.T) {
	id := ids(5)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	items := []SplitItem{
		{ID: id[0], Created: base.Add(3 * time.Hour)},
		{ID: id[1], Created: base.Add(1 * time.Hour)},
		{ID: id[2], Created: base.Add(5 * time.Hour)}, // newest
		{ID: id[3], Created: base.Add(4 * time.Hour)}, // second newest
		{ID: id[4], Created: base.Add(2 * time.Hour)},
	}
	got := Split(items, SplitConfig{Strategy: SplitTemporal, ValidationPercent: 40}) // 5 × 40% = 2
	want := []bool{false, false, true, true, false}
	if !slices.Equal(got, want) {
		t.Fatalf("temporal split = %v, want %v", got, want)
	}
}

func TestSplitByUser(t *testing.T) {
	id := ids(7)
	items := []SplitItem{
		{ID: id[0], User: "alice"}, {ID: id[1], User: "alice"}, {ID: id[2], User: "alice"},
		{ID: id[3], User: "bob"},
		{ID: id[4], User: "carol"}, {ID: id[5], User: "carol"},
		{ID: id[6]}, // no user: a group of its own
	}
	const seed = 3
	got := Split(items, SplitConfig{Strategy: SplitUser, ValidationPercent: 30, Seed: seed})

	// By hand: 7 × 30% = 2.1 → 2 items wanted. Groups in order of
	// sha256(seed ‖ key), whole groups taken until at least 2 are in.
	groups := map[string][]int{"user:alice": {0, 1, 2}, "user:bob": {3}, "user:carol": {4, 5}, "item:" + id[6].String(): {6}}
	var keys []string
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return bytes.Compare(seedHash(seed, []byte(a)), seedHash(seed, []byte(b))) })
	want := make([]bool, 7)
	n := 0
	for _, k := range keys {
		if n >= 2 {
			break
		}
		for _, i := range groups[k] {
			want[i] = true
		}
		n += len(groups[k])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("user split = %v, want %v (group order %v)", got, want, keys)
	}
	// No user on both sides.
	side := map[string]bool{}
	for i, it := range items {
		if it.User == "" {
			continue
		}
		if s, ok := side[it.User]; ok && s != got[i] {
			t.Fatalf("user %s is in both splits", it.User)
		}
		side[it.User] = got[i]
	}
}

func TestSplitZeroPercent(t *testing.T) {
	items := []SplitItem{{ID: ids(1)[0]}}
	if got := Split(items, SplitConfig{Strategy: SplitRandom}); got[0] {
		t.Fatal("0% put an item in validation")
	}
}
