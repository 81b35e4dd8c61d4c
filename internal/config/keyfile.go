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

// Key is a key that every server on one database must share: the variable
// that sets it, and where this process took it from.
type Key struct {
	Setting string // the environment variable, e.g. CURATE_SECRET_KEY
	// File is the data directory's key file the key was generated into
	// and read from, because Setting is unset; "" when Setting is set.
	File  string
	Value string
}

// Secret is the key that encrypts stored secrets (such as a Langfuse secret
// key): CURATE_SECRET_KEY, or one generated once and kept in the data
// directory as secret.key. Losing it makes the stored secrets unreadable;
// they must then be entered again.
func (c Config) Secret() (string, error) {
	k, err := c.SecretsKey()
	return k.Value, err
}

// SecretsKey is Secret, saying where the key came from.
func (c Config) SecretsKey() (Key, error) {
	return c.sharedKey("CURATE_SECRET_KEY", c.SecretKey, "secret.key")
}

// SessionSecret is the key that signs and encrypts session cookies:
// CURATE_SESSION_KEY, or one generated once and kept in the data directory
// as session.key, so sessions survive restarts.
func (c Config) SessionSecret() (Key, error) {
	return c.sharedKey("CURATE_SESSION_KEY", c.SessionKey, "session.key")
}

func (c Config) sharedKey(setting, value, file string) (Key, error) {
	if value != "" {
		return Key{Setting: setting, Value: value}, nil
	}
	path := filepath.Join(c.DataDir, file)
	v, err := StoredKey(path)
	return Key{Setting: setting, File: path, Value: v}, err
}
