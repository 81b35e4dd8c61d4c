package datasets

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Split strategies: how examples are divided between training and
// validation.
const (
	// SplitRandom draws validation examples at random within each stratum
	// (a rating, a feedback type or a pair method), so both sides keep the
	// dataset's mix.
	SplitRandom = "random"
	// SplitTemporal puts the newest examples in validation, which tests the
	// model on data from after what it learned from.
	SplitTemporal = "temporal"
	// SplitUser puts some end users' examples only in validation, which
	// tests the model on people it has not seen.
	SplitUser = "user"
)

// SplitStrategies lists the strategies.
var SplitStrategies = []string{SplitRandom, SplitTemporal, SplitUser}

// SplitItem is what the split needs to know of one example.
type SplitItem struct {
	ID      uuid.UUID
	Stratum string    // random: examples are drawn per stratum
	User    string    // user: "" means unknown, and the example stands alone
	Created time.Time // temporal
}

// SplitConfig chooses the strategy, the share of validation examples and
// the seed.
type SplitConfig struct {
	Strategy          string
	ValidationPercent int // 0 to 50
	Seed              int64
}

// Split assigns each item to validation (true) or training (false). The
// result depends only on the set of items and the config, never on the
// order the items come in:
//
//   - random: in each stratum of n items, round(n × p / 100) go to
//     validation; which ones is decided by ordering the stratum by
//     sha256(seed as 8 big-endian bytes ‖ id) and taking the first.
//   - temporal: round(n × p / 100) of the newest items (ties by id).
//   - user: users are ordered by sha256(seed ‖ user) and whole users go to
//     validation until it holds at least round(n × p / 100) items; items
//     without a user each count as a user of their own.
//
// A group (a stratum, or the whole set) never goes entirely to validation:
// at most n-1 of its n items do, so training always has examples.
func Split(items []SplitItem, cfg SplitConfig) []bool {
	out := make([]bool, len(items))
	if cfg.ValidationPercent <= 0 || len(items) == 0 {
		return out
	}
	switch cfg.Strategy {
	case SplitTemporal:
		idx := indexes(len(items))
		slices.SortFunc(idx, func(a, b int) int {
			if c := items[b].Created.Compare(items[a].Created); c != 0 {
				return c // newest first
			}
			return bytes.Compare(items[a].ID[:], items[b].ID[:])
		})
		for _, i := range idx[:share(len(idx), cfg.ValidationPercent)] {
			out[i] = true
		}
	case SplitUser:
		splitByUser(items, cfg, out)
	default:
		// Each item's rank and place are held beside it, so that sorting a
		// million items compares arrays in place instead of chasing
		// pointers to per-item allocations.
		strata := map[string][]ranked{}
		for i, it := range items {
			strata[it.Stratum] = append(strata[it.Stratum], ranked{key: rankKey(cfg.Seed, it.ID[:]), id: it.ID, i: i})
		}
		for _, group := range strata {
			slices.SortFunc(group, func(a, b ranked) int {
				if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
					return c
				}
				return bytes.Compare(a.id[:], b.id[:])
			})
			for _, r := range group[:share(len(group), cfg.ValidationPercent)] {
				out[r.i] = true
			}
		}
	}
	return out
}

func splitByUser(items []SplitItem, cfg SplitConfig, out []bool) {
	groups := map[string][]int{}
	for i, it := range items {
		key := "user:" + it.User
		if it.User == "" {
			key = "item:" + it.ID.String()
		}
		groups[key] = append(groups[key], i)
	}
	type user struct {
		rank    [sha256.Size]byte
		key     string
		members []int
	}
	users := make([]user, 0, len(groups))
	for k, g := range groups {
		users = append(users, user{rank: rankKey(cfg.Seed, []byte(k)), key: k, members: g})
	}
	slices.SortFunc(users, func(a, b user) int {
		if c := bytes.Compare(a.rank[:], b.rank[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	want := share(len(items), cfg.ValidationPercent)
	got := 0
	for _, u := range users {
		if got >= want {
			break
		}
		if got+len(u.members) >= len(items) {
			continue // training would be left empty
		}
		for _, i := range u.members {
			out[i] = true
		}
		got += len(u.members)
	}
}

// share is round(n × percent / 100), halves rounded up, and at most n-1.
func share(n, percent int) int {
	k := (n*percent + 50) / 100
	return max(0, min(k, n-1))
}

// ranked is one item of a stratum with its place in the split's order.
type ranked struct {
	key [sha256.Size]byte
	id  uuid.UUID
	i   int
}

// rankKey is sha256(seed as 8 big-endian bytes ‖ b).
func rankKey(seed int64, b []byte) [sha256.Size]byte {
	var buf [64]byte
	msg := binary.BigEndian.AppendUint64(buf[:0], uint64(seed))
	return sha256.Sum256(append(msg, b...))
}

func indexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
