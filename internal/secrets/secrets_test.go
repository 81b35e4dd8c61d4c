package secrets_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/curate/curate/internal/secrets"
)

func TestSealOpen(t *testing.T) {
	box, err := secrets.New(strings.Repeat("a", 32))
	if err != nil {
		t.Fatal(err)
	}
	org := []byte("org-1")
	ct, nonce, err := box.Seal("sk-lf-secret", org)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("sk-lf-secret")) {
		t.Fatal("the ciphertext contains the plaintext")
	}
	// A GCM ciphertext is the plaintext plus a 16-byte tag; the nonce is 12 bytes.
	if len(ct) != len("sk-lf-secret")+16 || len(nonce) != 12 {
		t.Fatalf("ciphertext %d bytes, nonce %d; want %d and 12", len(ct), len(nonce), len("sk-lf-secret")+16)
	}
	got, err := box.Open(ct, nonce, org)
	if err != nil || got != "sk-lf-secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	ct2, nonce2, _ := box.Seal("sk-lf-secret", org)
	if bytes.Equal(ct, ct2) || bytes.Equal(nonce, nonce2) {
		t.Error("sealing twice gave the same nonce or ciphertext")
	}

	other, _ := secrets.New(strings.Repeat("b", 32))
	tampered := append([]byte(nil), ct...)
	tampered[0] ^= 1
	for name, open := range map[string]func() (string, error){
		"another row": func() (string, error) { return box.Open(ct, nonce, []byte("org-2")) },
		"another key": func() (string, error) { return other.Open(ct, nonce, org) },
		"altered":     func() (string, error) { return box.Open(tampered, nonce, org) },
		"short nonce": func() (string, error) { return box.Open(ct, nonce[:4], org) },
	} {
		if _, err := open(); !errors.Is(err, secrets.ErrDecrypt) {
			t.Errorf("%s: err = %v, want ErrDecrypt", name, err)
		}
	}
}

func TestShortKey(t *testing.T) {
	if _, err := secrets.New("short"); err == nil || !strings.Contains(err.Error(), "CURATE_SECRET_KEY") {
		t.Fatalf("err = %v, want one naming CURATE_SECRET_KEY", err)
	}
}
