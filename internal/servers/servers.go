// Package servers is what the processes sharing one database agree on
// through it: the keys they must have in common, checked by fingerprint
// when a server or worker starts, and how many web servers are live, so
// that each enforces its share of the rate limits.
package servers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/config"
)

// A web server beats every BeatEvery; one that missed three beats is
// taken for gone, and its row is pruned after an hour (kept that long so
// an operator can see which servers ran lately).
const (
	BeatEvery  = 15 * time.Second
	liveFor    = 3 * BeatEvery
	pruneAfter = time.Hour
)

// Service records keys and web servers in the database.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the key and server records on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// KeyMismatch says that this process's key differs from the one the first
// server recorded, and how to fix it.
type KeyMismatch struct {
	Key config.Key
}

func (e *KeyMismatch) Error() string {
	k := e.Key
	if k.File == "" {
		return fmt.Sprintf("%s differs from the key the other servers on this database use. "+
			"Every server and worker must have the same one: set %s to the same value everywhere "+
			"(a server that leaves it unset keeps the key it generated in its data directory). "+
			"To change the key on purpose, see \"Scaling out\" in README.md", k.Setting, k.Setting)
	}
	return fmt.Sprintf("%s differs from the key the other servers on this database use: it is unset, "+
		"so this server generated its own key in %s. Every server and worker must have the same one: "+
		"set %s to the same value everywhere, or copy %s from the data directory of a server that already ran "+
		"into this one's. To change the key on purpose, see \"Scaling out\" in README.md",
		k.Setting, k.File, k.Setting, filepath.Base(k.File))
}

// CheckKeys compares each key with the fingerprint the first process to
// start recorded, recording it when there is none, and returns a
// *KeyMismatch (joined, one per key) for each that differs. A server with
// another session key would reject every other server's cookies; one with
// another secret key could not read the secrets they stored.
func (s *Service) CheckKeys(ctx context.Context, keys ...config.Key) error {
	q := db.New(s.Pool)
	var errs []error
	for _, k := range keys {
		fp := Fingerprint(k)
		if err := q.KeyFingerprintInsert(ctx, db.KeyFingerprintInsertParams{Setting: k.Setting, Fingerprint: fp}); err != nil {
			return fmt.Errorf("recording the fingerprint of %s: %w", k.Setting, err)
		}
		stored, err := q.KeyFingerprintGet(ctx, k.Setting)
		if err != nil {
			return fmt.Errorf("reading the fingerprint of %s: %w", k.Setting, err)
		}
		if !hmac.Equal(stored.Fingerprint, fp) {
			errs = append(errs, &KeyMismatch{Key: k})
		}
	}
	return errors.Join(errs...)
}

// Fingerprint is an HMAC-SHA256 of a fixed label under the key: equal
// keys give equal fingerprints, and nothing of the key can be read from
// it. Testing a guess costs an HMAC, which is nothing against a generated
// key's 256 random bits.
func Fingerprint(k config.Key) []byte {
	m := hmac.New(sha256.New, []byte(k.Value))
	m.Write([]byte("curate key fingerprint\x00" + k.Setting))
	return m.Sum(nil)
}

// Beat records web server id as live now, prunes long-gone servers, and
// returns how many are live, id included.
func (s *Service) Beat(ctx context.Context, id uuid.UUID) (int, error) {
	q := db.New(s.Pool)
	if err := q.ServerInsert(ctx, id); err != nil {
		return 0, err
	}
	if _, err := q.ServerDeleteStale(ctx, pruneAfter.Seconds()); err != nil {
		return 0, err
	}
	n, err := q.ServerCountLive(ctx, liveFor.Seconds())
	if err != nil {
		return 0, err
	}
	return max(int(n), 1), nil
}

// Leave removes server id as it stops: the others take over its share of
// the limits at their next beat.
func (s *Service) Leave(ctx context.Context, id uuid.UUID) error {
	return db.New(s.Pool).ServerDelete(ctx, id)
}
