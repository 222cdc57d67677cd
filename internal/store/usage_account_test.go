package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// The account's counts are its keys' summed, from the minute grain and,
// once swept, the hour grain; another account's are not among them.
func TestAccountUsage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		k1, k2, other := storetest.Key(t, s, a.ID), storetest.Key(t, s, a.ID), storetest.Key(t, s, b.ID)
		old := now.Add(-10 * 24 * time.Hour)
		counts := []store.UsageCount{
			{AccountID: a.ID, KeyID: k1.ID, Minute: now, Class: requestlog.Class2xx, Count: 3},
			{AccountID: a.ID, KeyID: k2.ID, Minute: now.Add(-time.Hour), Class: requestlog.Class2xx, Count: 4},
			{AccountID: a.ID, KeyID: k2.ID, Minute: now.Add(-time.Hour), Class: requestlog.Class5xx, Count: 1},
			{AccountID: a.ID, KeyID: k1.ID, Minute: old, Class: requestlog.Class429, Count: 7},
			{AccountID: a.ID, KeyID: k2.ID, Minute: old.Add(time.Minute), Class: requestlog.Class429, Count: 2},
			{AccountID: b.ID, KeyID: other.ID, Minute: now, Class: requestlog.Class2xx, Count: 100},
			{AccountID: b.ID, KeyID: other.ID, Minute: old, Class: requestlog.Class2xx, Count: 100},
		}
		if err := s.WriteUsage(ctx, nil, counts); err != nil {
			t.Fatal(err)
		}
		if err := s.SweepUsage(ctx, now); err != nil { // the old minutes become an hour
			t.Fatal(err)
		}
		day := 24 * time.Hour
		got, err := s.AccountUsage(ctx, a.ID, now.Truncate(day).Add(-29*day), now.Truncate(day).Add(day), day)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.UsageBucket{{Start: old.Truncate(day), Class: requestlog.Class429, Count: 9},
			{Start: now.Truncate(day), Class: requestlog.Class2xx, Count: 7}, {Start: now.Truncate(day), Class: requestlog.Class5xx, Count: 1}}
		if !slices.EqualFunc(got, want, func(x, y store.UsageBucket) bool {
			return x.Start.Equal(y.Start) && x.Class == y.Class && x.Count == y.Count
		}) {
			t.Errorf("account usage per day %v, want %v", got, want)
		}
		keys, err := s.AccountKeyUsage(ctx, a.ID, now.Add(-24*time.Hour), now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(keys, func(x, y store.KeyClassCount) int { return int(x.Count - y.Count) })
		wantKeys := []store.KeyClassCount{{KeyID: k2.ID, Class: requestlog.Class5xx, Count: 1}, {KeyID: k1.ID, Class: requestlog.Class2xx, Count: 3},
			{KeyID: k2.ID, Class: requestlog.Class2xx, Count: 4}}
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("per key in 24 hours %v, want %v", keys, wantKeys)
		}
	})
}
