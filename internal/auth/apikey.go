package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"strings"
)

// API keys look like "cur_<prefix>_<secret>": the prefix finds the row, the
// secret proves possession. Only sha256(secret) is stored: the secret is 160
// random bits, so a fast hash is enough (unlike passwords, it cannot be guessed).
const keyScheme = "cur"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrMalformedKey is returned for a bearer token that is not an API key.
var ErrMalformedKey = errors.New("malformed API key")

// NewAPIKey returns a new key's full text, its prefix and the hash to store.
func NewAPIKey() (full, prefix string, hash []byte) {
	p := make([]byte, 5)
	s := make([]byte, 20)
	_, _ = rand.Read(p)
	_, _ = rand.Read(s)
	prefix = strings.ToLower(b32.EncodeToString(p))
	secret := strings.ToLower(b32.EncodeToString(s))
	sum := sha256.Sum256([]byte(secret))
	return keyScheme + "_" + prefix + "_" + secret, prefix, sum[:]
}

// ParseAPIKey splits a key into its prefix and the hash of its secret.
func ParseAPIKey(full string) (prefix string, hash []byte, err error) {
	parts := strings.Split(full, "_")
	if len(parts) != 3 || parts[0] != keyScheme || len(parts[1]) != 8 || len(parts[2]) != 32 {
		return "", nil, ErrMalformedKey
	}
	sum := sha256.Sum256([]byte(parts[2]))
	return parts[1], sum[:], nil
}

// HashMatches compares two secret hashes in constant time.
func HashMatches(a, b []byte) bool {
	return subtle.ConstantTimeCompare(a, b) == 1
}
