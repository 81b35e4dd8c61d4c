// Package auth holds Curate's credentials: password hashing, API keys and
// roles. It knows nothing of HTTP or the database.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// MinPasswordLength is the shortest password accepted. Length matters more
// than character classes (NIST SP 800-63B).
const MinPasswordLength = 12

// MaxPasswordLength bounds the work one sign-in can cause.
const MaxPasswordLength = 256

// argon2id parameters: OWASP's recommended m=19 MiB, t=2, p=1.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// ErrWeakPassword is returned for passwords outside the length limits.
var ErrWeakPassword = fmt.Errorf("use at least %d characters (and at most %d)", MinPasswordLength, MaxPasswordLength)

// CheckPasswordStrength says whether a new password is acceptable.
func CheckPasswordStrength(pw string) error {
	n := len([]rune(pw))
	if n < MinPasswordLength || len(pw) > MaxPasswordLength {
		return ErrWeakPassword
	}
	return nil
}

// HashPassword returns an argon2id hash in the PHC string format.
func HashPassword(pw string) (string, error) {
	if err := CheckPasswordStrength(pw); err != nil {
		return "", err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// VerifyPassword reports whether pw matches a hash made by HashPassword.
func VerifyPassword(hash, pw string) (bool, error) {
	if len(pw) > MaxPasswordLength {
		return false, nil
	}
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("unknown password hash format")
	}
	var version int
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil {
		return false, err
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return false, err
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, err
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// DummyVerify spends the time of a real verification, so that a sign-in for
// an unknown e-mail takes as long as one with a wrong password.
func DummyVerify(pw string) {
	argon2.IDKey([]byte(pw), make([]byte, 16), argonTime, argonMemory, argonThreads, argonKeyLen)
}

// GeneratePassword returns a random password of 20 URL-safe characters.
func GeneratePassword() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
