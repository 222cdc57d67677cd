// Package secretscantest plays GitHub in tests: it makes ECDSA P-256 keys,
// writes them as GitHub's keys file, and signs reports as GitHub does.
package secretscantest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/secretscan"
)

// Signer is one of GitHub's signing keys, made in the test.
type Signer struct {
	ID  string
	Key *ecdsa.PrivateKey
}

// NewSigner makes a P-256 key with identifier id.
func NewSigner(t testing.TB, id string) Signer {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader) // P-256 and crypto/rand: cannot fail
	return Signer{ID: id, Key: k}
}

// Sign is the Github-Public-Key-Signature of body: base64 of the ASN.1 DER
// ECDSA signature of SHA-256(body).
func (s Signer) Sign(t testing.TB, body []byte) string {
	t.Helper()
	sum := sha256.Sum256(body)
	der, _ := ecdsa.SignASN1(rand.Reader, s.Key, sum[:]) // a P-256 key and crypto/rand: cannot fail
	return base64.StdEncoding.EncodeToString(der)
}

// Headers are the signed report's headers as "Name: value" strings.
func (s Signer) Headers(t testing.TB, body []byte) []string {
	t.Helper()
	return []string{secretscan.HeaderKeyID + ": " + s.ID, secretscan.HeaderSignature + ": " + s.Sign(t, body)}
}

// KeysFile is GitHub's published JSON listing the signers' public keys,
// the first one current.
func KeysFile(t testing.TB, ss ...Signer) []byte {
	t.Helper()
	var keys []map[string]any
	for i, s := range ss {
		der, _ := x509.MarshalPKIXPublicKey(&s.Key.PublicKey) // a P-256 key: cannot fail
		pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		keys = append(keys, map[string]any{"key_identifier": s.ID, "key": pemKey, "is_current": i == 0})
	}
	b, _ := json.MarshalIndent(map[string]any{"public_keys": keys}, "", "  ")
	return b
}

// WriteKeys writes the keys file at path with a modification time moved
// by age from now, so that successive rewrites are told apart whatever the
// file system's clock granularity.
func WriteKeys(t testing.TB, path string, age time.Duration, ss ...Signer) {
	t.Helper()
	if err := os.WriteFile(path, KeysFile(t, ss...), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(age)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// Report is a report body of entries {token, type, url, source}.
func Report(t testing.TB, entries ...secretscan.Entry) []byte {
	t.Helper()
	b, _ := json.Marshal(append([]secretscan.Entry{}, entries...)) // [] when none
	return b
}

// Forged is a token a report may carry that looks like cred but is not
// ours: cred's prefix, another secret (its first character changed) and
// the checksum recomputed, so that it is well formed.
func Forged(cred string) string {
	body := []byte(cred[:len(cred)-credential.ChecksumLen])
	i := strings.LastIndexByte(cred, '_') + 1 // the secret's first character
	if body[i] == 'a' {
		body[i] = 'b'
	} else {
		body[i] = 'a'
	}
	return string(body) + credential.Checksum(string(body))
}
