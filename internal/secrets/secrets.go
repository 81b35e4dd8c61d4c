// Package secrets encrypts the secrets Curate must keep and use again, such
// as an organisation's Langfuse secret key, with AES-256-GCM under a key
// from the configuration. Each secret is bound to the row it belongs to
// (the associated data, e.g. the organisation's id), so a ciphertext copied
// to another row does not decrypt.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// MinKeyLen is the shortest key accepted, in characters.
const MinKeyLen = 32

// ErrDecrypt means a ciphertext could not be opened: the key changed since
// it was sealed, or the data was altered or belongs to another row.
var ErrDecrypt = errors.New("the stored secret cannot be decrypted (was CURATE_SECRET_KEY changed?); enter it again")

// Box seals and opens secrets with one key. It is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// New derives the AES-256 key from key (at least MinKeyLen characters).
func New(key string) (*Box, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("CURATE_SECRET_KEY must be at least %d characters (try: openssl rand -hex 32)", MinKeyLen)
	}
	k := sha256.Sum256([]byte("curate stored secrets\x00" + key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext bound to associated, with a fresh random nonce.
func (b *Box) Seal(plaintext string, associated []byte) (ciphertext, nonce []byte, err error) {
	nonce = make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return b.aead.Seal(nil, nonce, []byte(plaintext), associated), nonce, nil
}

// Open decrypts what Seal returned for the same associated data.
func (b *Box) Open(ciphertext, nonce, associated []byte) (string, error) {
	if len(nonce) != b.aead.NonceSize() {
		return "", ErrDecrypt
	}
	p, err := b.aead.Open(nil, nonce, ciphertext, associated)
	if err != nil {
		return "", ErrDecrypt
	}
	return string(p), nil
}
