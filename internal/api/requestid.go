package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

type ctxKey int

// ctxLogAttrs holds a request's recorder (observe), its one context value.
const ctxLogAttrs ctxKey = 0

// requestID is the id observe gave the request of ctx ("" outside one).
func requestID(ctx context.Context) string {
	if rec, _ := ctx.Value(ctxLogAttrs).(*recorder); rec != nil {
		return rec.id
	}
	return ""
}

// newRequestID is "req_" and 24 hex digits of randomness, built in place.
func newRequestID() string {
	var raw [12]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24+)
	var b [4 + 2*len(raw)]byte
	copy(b[:], "req_")
	hex.Encode(b[4:], raw[:])
	return string(b[:])
}
