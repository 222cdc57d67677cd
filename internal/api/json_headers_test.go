package api

import (
	"net/http"
	"strconv"
	"testing"
)

// TestSetJSONHeaders: the shared Content-Length values are the lengths
// formatted, and adding to a response's header never changes what the
// next response is given.
func TestSetJSONHeaders(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 99, 100, 999, 1000, maxSharedLength - 1, maxSharedLength, 1 << 20} {
		h := http.Header{}
		setJSONHeaders(h, n)
		if got := h.Values("Content-Length"); len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Fatalf("Content-Length for %d = %q", n, got)
		}
		if got := h.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
			t.Fatalf("Content-Type = %q", got)
		}
		h.Add("Content-Length", "x")
		h.Add("Content-Type", "y")
		next := http.Header{}
		setJSONHeaders(next, n)
		if got := next.Values("Content-Length"); len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Fatalf("after an Add, Content-Length for %d = %q", n, got)
		}
		if got := next.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
			t.Fatalf("after an Add, Content-Type = %q", got)
		}
	}
	for n := range maxSharedLength {
		if got := contentLengths[n][0]; got != strconv.Itoa(n) {
			t.Fatalf("contentLengths[%d] = %q", n, got)
		}
	}
}
