package servers_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/servers"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The first process records its keys; a later one with the same keys
// starts, one with another key is refused with the setting named and the
// fix spelled out, and the recorded key stays the first one.
func TestCheckKeys(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	svc := servers.New(pool)
	session := config.Key{Setting: "CURATE_SESSION_KEY", Value: strings.Repeat("s", 40)}
	secret := config.Key{Setting: "CURATE_SECRET_KEY", Value: "the-shared-secret", File: "/srv/a/secret.key"}
	if err := svc.CheckKeys(ctx, session, secret); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := svc.CheckKeys(ctx, session, secret); err != nil {
		t.Fatalf("same keys: %v", err)
	}
	var stored []byte
	if err := pool.QueryRow(ctx, "SELECT fingerprint FROM key_fingerprints WHERE setting = 'CURATE_SECRET_KEY'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(secret.Value)) || len(stored) != 32 {
		t.Fatalf("stored fingerprint %x holds the key or is no SHA-256 HMAC", stored)
	}

	other := config.Key{Setting: "CURATE_SECRET_KEY", Value: "generated-elsewhere", File: "/srv/b/secret.key"}
	err := svc.CheckKeys(ctx, session, other)
	var mismatch *servers.KeyMismatch
	if !errors.As(err, &mismatch) || mismatch.Key.Setting != "CURATE_SECRET_KEY" {
		t.Fatalf("another secret key: %v, want a mismatch of CURATE_SECRET_KEY", err)
	}
	for _, want := range []string{"CURATE_SECRET_KEY differs", "/srv/b/secret.key", "set CURATE_SECRET_KEY to the same value", "copy secret.key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "CURATE_SESSION_KEY") {
		t.Errorf("the matching session key is blamed: %v", err)
	}

	// Both differ: both are named at once.
	err = svc.CheckKeys(ctx, config.Key{Setting: "CURATE_SESSION_KEY", Value: strings.Repeat("x", 40)}, other)
	if err == nil || !strings.Contains(err.Error(), "CURATE_SESSION_KEY differs") || !strings.Contains(err.Error(), "CURATE_SECRET_KEY differs") {
		t.Fatalf("two keys differ: %v", err)
	}
	if err := svc.CheckKeys(ctx, secret); err != nil {
		t.Fatalf("the first key was replaced: %v", err)
	}
}

// The fingerprint depends on the key and on the setting, and is not a
// plain hash of the key.
func TestFingerprint(t *testing.T) {
	a := servers.Fingerprint(config.Key{Setting: "CURATE_SECRET_KEY", Value: "k"})
	if bytes.Equal(a, servers.Fingerprint(config.Key{Setting: "CURATE_SECRET_KEY", Value: "k2"})) {
		t.Error("two keys, one fingerprint")
	}
	if bytes.Equal(a, servers.Fingerprint(config.Key{Setting: "CURATE_SESSION_KEY", Value: "k"})) {
		t.Error("one key under two settings, one fingerprint")
	}
	if !bytes.Equal(a, servers.Fingerprint(config.Key{Setting: "CURATE_SECRET_KEY", Value: "k", File: "/elsewhere"})) {
		t.Error("the fingerprint depends on where the key was read")
	}
}

// Live servers are those that beat within three beats; a server that
// leaves stops counting at once, one that went quiet after 45 seconds, and
// its row is pruned after an hour.
func TestBeat(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	svc := servers.New(pool)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	beat := func(id uuid.UUID, want int) {
		t.Helper()
		n, err := svc.Beat(ctx, id)
		if err != nil || n != want {
			t.Fatalf("beat: %d live, %v; want %d", n, err, want)
		}
	}
	beat(a, 1)
	beat(b, 2)
	beat(a, 2)
	beat(c, 3)
	if err := svc.Leave(ctx, c); err != nil {
		t.Fatal(err)
	}
	beat(a, 2)

	if _, err := pool.Exec(ctx, "UPDATE servers SET last_seen_at = now() - interval '50 seconds' WHERE id = $1", b); err != nil {
		t.Fatal(err)
	}
	beat(a, 1)
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM servers").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d rows, %v; a quiet server is kept for the operator to see", rows, err)
	}
	if _, err := pool.Exec(ctx, "UPDATE servers SET last_seen_at = now() - interval '61 minutes' WHERE id = $1", b); err != nil {
		t.Fatal(err)
	}
	beat(a, 1)
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM servers").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d rows, %v; want the hour-old server pruned", rows, err)
	}
	// A server back from an hour away rejoins with its next beat.
	beat(b, 2)
}
