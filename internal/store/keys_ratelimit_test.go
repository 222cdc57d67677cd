package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// Setting the ceiling a key already has changes nothing: support running
// the same command twice must not leave "5 → 5" in the audit trail.
func TestSetKeyRateLimitToTheSameValueRecordsNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		for i, n := range []int{120, 7, 7, 9} { // newKey made it 120
			at := t0.Add(time.Duration(i+1) * time.Second)
			if err := s.SetKeyRateLimit(ctx, k.ID, n, storetest.Event(acct.ID, k.ID, "rate_limit_changed", at)); err != nil {
				t.Fatalf("set %d: %v", n, err)
			}
			if g, _ := s.GetKeyByID(ctx, k.ID); g.RateLimitPerMinute != n {
				t.Fatalf("rate limit %d, want %d", g.RateLimitPerMinute, n)
			}
		}
		wantNotFound(t, "unknown key", s.SetKeyRateLimit(ctx, "key_nope", 7, storetest.Event(acct.ID, "key_nope", "x", t0)))
		evs, err := s.ListKeyAuditEvents(ctx, acct.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		changes := 0
		for _, e := range evs {
			if e.Action == "rate_limit_changed" {
				changes++
			}
		}
		if changes != 2 {
			t.Fatalf("%d rate_limit_changed events, want 2 (120 → 7, 7 → 9): %+v", changes, evs)
		}
	})
}
