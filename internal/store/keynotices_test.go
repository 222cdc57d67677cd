package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestSweepKeyExpiry: api_key.expiring at 7 days and at 1 day before
// expires_at and api_key.expired once it passes, each exactly once however
// often and however many instances sweep; a revoked key gets none.
func TestSweepKeyExpiry(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := storetest.OpenTwo(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, a)
		k := storetest.Key(t, a, acct.ID)
		gone := storetest.Key(t, a, acct.ID)
		end := storetest.T0.Add(30 * 24 * time.Hour)
		for _, id := range []string{k.ID, gone.ID} {
			if err := a.UpdateKeyAccess(ctx, acct.ID, id, k.Scopes, nil, &end, storetest.Event(acct.ID, id, domain.AuditAccessChanged, storetest.T0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.RevokeKey(ctx, acct.ID, gone.ID, "usr_1", storetest.T0, storetest.Event(acct.ID, gone.ID, domain.AuditRevoked, storetest.T0)); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			at   time.Time
			want []string // expires_in of the events written, "" for expired
		}{
			{end.Add(-8 * 24 * time.Hour), nil},
			{end.Add(-6 * 24 * time.Hour), []string{"7d"}},
			{end.Add(-5 * 24 * time.Hour), nil},
			{end.Add(-12 * time.Hour), []string{"1d"}},
			{end.Add(time.Minute), []string{""}},
			{end.Add(time.Hour), nil},
		}
		seen := 0
		for _, st := range steps {
			sweepBoth(t, a, b, st.at)
			evs := expiryEvents(t, a, acct.ID)
			checkExpiryStep(t, evs[seen:], st.at, st.want, k.ID)
			seen = len(evs)
		}
	})
}

// checkExpiryStep checks the events one sweep wrote: one per expected
// notice, each about the key, expiring ("7d", "1d") or expired ("").
func checkExpiryStep(t *testing.T, got []domain.Event, at time.Time, want []string, keyID string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("at %s: %d new events %v, want %v", at, len(got), got, want)
	}
	for i, w := range want {
		ev := got[i]
		if !containsID(ev, keyID) {
			t.Errorf("event %s is not about the unrevoked key: %s", ev.Type, ev.Data)
		}
		wantType := domain.EventKeyExpiring
		if w == "" {
			wantType = domain.EventKeyExpired
		}
		if ev.Type != wantType {
			t.Errorf("at %s: event %s, want %s", at, ev.Type, wantType)
		}
		if w != "" && !strings.Contains(string(ev.Extra), `"expires_in":"`+w+`"`) {
			t.Errorf("at %s: details %s, want expires_in %s", at, ev.Extra, w)
		}
	}
}

// sweepBoth sweeps from two instances at once.
func sweepBoth(t *testing.T, a, b *store.Store, at time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range []*store.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.SweepKeyExpiry(context.Background(), at, 100); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func expiryEvents(t *testing.T, s *store.Store, accountID string) []domain.Event {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), store.EventQuery{AccountID: accountID, Limit: 100,
		Types: []string{string(domain.EventKeyExpiring), string(domain.EventKeyExpired)}})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func containsID(ev domain.Event, id string) bool {
	return len(ev.Data) > 0 && string(ev.Data[:8+len(id)]) == `{"id":"`+id+`"`
}
