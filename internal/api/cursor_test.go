package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// TestCursorFormatIsStable: cursors handed out before a deploy must still
// decode after it. The expected bytes are computed here independently:
// version, created_at in ms (big endian), id, then the first 16 bytes of
// HMAC-SHA256 over a fixed label, the account, the filter and the payload.
func TestCursorFormatIsStable(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	c := cursor{createdAt: time.UnixMilli(1700000000123).UTC(), id: "agt_01hz"}
	payload := binary.BigEndian.AppendUint64([]byte{1}, 1700000000123)
	payload = append(payload, "agt_01hz"...)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("agentapi cursor v1\x00acct_a\x00updated_since=5\x00"))
	m.Write(payload)
	want := base64.RawURLEncoding.EncodeToString(append(payload, m.Sum(nil)[:16]...))

	sg := newCursorSigner(key)
	if got := encodeCursor(sg, "acct_a", "updated_since=5", c); got != want {
		t.Fatalf("cursor %s, want %s", got, want)
	}
	// The pooled HMAC states are reset between uses, from many goroutines.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got, ok := decodeCursor(sg, "acct_a", "updated_since=5", want)
				if !ok || got.id != c.id || !got.createdAt.Equal(c.createdAt) {
					t.Errorf("decode: %+v %v", got, ok)
					return
				}
				if encodeCursor(sg, "acct_a", "updated_since=5", c) != want {
					t.Error("a pooled state was not reset")
					return
				}
			}
		}()
	}
	wg.Wait()
}
