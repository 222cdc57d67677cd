package usage

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// discard is a store that keeps nothing.
type discard struct{}

func (discard) WritePackedUsage(context.Context, *requestlog.Buffer, []store.UsageCount) error {
	return nil
}
func (discard) SweepUsage(context.Context, time.Time) error { return nil }

// BenchmarkRecord is Record from every CPU at once (a request's whole cost
// of recording, contention on the buffer's lock included), the buffer
// flushed to a store that keeps nothing every 1,000 records.
func BenchmarkRecord(b *testing.B) {
	r := New(discard{}, nil, Options{})
	at := time.Now().UTC()
	l := requestlog.Log{ID: "req_01m81j18g0zrv783fkdebbypmm", AccountID: "acct_01m81j18g0zrv783fgzskm57xy",
		KeyID: "key_01m81j18g0zrv783fmr2h49421", At: at, Method: "GET", Route: "GET /v1/me", Path: "/v1/me",
		Status: 200, Duration: time.Millisecond, Client: "192.0.2.1"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Record(l)
			if i++; i%1000 == 0 {
				_ = r.Flush(context.Background())
			}
		}
	})
}
