package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// BenchmarkNetworksOf is what the usage flush adds per request log to
// notice new networks: reading a second of 1,000 logs of 20 keys, each
// key from its own address, as BenchmarkWriteUsage writes them.
func BenchmarkNetworksOf(b *testing.B) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	logs := make([]requestlog.Log, 1000)
	for i := range logs {
		logs[i] = requestlog.Log{ID: fmt.Sprintf("req_%06d", i), AccountID: "acct_bench", KeyID: fmt.Sprintf("key_%02d", i%20),
			At: at.Add(time.Duration(i) * time.Microsecond), Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200,
			Client: fmt.Sprintf("192.0.2.%d", i%20)}
	}
	buf := requestlog.Pack(logs)
	for b.Loop() {
		if n := networksOf(buf); len(n) != 20 {
			b.Fatalf("%d networks", len(n))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(logs)), "ns/log")
}
