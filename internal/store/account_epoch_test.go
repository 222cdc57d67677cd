package store_test

import (
	"context"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestKeyChangesNameTheAccount: a change to a key, or to its account,
// records the key epoch it raised against that account only; the check
// finds no legacy change while every writer records accounts.
func TestKeyChangesNameTheAccount(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		ka := storetest.Key(t, s, a.ID)
		storetest.Key(t, s, b.ID)
		before, err := readEpoch(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, ka.CreatedAt), AccountID: a.ID, KeyID: ka.ID, Action: "rate_limit_changed", Actor: "test", CreatedAt: ka.CreatedAt}
		if err := s.SetKeyRateLimit(ctx, ka.ID, 7, ev); err != nil {
			t.Fatal(err)
		}
		after, err := readEpoch(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := s.KeyChangesSince(ctx, before.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 1 || ch[a.ID] != after.Epoch || after.Epoch != before.Epoch+1 {
			t.Fatalf("changes since %d: %v (epoch now %d), want only %s at %d", before.Epoch, ch, after.Epoch, a.ID, before.Epoch+1)
		}
		if after.Legacy > before.Epoch {
			t.Fatalf("legacy %d above %d with no legacy writer", after.Legacy, before.Epoch)
		}
		if err := s.SetAccountActive(ctx, b.ID, false); err != nil {
			t.Fatal(err)
		}
		if ch, err = s.KeyChangesSince(ctx, after.Epoch); err != nil || len(ch) != 1 || ch[b.ID] != after.Epoch+1 {
			t.Fatalf("changes since %d: %v, %v; want only %s", after.Epoch, ch, err, b.ID)
		}
	})
}

// TestLegacyBumpIsSeen: a 1.2 instance raises the key epoch without naming
// an account; the check says so (Legacy), before and after a later change
// that names one, so that a 1.3 instance drops every key it holds.
func TestLegacyBumpIsSeen(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		start, err := readEpoch(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.LegacyBump(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := readEpoch(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if m.Epoch != start.Epoch+1 || m.Legacy != m.Epoch {
			t.Fatalf("after a legacy bump: %+v, want epoch and legacy %d", m, start.Epoch+1)
		}
		if err := s.SetAccountActive(ctx, a.ID, false); err != nil {
			t.Fatal(err)
		}
		if m, err = readEpoch(ctx, s); err != nil || m.Epoch != start.Epoch+2 || m.Legacy != start.Epoch+1 {
			t.Fatalf("after a later change: %+v, %v; want legacy %d", m, err, start.Epoch+1)
		}
	})
}

// epochMark is the key epoch and its legacy part, as one read found them.
type epochMark struct{ Epoch, Legacy int64 }

func readEpoch(ctx context.Context, s *store.Store) (epochMark, error) {
	e, l, err := s.ReadKeyEpoch(ctx)
	return epochMark{e, l}, err
}
