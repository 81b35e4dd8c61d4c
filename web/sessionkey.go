package web

import (
	"crypto/sha256"
	"errors"

	"github.com/curate/curate/internal/config"
)

// SessionKeys derives the cookie signing and encryption keys from
// CURATE_SESSION_KEY, or from a key generated once and kept in the data
// directory, so sessions survive restarts.
func SessionKeys(cfg config.Config) (hashKey, blockKey []byte, err error) {
	key, err := cfg.SessionSecret()
	if err != nil {
		return nil, nil, err
	}
	secret := key.Value
	if len(secret) < 32 {
		return nil, nil, errors.New("CURATE_SESSION_KEY must be at least 32 characters (try: openssl rand -hex 32)")
	}
	h := sha256.Sum256([]byte("curate session signing\x00" + secret))
	b := sha256.Sum256([]byte("curate session encryption\x00" + secret))
	return h[:], b[:], nil
}
