package secretscan

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// maxKeysFileBytes bounds the keys file; GitHub's holds a few keys of a few
// hundred bytes each.
const maxKeysFileBytes = 1 << 20

// Limits on the signature headers, far above what GitHub sends (a key
// identifier is 64 hex digits; a P-256 DER signature at most 72 bytes).
const (
	maxKeyIDLen     = 256
	maxSignatureLen = 512
)

// Why a report's signature was refused; all three are 401 to the sender.
var (
	ErrUnsigned     = errors.New("the report carries no signature")
	ErrUnknownKey   = errors.New("no configured key has the report's key identifier")
	ErrBadSignature = errors.New("the report's signature does not verify")
)

// keysFile is GitHub's published format
// (https://api.github.com/meta/public_keys/secret_scanning).
type keysFile struct {
	PublicKeys []struct {
		KeyIdentifier string `json:"key_identifier"`
		Key           string `json:"key"`
		IsCurrent     bool   `json:"is_current"`
	} `json:"public_keys"`
}

// ParseKeys reads a keys file: every listed key, current or not, by its
// identifier. Every key must be an ECDSA P-256 public key in PEM; a file
// without any key is an error, since it would refuse every report.
func ParseKeys(data []byte) (map[string]*ecdsa.PublicKey, error) {
	var f keysFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not GitHub's public_keys JSON: %w", err)
	}
	if len(f.PublicKeys) == 0 {
		return nil, errors.New("no public_keys listed")
	}
	out := make(map[string]*ecdsa.PublicKey, len(f.PublicKeys))
	for i, k := range f.PublicKeys {
		if k.KeyIdentifier == "" || len(k.KeyIdentifier) > maxKeyIDLen {
			return nil, fmt.Errorf("public_keys[%d]: key_identifier must be 1 to %d characters", i, maxKeyIDLen)
		}
		block, _ := pem.Decode([]byte(k.Key))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("public_keys[%d] (%s): key is not a PEM PUBLIC KEY", i, k.KeyIdentifier)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public_keys[%d] (%s): %w", i, k.KeyIdentifier, err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("public_keys[%d] (%s): not an ECDSA P-256 key", i, k.KeyIdentifier)
		}
		out[k.KeyIdentifier] = ec
	}
	return out, nil
}

// Keys holds the public keys of the keys file named by
// --secret-scanning-keys. It re-reads the file when it changes (another
// modification time, size or file: a rename onto the path counts), checked
// on every report, so a rotation needs no restart and no signal; Reload
// re-reads it at once. A file
// that no longer parses keeps the keys last read, with an error in the log.
type Keys struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex
	stamp os.FileInfo
	set   map[string]*ecdsa.PublicKey
}

// LoadKeys reads the keys file; an unreadable or invalid file is an error
// (serve refuses to start with it).
func LoadKeys(path string, log *slog.Logger) (*Keys, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fi, set, err := readKeys(path)
	if err != nil {
		return nil, err
	}
	return &Keys{path: path, log: log, stamp: fi, set: set}, nil
}

func readKeys(path string) (os.FileInfo, map[string]*ecdsa.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFileBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxKeysFileBytes {
		return nil, nil, fmt.Errorf("%s: larger than %d bytes", path, maxKeysFileBytes)
	}
	set, err := ParseKeys(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return fi, set, nil
}

func (k *Keys) current() map[string]*ecdsa.PublicKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	fi, err := os.Stat(k.path)
	if err != nil {
		if k.stamp != nil {
			k.log.Error("secret scanning: keys file unreadable; keeping the keys last read", "path", k.path, "err", err)
			k.stamp = nil // warn once, and re-read whatever appears next
		}
		return k.set
	}
	if k.stamp != nil && sameStamp(fi, k.stamp) {
		return k.set
	}
	rfi, set, err := readKeys(k.path)
	if err != nil {
		// Remember what was seen, so a broken file is reported once and
		// not re-read on every report until it changes again.
		k.stamp = fi
		k.log.Error("secret scanning: keys file changed but does not load; keeping the keys last read", "path", k.path, "err", err)
		return k.set
	}
	k.stamp, k.set = rfi, set
	k.log.Info("secret scanning: keys file read", "path", k.path, "keys", len(set))
	return set
}

// Reload re-reads the keys file now, whatever its stamp (serve calls it on
// SIGHUP): a rewrite in place that keeps the file's size, within the file
// system's clock granularity, escapes the check made on every report. A
// file that does not load keeps the keys last read, with an error in the
// log.
func (k *Keys) Reload() {
	k.mu.Lock()
	defer k.mu.Unlock()
	fi, set, err := readKeys(k.path)
	if err != nil {
		k.log.Error("secret scanning: keys file does not load; keeping the keys last read", "path", k.path, "err", err)
		return
	}
	k.stamp, k.set = fi, set
	k.log.Info("secret scanning: keys file read", "path", k.path, "keys", len(set))
}

func sameStamp(a, b os.FileInfo) bool {
	return a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size() && os.SameFile(a, b)
}

// Verify checks a report: keyID and signature are the values of
// HeaderKeyID and HeaderSignature, body the raw request body. The
// signature is ECDSA P-256 over SHA-256 of body, ASN.1 DER in base64, by
// any listed key with that identifier.
func (k *Keys) Verify(keyID, signature string, body []byte) error {
	if keyID == "" || signature == "" {
		return ErrUnsigned
	}
	if len(keyID) > maxKeyIDLen || len(signature) > maxSignatureLen {
		return ErrBadSignature
	}
	pub, ok := k.current()[keyID]
	if !ok {
		return ErrUnknownKey
	}
	der, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return ErrBadSignature
	}
	sum := sha256.Sum256(body)
	// High S is accepted, (r, n−s) as well as (r, s): see "Signatures" in
	// docs/secret-scanning.md for why that malleability is harmless here.
	if !ecdsa.VerifyASN1(pub, sum[:], der) {
		return ErrBadSignature
	}
	return nil
}

// Count is how many keys are configured now (for the start-up log).
func (k *Keys) Count() int { return len(k.current()) }
