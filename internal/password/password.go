// Package password hashes console users' passwords with argon2id. API keys
// never come here: their entropy makes a slow hash pointless.
package password

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// OWASP's argon2id parameters: 19 MiB, two passes, one lane.
const (
	memoryKiB = 19 * 1024
	passes    = 2
	lanes     = 1
	saltLen   = 16
	keyLen    = 32
)

// Length bounds of a password.
const (
	MinLength = 8
	MaxBytes  = 1024
)

// Check reports why pw is not acceptable, or nil.
func Check(pw string) error {
	switch {
	case utf8.RuneCountInString(pw) < MinLength:
		return fmt.Errorf("a password has at least %d characters", MinLength)
	case len(pw) > MaxBytes:
		return fmt.Errorf("a password has at most %d bytes", MaxBytes)
	case !utf8.ValidString(pw):
		return errors.New("a password must be valid UTF-8 text")
	}
	return nil
}

// Hash returns a PHC string: $argon2id$v=19$m=…,t=…,p=…$salt$hash.
func Hash(pw string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, passes, memoryKiB, lanes, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, memoryKiB, passes, lanes, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// ErrMalformedHash is returned for a stored string Verify cannot use.
var ErrMalformedHash = errors.New("password: malformed hash")

// Verify reports whether pw matches encoded, reading the parameters from
// encoded so they can be raised over time.
func Verify(encoded, pw string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, ErrMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrMalformedHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, ErrMalformedHash
	}
	if m < 8 || m > 1<<21 || t < 1 || t > 10 || p < 1 || p > 16 {
		return false, ErrMalformedHash
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, ErrMalformedHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false, ErrMalformedHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummy is a hash nobody's password matches, for DummyVerify.
var dummy = func() string {
	h, _ := Hash("agentapi dummy password")
	return h
}()

// DummyVerify does the work of a Verify against a real hash, so a sign-in
// for an unknown email takes as long as one with a wrong password.
func DummyVerify(pw string) { _, _ = Verify(dummy, pw) }
