package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/curate/curate/internal/config"
)

// SessionKeys derives the cookie signing and encryption keys from
// CURATE_SESSION_KEY, or from a key generated once and kept in the data
// directory, so sessions survive restarts.
func SessionKeys(cfg config.Config) (hashKey, blockKey []byte, err error) {
	secret := cfg.SessionKey
	if secret == "" {
		if secret, err = storedKey(filepath.Join(cfg.DataDir, "session.key")); err != nil {
			return nil, nil, err
		}
	}
	if len(secret) < 32 {
		return nil, nil, errors.New("CURATE_SESSION_KEY must be at least 32 characters (try: openssl rand -hex 32)")
	}
	h := sha256.Sum256([]byte("curate session signing\x00" + secret))
	b := sha256.Sum256([]byte("curate session encryption\x00" + secret))
	return h[:], b[:], nil
}

func storedKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	key := hex.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	// O_EXCL: if another process wrote the key first, use theirs.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return storedKey(path)
	}
	if err != nil {
		return "", fmt.Errorf("keeping the session key: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", err
	}
	return key, f.Close()
}
