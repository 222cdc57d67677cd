package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// BenchmarkWriteUsage is the recorder's one-second batch as a /v1/me load
// of about 1,000 requests a second makes it: 1,000 request logs of 20 keys
// and their counts, written in one WriteUsage. µs/log is what storing a
// request costs the store in time, cpu-µs/log the CPU of this process
// (on SQLite the service's own; PostgreSQL's server is not counted).
//
// Its logs are those of one millisecond, their ids made up. The serve/
// sub-benchmarks write them as the bench's /me load (bench/) has them: 30
// requests a millisecond, ids as domain.NewRequestID makes them, in the
// order requests end (random within their millisecond), one account.
func BenchmarkWriteUsage(b *testing.B) {
	const perBatch = 1000
	for _, e := range storetest.Engines() {
		b.Run(e, func(b *testing.B) { benchWriteUsage(b, storetest.Open(b, e), perBatch, 20, nil) })
	}
	for _, e := range storetest.Engines() {
		b.Run("serve/"+e, func(b *testing.B) { benchWriteUsage(b, storetest.Open(b, e), perBatch, 20, serveOrder) })
	}
	// Packing's worst case: every log of a key of its own in its second
	// (1,000 keys polling once a second), so every log is a row.
	for _, e := range storetest.Engines() {
		b.Run("sparse/"+e, func(b *testing.B) { benchWriteUsage(b, storetest.Open(b, e), perBatch, perBatch, nil) })
	}
}

// serveOrder makes logs as serve records them at 30 requests a
// millisecond: each log's id carries its start, and within a millisecond
// the requests end in random order.
func serveOrder(logs []requestlog.Log, at time.Time) {
	const perMS = 30
	for i := range logs {
		l := &logs[i]
		l.At = at.Add(time.Duration(i/perMS) * time.Millisecond)
		l.ID = domain.NewRequestID(l.At)
	}
	for i := 0; i < len(logs); i += perMS {
		ms := logs[i:min(i+perMS, len(logs))]
		rand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	}
}

func benchWriteUsage(b *testing.B, s *store.Store, perBatch, keys int, order func([]requestlog.Log, time.Time)) {
	{
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Millisecond)
		logs := make([]requestlog.Log, perBatch)
		counts := make([]store.UsageCount, 0, 20)
		for k := range 20 {
			counts = append(counts, store.UsageCount{AccountID: "acct_bench", KeyID: fmt.Sprintf("key_%02d", k),
				Minute: at.Truncate(time.Minute), Class: requestlog.Class2xx, Count: int64(perBatch / 20)})
		}
		batch := 0
		start, cpu0 := time.Now(), processCPU()
		for b.Loop() {
			for i := range logs {
				logs[i] = usageLog("acct_bench", fmt.Sprintf("key_%02d", i%keys), batch*perBatch+i, at.Add(time.Duration(i)*time.Microsecond), 200, "GET /v1/me")
			}
			if order != nil {
				order(logs, at)
			}
			if err := s.WriteUsage(ctx, logs, counts); err != nil {
				b.Fatal(err)
			}
			batch++
			at = at.Add(time.Second)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*perBatch), "µs/log")
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N*perBatch), "cpu-µs/log")
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRequestLogPageBusy is a page of an account whose 100,000 logs
// (the retention's ceiling) came in four seconds, 25,000 a second from 20
// keys, on SQLite: the first page, a key's, and one filter matching none
// (every log read). B/op shows a page holding a page of a second's logs,
// not the whole second.
func BenchmarkRequestLogPageBusy(b *testing.B) {
	s := storetest.Open(b, store.EngineSQLite)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	logs := make([]requestlog.Log, 0, 25_000)
	for sec := range 4 {
		logs = logs[:0]
		for i := range 25_000 {
			at := t0.Add(time.Duration(sec)*time.Second + time.Duration(i)*40*time.Microsecond)
			logs = append(logs, requestlog.Log{ID: domain.NewRequestID(at), AccountID: "acc_1", KeyID: fmt.Sprintf("key_%02d", i%20),
				At: at, Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: []int{200, 200, 200, 404}[i%4], Duration: time.Millisecond, Client: "192.0.2.1"})
		}
		if err := s.WriteUsage(ctx, logs, nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct {
		name string
		q    store.RequestLogQuery
	}{
		{"first", store.RequestLogQuery{}},
		{"key", store.RequestLogQuery{KeyID: "key_07"}},
		{"none-match", store.RequestLogQuery{Status: 400}},
	} {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			q.q.AccountID, q.q.Limit = "acc_1", 50
			for b.Loop() {
				page, _, err := s.RequestLogPage(ctx, q.q)
				if err != nil || (len(page) != 50) != (q.name == "none-match") {
					b.Fatal(len(page), err)
				}
			}
		})
	}
}
