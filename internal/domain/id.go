package domain

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// idAlphabet is Crockford's base32 in lower case: ids sort in creation order
// as plain strings.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds since
// the epoch, then 80 random bits. Time-ordered, opaque, and unguessable.
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	var hi, lo uint64 = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 0, len(prefix)+1+26)
	out = append(out, prefix...)
	out = append(out, '_')
	// 128 bits as 26 base32 digits, most significant first (the top digit holds 3 bits).
	var digits [26]byte
	for i := 25; i >= 0; i-- {
		digits[i] = idAlphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(append(out, digits[:]...))
}

// ID prefixes, one per kind of record.
const (
	PrefixAccount  = "acct"
	PrefixUser     = "usr"
	PrefixKey      = "key"
	PrefixAgent    = "agt"
	PrefixQuestion = "qst"
	PrefixConvo    = "conv"
	PrefixEvent    = "evt"
)
