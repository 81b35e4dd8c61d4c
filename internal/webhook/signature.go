// Package webhook signs, verifies and delivers webhooks the way the Standard
// Webhooks specification (standardwebhooks.com) describes, so receivers can
// check Curate's deliveries with any of that specification's libraries.
//
// A delivery carries three headers: webhook-id (the message id, the same on
// every retry so receivers can drop duplicates), webhook-timestamp (unix
// seconds of this attempt) and webhook-signature, a space-separated list of
// "v1,<base64 HMAC-SHA256>" entries over "<id>.<timestamp>.<body>" keyed with
// the endpoint's secret. Secrets are written "whsec_<base64 key>".
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names from the specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, either way; the specification's libraries use five
// minutes.
const DefaultTolerance = 5 * time.Minute

const (
	secretPrefix = "whsec_"
	// The specification recommends keys of 24 to 64 bytes.
	minKeyBytes = 24
	maxKeyBytes = 64
	newKeyBytes = 32
)

// Verification errors; Verify wraps them with detail.
var (
	ErrInvalidSecret    = errors.New("webhook: invalid secret")
	ErrMissingHeader    = errors.New("webhook: missing header")
	ErrInvalidTimestamp = errors.New("webhook: invalid timestamp")
	ErrTimestampRange   = errors.New("webhook: timestamp outside tolerance")
	ErrNoMatch          = errors.New("webhook: no matching signature")
)

// NewSecret returns a fresh random secret in the "whsec_<base64>" form, with
// a 32-byte key.
func NewSecret() string {
	key := make([]byte, newKeyBytes)
	// crypto/rand.Read never fails; on a broken system it crashes the
	// program instead of returning predictable bytes.
	_, _ = rand.Read(key)
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// decodeSecret returns the key of a secret. The "whsec_" prefix is optional,
// as in the specification's libraries, because people paste keys without it.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64 after %q", ErrInvalidSecret, secretPrefix)
	}
	if len(key) < minKeyBytes || len(key) > maxKeyBytes {
		return nil, fmt.Errorf("%w: key is %d bytes, want %d to %d", ErrInvalidSecret, len(key), minKeyBytes, maxKeyBytes)
	}
	return key, nil
}

// Sign returns the webhook-signature value ("v1,<base64>") for a message id,
// timestamp and body.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}

func mac(key []byte, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received delivery: the three headers are present, the
// timestamp is within tolerance of now (either way), and one of the "v1"
// signatures matches (several are sent while a secret is being rotated;
// other versions are ignored). The comparison takes constant time.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	for _, hv := range [...][2]string{{HeaderID, id}, {HeaderTimestamp, tsText}, {HeaderSignature, sigs}} {
		if hv[1] == "" {
			return fmt.Errorf("%w: %s", ErrMissingHeader, hv[0])
		}
	}
	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrInvalidTimestamp, tsText)
	}
	if skew := now.Sub(time.Unix(unix, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s off, tolerance %s", ErrTimestampRange, skew.Round(time.Second), tolerance)
	}
	want := mac(key, id, unix, body)
	for _, entry := range strings.Fields(sigs) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrNoMatch
}

// CheckSecret reports whether secret can sign deliveries: "whsec_" (or
// nothing) followed by the base64 of a 24- to 64-byte key.
func CheckSecret(secret string) error {
	_, err := decodeSecret(secret)
	return err
}
