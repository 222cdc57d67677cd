package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// BenchmarkLatencySource measures where the charts' p50 and p95 come
// from, for one account's 30-day chart (a bucket a day): "logs" reads and
// unpacks every request log of the range and bins each duration;
// "histograms" reads the latency histograms the usage recorder writes
// beside the counts (AccountLatency). The account's 5 keys made logsTotal
// requests in the last 7 days (the logs' retention: older ones are gone,
// so the logs cannot give 30 days at all, and the sweep would also cut
// them to 100,000), and as many a week before: the histograms hold 30
// days of them.
func BenchmarkLatencySource(b *testing.B) {
	for _, e := range storetest.Engines() {
		benchLatencySource(b, e)
	}
}

func benchLatencySource(b *testing.B, e string) {
	const logsTotal = 1_000_000
	s := storetest.Open(b, e)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	acct := storetest.Account(b, s)
	var keys []string
	for range 5 {
		keys = append(keys, storetest.Key(b, s, acct.ID).ID)
	}
	seedHistograms(b, s, acct.ID, keys, now, logsTotal)
	day := 24 * time.Hour
	from, to := now.Truncate(day).Add(-29*day), now.Truncate(day).Add(day)
	b.Run(e+"/histograms", func(b *testing.B) {
		for range b.N {
			got, err := s.AccountLatency(ctx, acct.ID, from, to, day)
			if err != nil || len(got) == 0 {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run(e+"/counts", func(b *testing.B) { // the chart's other read, for scale
		for range b.N {
			got, err := s.AccountUsage(ctx, acct.ID, from, to, day)
			if err != nil || len(got) == 0 {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run(e+"/logs", func(b *testing.B) {
		seedLogs(b, s, acct.ID, keys, now, logsTotal)
		b.ResetTimer()
		for range b.N {
			got, err := s.LatencyFromLogs(ctx, acct.ID, from, to, day)
			if err != nil || len(got) == 0 {
				b.Fatal(len(got), err)
			}
		}
	})
}

// seedAt is the time of the i-th request back from now, at n a week, and
// its latency.
func seedAt(now time.Time, i, n int) (time.Time, time.Duration) {
	return now.Add(-time.Duration(i) * (7 * 24 * time.Hour / time.Duration(n))), time.Duration(500+i*7919%90_000) * time.Microsecond
}

// seedHistograms writes the counts and histograms of keys' requests, n a
// week, over the 30 days before now, 20,000 requests at a time, and sweeps.
func seedHistograms(b *testing.B, s *store.Store, acct string, keys []string, now time.Time, n int) {
	b.Helper()
	const chunk = 20_000
	for start := 0; start < n*30/7; start += chunk {
		tallies := map[[2]string]*store.UsageCount{}
		for i := start; i < min(start+chunk, n*30/7); i++ {
			at, d := seedAt(now, i, n)
			key, m := keys[i%len(keys)], at.Truncate(time.Minute)
			c := tallies[[2]string{key, m.String()}]
			if c == nil {
				c = &store.UsageCount{AccountID: acct, KeyID: key, Minute: m, Class: requestlog.Class2xx, Latency: make([]uint32, requestlog.LatencyBins)}
				tallies[[2]string{key, m.String()}] = c
			}
			c.Count++
			c.Latency[requestlog.LatencyBin(d)]++
		}
		counts := make([]store.UsageCount, 0, len(tallies))
		for _, c := range tallies {
			counts = append(counts, *c)
		}
		if err := s.WriteUsage(context.Background(), nil, counts); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.SweepUsage(context.Background(), now); err != nil {
		b.Fatal(err)
	}
}

// seedLogs writes the logs of the same requests in the last 7 days (n),
// which the sweep would cut to the newest 100,000.
func seedLogs(b *testing.B, s *store.Store, acct string, keys []string, now time.Time, n int) {
	b.Helper()
	const chunk = 20_000
	for start := 0; start < n; start += chunk {
		logs := make([]requestlog.Log, 0, chunk)
		for i := start; i < min(start+chunk, n); i++ {
			at, d := seedAt(now, i, n)
			logs = append(logs, requestlog.Log{ID: domain.NewRequestID(at), AccountID: acct, KeyID: keys[i%len(keys)], At: at, Method: "GET",
				Route: "GET /v1/me", Path: "/v1/me", Status: 200, Duration: d, Client: "192.0.2.1"})
		}
		if err := s.WriteUsage(context.Background(), logs, nil); err != nil {
			b.Fatal(err)
		}
	}
}
