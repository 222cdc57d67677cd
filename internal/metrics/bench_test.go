package metrics

import (
	"testing"
	"time"
)

// BenchmarkRequest is the cost every request pays to be counted and timed.
func BenchmarkRequest(b *testing.B) {
	m := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request("GET /v1/me", "GET", 200, 250*time.Microsecond)
			m.Store("key_by_prefix", 3*time.Microsecond)
		}
	})
}
