package domain

import (
	"regexp"
	"testing"
	"time"
)

func TestRequestIDCarriesItsTime(t *testing.T) {
	form := regexp.MustCompile(`^req_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for _, at := range []time.Time{
		time.Date(2026, 11, 25, 14, 58, 17, 123_456_789, time.UTC),
		time.Unix(0, 0), time.Date(3000, 1, 1, 0, 0, 0, 999_000_000, time.FixedZone("x", 3600)),
	} {
		for range 1000 { // one millisecond, many requests
			id := NewRequestID(at)
			if !form.MatchString(id) || seen[id] {
				t.Fatalf("%q: form %v, seen before %v", id, form.MatchString(id), seen[id])
			}
			seen[id] = true
			got, ok := RequestIDTime(id)
			if want := at.Truncate(time.Millisecond).UTC(); !ok || !got.Equal(want) {
				t.Fatalf("RequestIDTime(%q) = %v, %v; want %v", id, got, ok, want)
			}
		}
	}
	for _, bad := range []string{"", "req_", "req_0123456789abcdef0123456", "req_0123456789abcdef012345678",
		"rex_0123456789abcdef01234567", "req_0123456789abcdeg01234567", "req_0123456789abcdef0123456z"} {
		if _, ok := RequestIDTime(bad); ok {
			t.Errorf("RequestIDTime(%q) accepted", bad)
		}
	}
}
