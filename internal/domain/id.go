package domain

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"sync"
	"time"
)

// idAlphabet is Crockford's base32 in lower case: ids sort in creation order
// as plain strings.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds since
// the epoch, then 80 random bits. Time-ordered, opaque, and hard to guess.
//
// The ids one process makes are strictly increasing, whatever their prefix,
// so that records created one after another within one millisecond (which
// lists order by creation time, then id) list in creation order: the first
// id of a millisecond starts at a random point, and each next one in the same
// millisecond, or after the clock went back, adds a random 1 to 2^40 to the
// last one (the milliseconds of the last id kept). Knowing one id thus
// narrows the next of the same millisecond to 2^40 candidates, not 2^80.
func NewID(prefix string, now time.Time) string { return ids.id(prefix, now) }

func (g *idGen) id(prefix string, now time.Time) string {
	hi, lo := g.next(now)
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

// idGen holds the last id the process made.
type idGen struct {
	mu     sync.Mutex
	made   bool
	ms     uint64 // its milliseconds (48 bits)
	hi, lo uint64 // its 80 random bits: 16 in hi, 64 in lo
}

var ids idGen

const idMaxMS = 1<<48 - 1

// next returns the 128 bits of the next id: ms<<16 | random in hi, the
// rest of the random part in lo.
func (g *idGen) next(now time.Time) (hi, lo uint64) {
	ms := uint64(min(max(now.UnixMilli(), 0), idMaxMS))
	var r [15]byte         // 10 bytes of fresh random part, 5 of increment
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.made && ms <= g.ms {
		inc := (uint64(r[10])<<32 | uint64(binary.BigEndian.Uint32(r[11:]))) + 1
		l, carry := bits.Add64(g.lo, inc, 0)
		if h := g.hi + carry; h < 1<<16 {
			g.hi, g.lo = h, l
			return g.ms<<16 | g.hi, g.lo
		}
		// The random part is spent (about one chance in 2^40 per id): the
		// next millisecond starts afresh, still above every id made. At the
		// last representable millisecond (the year 10889) there is none.
		ms = min(g.ms+1, idMaxMS)
	}
	g.made, g.ms = true, ms
	g.hi, g.lo = uint64(binary.BigEndian.Uint16(r[:2])), binary.BigEndian.Uint64(r[2:10])
	return g.ms<<16 | g.hi, g.lo
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
