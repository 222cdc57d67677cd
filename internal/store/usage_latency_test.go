package store_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// histogram counts the latencies from ms milliseconds to to ms, each once.
func histogram(from, to int) []uint32 {
	h := make([]uint32, requestlog.LatencyBins)
	for ms := from; ms <= to; ms++ {
		h[requestlog.LatencyBin(time.Duration(ms)*time.Millisecond)]++
	}
	return h
}

// near wants the q-quantile of hist within a bin's 12.5 % of want.
func near(t *testing.T, what string, hist []int64, q float64, want time.Duration) {
	t.Helper()
	got, ok := requestlog.Percentile(hist, q)
	if !ok || math.Abs(float64(got-want)) > 0.125*float64(want) {
		t.Errorf("%s: p%.0f %v (%v), want about %v", what, q*100, got, ok, want)
	}
}

// sumBins is the histogram of the buckets starting at start.
func sumBins(rows []store.LatencyBucket, start time.Time) []int64 {
	h := make([]int64, requestlog.LatencyBins)
	for _, r := range rows {
		if r.Start.Equal(start) {
			h[r.Bin] += r.Count
		}
	}
	return h
}

// Latency histograms are added up per key, hour and bin (a key's classes
// and minutes together), read per bucket, per key or per account, before
// and after a sweep, which removes those older than 90 days; p50 and p95
// of 1 to 100 ms are 50 and 95 ms. Another account's are not among them.
func TestUsageLatency(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
		old := now.Add(-3 * 24 * time.Hour)
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		k1, k2, other := storetest.Key(t, s, a.ID), storetest.Key(t, s, a.ID), storetest.Key(t, s, b.ID)
		counts := []store.UsageCount{
			{AccountID: a.ID, KeyID: k1.ID, Minute: now, Class: requestlog.Class2xx, Count: 90, Latency: histogram(1, 90)},
			{AccountID: a.ID, KeyID: k1.ID, Minute: now, Class: requestlog.Class4xx, Count: 10, Latency: histogram(91, 100)},
			{AccountID: a.ID, KeyID: k2.ID, Minute: old, Class: requestlog.Class2xx, Count: 100, Latency: histogram(151, 250)},
			{AccountID: b.ID, KeyID: other.ID, Minute: now, Class: requestlog.Class2xx, Count: 1000, Latency: histogram(1000, 1999)},
			{AccountID: a.ID, KeyID: k2.ID, Minute: now.Add(-91 * 24 * time.Hour), Class: requestlog.Class2xx, Count: 1, Latency: histogram(5, 5)},
		}
		if err := s.WriteUsage(ctx, nil, counts); err != nil {
			t.Fatal(err)
		}
		if err := s.SweepUsage(ctx, now); err != nil { // the 91-day-old hour goes
			t.Fatal(err)
		}
		if gone, err := s.KeyLatency(ctx, k2.ID, now.Add(-100*24*time.Hour), now.Add(-80*24*time.Hour), time.Hour); err != nil || len(gone) != 0 {
			t.Errorf("a histogram 91 days old %v, %v; want it swept", gone, err)
		}
		day := 24 * time.Hour
		today, from, to := now.Truncate(day), now.Truncate(day).Add(-29*day), now.Truncate(day).Add(day)
		key, err := s.KeyLatency(ctx, k1.ID, from, to, day)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "key today", sumBins(key, today), 0.5, 50*time.Millisecond)
		near(t, "key today", sumBins(key, today), 0.95, 95*time.Millisecond)
		acct, err := s.AccountLatency(ctx, a.ID, from, to, day)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "account today", sumBins(acct, today), 0.95, 95*time.Millisecond)
		near(t, "account 3 days ago (hours)", sumBins(acct, old.Truncate(day)), 0.5, 200*time.Millisecond)
		near(t, "account 3 days ago (hours)", sumBins(acct, old.Truncate(day)), 0.95, 245*time.Millisecond)
		var n int64
		for _, r := range acct {
			n += r.Count
		}
		if n != 200 {
			t.Errorf("the account's histograms hold %d requests, want 200", n)
		}
		hourly, err := s.KeyLatency(ctx, k2.ID, old.Truncate(time.Hour), old.Truncate(time.Hour).Add(time.Hour), time.Hour)
		if err != nil || len(hourly) == 0 {
			t.Errorf("the old hour's histogram %v, %v", hourly, err)
		}
	})
}

// The busiest agents are the account's, the most requests first, from
// the minutes and, once swept, the hours, within the range; n bounds them.
func TestBusiestAgents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
		old := now.Add(-3 * 24 * time.Hour)
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		agent := func(acct, id string, at time.Time, class string, n int64) store.UsageCount {
			return store.UsageCount{AccountID: acct, AgentID: id, Minute: at, Class: class, Count: n}
		}
		counts := []store.UsageCount{
			agent(a.ID, "agt_1", now, requestlog.Class2xx, 5),
			agent(a.ID, "agt_2", old, requestlog.Class2xx, 6),
			agent(a.ID, "agt_2", old.Add(time.Minute), requestlog.Class5xx, 3),
			agent(a.ID, "agt_3", now.Add(-40*24*time.Hour), requestlog.Class2xx, 50),
			agent(b.ID, "agt_9", now, requestlog.Class2xx, 100),
		}
		if err := s.WriteUsage(ctx, nil, counts); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteUsage(ctx, nil, counts[:1]); err != nil { // added, not replaced
			t.Fatal(err)
		}
		if err := s.SweepUsage(ctx, now); err != nil {
			t.Fatal(err)
		}
		got, err := s.BusiestAgents(ctx, a.ID, now.Add(-30*24*time.Hour), now.Add(time.Minute), 5)
		if err != nil {
			t.Fatal(err)
		}
		if want := []store.AgentRequests{{AgentID: "agt_1", Count: 10}, {AgentID: "agt_2", Count: 9}}; !slices.Equal(got, want) {
			t.Errorf("busiest agents %v, want %v", got, want)
		}
		if got, err := s.BusiestAgents(ctx, a.ID, now.Add(-24*time.Hour), now.Add(time.Minute), 1); err != nil || len(got) != 1 || got[0].AgentID != "agt_1" {
			t.Errorf("the busiest agent in 24 hours %v, %v; want agt_1", got, err)
		}
		day := 24 * time.Hour
		byDay, err := s.AgentUsage(ctx, a.ID, "agt_2", now.Truncate(day).Add(-29*day), now.Truncate(day).Add(day), day)
		if want := fmt.Sprint([]store.UsageBucket{{Start: old.Truncate(day), Class: requestlog.Class2xx, Count: 6}, {Start: old.Truncate(day), Class: requestlog.Class5xx, Count: 3}}); err != nil || fmt.Sprint(byDay) != want {
			t.Errorf("agt_2 per day %v, %v; want %s", byDay, err, want)
		}
		if other, err := s.AgentUsage(ctx, b.ID, "agt_2", now.Add(-30*day), now.Add(day), day); err != nil || len(other) != 0 {
			t.Errorf("another account reads agt_2's usage: %v, %v", other, err)
		}
	})
}
