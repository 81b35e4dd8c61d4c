package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/curate/curate/internal/config"
)

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	set := config.Config{DataDir: dir, SecretKey: "from-the-environment"}
	if got, err := set.Secret(); err != nil || got != "from-the-environment" {
		t.Fatalf("Secret with CURATE_SECRET_KEY set = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); !os.IsNotExist(err) {
		t.Fatal("a key file was written although the environment sets the key")
	}

	unset := config.Config{DataDir: dir}
	first, err := unset.Secret()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 64 { // 32 random bytes, hex
		t.Fatalf("generated key %q, want 64 hex characters", first)
	}
	again, err := unset.Secret()
	if err != nil || again != first {
		t.Fatalf("second call = %q, %v; want the kept key", again, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if other, _ := config.StoredKey(filepath.Join(dir, "session.key")); other == first {
		t.Fatal("two key files hold the same key")
	}
}

// The shared keys say where they came from, for the message that names a
// key differing between servers.
func TestSharedKeysSayWhere(t *testing.T) {
	dir := t.TempDir()
	unset := config.Config{DataDir: dir}
	k, err := unset.SessionSecret()
	if err != nil || k.Setting != "CURATE_SESSION_KEY" || k.File != filepath.Join(dir, "session.key") || len(k.Value) != 64 {
		t.Fatalf("generated session key = %+v, %v", k, err)
	}
	if s, err := unset.SecretsKey(); err != nil || s.Setting != "CURATE_SECRET_KEY" || s.File != filepath.Join(dir, "secret.key") || s.Value == k.Value {
		t.Fatalf("generated secret key = %+v, %v", s, err)
	}
	set := config.Config{DataDir: dir, SessionKey: "from-the-environment"}
	if k, err := set.SessionSecret(); err != nil || k.File != "" || k.Value != "from-the-environment" {
		t.Fatalf("session key from the environment = %+v, %v", k, err)
	}
}
