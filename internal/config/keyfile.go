package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// StoredKey returns the key kept in the file at path, generating a random
// one (32 bytes, hex) and keeping it there on first use, so keys that the
// environment does not set survive restarts. Several processes starting at
// once agree on one key.
func StoredKey(path string) (string, error) {
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
		return StoredKey(path)
	}
	if err != nil {
		return "", fmt.Errorf("keeping the key %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", err
	}
	return key, f.Close()
}

// Secret is the key that encrypts stored secrets (such as a Langfuse secret
// key): CURATE_SECRET_KEY, or one generated once and kept in the data
// directory as secret.key. Losing it makes the stored secrets unreadable;
// they must then be entered again.
func (c Config) Secret() (string, error) {
	if c.SecretKey != "" {
		return c.SecretKey, nil
	}
	return StoredKey(filepath.Join(c.DataDir, "secret.key"))
}
