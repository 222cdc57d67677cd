package domain

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewRequestID is a request's id (X-Request-Id): "req_", 12 hex digits of
// the request's start in Unix milliseconds, and 12 hex digits of
// randomness, built in place. The time it carries is the one its request
// log is stored under (requestlog.Log.At, in milliseconds), so the
// console finds a pasted id by the log's key, (account, time, id), with no
// index on the id (RequestIDTime, store.RequestLogPage).
func NewRequestID(start time.Time) string {
	var raw [12]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(start.UnixMilli())<<16) // its low 48 bits, first
	_, _ = rand.Read(raw[6:])                                          // crypto/rand.Read never fails (Go 1.24+)
	var b [4 + 2*len(raw)]byte
	copy(b[:], "req_")
	hex.Encode(b[4:], raw[:])
	return string(b[:])
}

// RequestIDTime is the start, to the millisecond, that a NewRequestID id
// carries; ok is false for a string of any other form. An id of another
// origin of the same form (an older release's, all random) yields a time
// its log does not have: callers look it up by that time first, and
// without it when nothing is found.
func RequestIDTime(id string) (t time.Time, ok bool) {
	if len(id) != 28 || id[:4] != "req_" {
		return time.Time{}, false
	}
	raw, err := hex.DecodeString(id[4:])
	if err != nil {
		return time.Time{}, false
	}
	var ms [8]byte // the first 6 bytes, big-endian
	copy(ms[2:], raw[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:]))).UTC(), true
}
