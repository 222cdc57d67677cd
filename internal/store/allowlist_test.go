package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// A key's allowlist is stored with it, read back in canonical form, and a
// change made through one store reaches another store's key memory on its
// next lookup (the epoch bump), with its audit event; another account's key
// is ErrNotFound.
func TestKeyAllowedIPs(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		s1, s2 := storetest.OpenTwo(t, engine)
		a, other := storetest.Account(t, s1), storetest.Account(t, s1)
		k := keyAllowedIPsCreate(t, s1, s2, a.ID)
		keyAllowedIPsCheckNarrow(t, s1, s2, a.ID, other.ID, k)
		keyAllowedIPsCheckClear(t, s1, s2, a.ID, k)
	})
}

// keyAllowedIPsCreate creates a key with an allowlist through s1 and checks
// s2 reads it back in canonical form.
func keyAllowedIPsCreate(t *testing.T, s1, s2 *store.Store, accountID string) domain.APIKey {
	t.Helper()
	ctx := context.Background()
	list, err := domain.ParseAllowList("127.0.0.2, 10.0.0.0/8 ::1")
	if err != nil {
		t.Fatal(err)
	}
	k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: accountID, Name: "ips", Prefix: "ipsipsipsip1", Env: domain.EnvLive,
		Hash: []byte("h"), Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: t0, AllowedIPs: list}
	if err := s1.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, _, err := s2.ReadKeyByPrefix(ctx, k.Prefix)
	if err != nil || !slices.Equal(got.AllowedIPs.Strings(), []string{"127.0.0.2", "10.0.0.0/8", "::1"}) {
		t.Fatalf("read back: %q %v", got.AllowedIPs.Strings(), err)
	}
	return k
}

// keyAllowedIPsCheckNarrow checks another account cannot change the list,
// and that the account's narrowing through s1 reaches s2 with its audit
// event.
func keyAllowedIPsCheckNarrow(t *testing.T, s1, s2 *store.Store, accountID, otherID string, k domain.APIKey) {
	t.Helper()
	ctx := context.Background()
	ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: otherID, KeyID: k.ID,
		Action: domain.AuditAllowedIPsChanged, Actor: "support", CreatedAt: t0}
	if err := s1.SetKeyAllowedIPs(ctx, otherID, k.ID, nil, ev); err != domain.ErrNotFound {
		t.Fatalf("another account's key: %v", err)
	}
	narrowed, _ := domain.ParseAllowList("192.0.2.1")
	ev.AccountID = accountID
	if err := s1.SetKeyAllowedIPs(ctx, accountID, k.ID, narrowed, ev); err != nil {
		t.Fatal(err)
	}
	got, _, err := s2.ReadKeyByPrefix(ctx, k.Prefix)
	if err != nil || !slices.Equal(got.AllowedIPs.Strings(), []string{"192.0.2.1"}) {
		t.Fatalf("the other store still holds %q (%v)", got.AllowedIPs.Strings(), err)
	}
	evs, err := s1.ListKeyAuditEvents(ctx, accountID, k.ID)
	if err != nil || len(evs) != 1 || evs[0].Action != domain.AuditAllowedIPsChanged {
		t.Fatalf("audit: %+v %v", evs, err)
	}
}

// keyAllowedIPsCheckClear clears the list through s1 and checks s2 reads
// it empty.
func keyAllowedIPsCheckClear(t *testing.T, s1, s2 *store.Store, accountID string, k domain.APIKey) {
	t.Helper()
	ctx := context.Background()
	if err := s1.SetKeyAllowedIPs(ctx, accountID, k.ID, nil, domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: accountID, KeyID: k.ID,
		Action: domain.AuditAllowedIPsChanged, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s2.ReadKeyByPrefix(ctx, k.Prefix); len(got.AllowedIPs) != 0 {
		t.Fatalf("cleared list reads %q", got.AllowedIPs.Strings())
	}
}

// TestKeyHistoryIsCommitOrder: a change to a key committed after another
// is later in the key's history even when its clock was read earlier (a
// revocation that waited for an edit's row lock): the history never shows
// the edit after the revocation. A revoked key's allowed addresses then
// cannot change (ErrRevoked) and nothing is recorded.
func TestKeyHistoryIsCommitOrder(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		s := storetest.Open(t, engine)
		a := storetest.Account(t, s)
		k := storetest.Key(t, s, a.ID)
		edit := storetest.Event(a.ID, k.ID, domain.AuditAllowedIPsChanged, t0.Add(10*time.Second))
		narrowed, _ := domain.ParseAllowList("192.0.2.1")
		if err := s.SetKeyAllowedIPs(ctx, a.ID, k.ID, narrowed, edit); err != nil {
			t.Fatal(err)
		}
		revokedAt := t0.Add(5 * time.Second) // its clock read before the edit's
		if err := s.RevokeKey(ctx, a.ID, k.ID, "usr_1", revokedAt, storetest.Event(a.ID, k.ID, domain.AuditRevoked, revokedAt)); err != nil {
			t.Fatal(err)
		}
		err := s.SetKeyAllowedIPs(ctx, a.ID, k.ID, nil, storetest.Event(a.ID, k.ID, domain.AuditAllowedIPsChanged, t0.Add(20*time.Second)))
		if !errors.Is(err, domain.ErrRevoked) {
			t.Fatalf("a revoked key's allowed addresses: %v, want ErrRevoked", err)
		}
		evs, err := s.ListKeyAuditEvents(ctx, a.ID, k.ID)
		if err != nil || len(evs) != 3 || evs[0].Action != domain.AuditRevoked || evs[1].Action != domain.AuditAllowedIPsChanged ||
			!evs[0].CreatedAt.After(evs[1].CreatedAt) {
			t.Fatalf("history, newest first: %+v %v; want revoked after the edit", evs, err)
		}
		got, err := s.GetKey(ctx, a.ID, k.ID)
		if err != nil || !slices.Equal(got.AllowedIPs, narrowed) {
			t.Fatalf("the revoked key's allowed addresses: %v %v", got.AllowedIPs, err)
		}
	})
}
