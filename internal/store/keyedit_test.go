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

// TestUpdateKeyAccess, on both engines: scopes, agents and an earlier
// expiry are stored with their event; a later expiry, or none for a key
// that expires, or a revoked key, change nothing (ErrNotFound).
func TestUpdateKeyAccess(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, t0), AccountID: a.ID, Name: "a", Enabled: true, CreatedAt: t0, UpdatedAt: t0}
		if err := s.CreateAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
		exp := t0.Add(30 * 24 * time.Hour)
		k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: a.ID, Name: "k", Prefix: "e00000000001", Env: domain.EnvLive,
			Hash: []byte{1}, Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: t0, ExpiresAt: &exp}
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		ev := func() domain.AuditEvent {
			return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: a.ID, KeyID: k.ID, Action: domain.AuditAccessChanged, CreatedAt: t0}
		}
		scopes := []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsQuery}
		earlier := exp.Add(-time.Hour)
		if err := s.UpdateKeyAccess(ctx, a.ID, k.ID, scopes, []string{ag.ID}, &earlier, ev()); err != nil {
			t.Fatal(err)
		}
		later := exp
		for _, e := range []*time.Time{&later, nil} {
			if err := s.UpdateKeyAccess(ctx, a.ID, k.ID, scopes[:1], nil, e, ev()); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("expiry %v: %v, want ErrNotFound", e, err)
			}
		}
		got, err := s.GetKey(ctx, a.ID, k.ID)
		if err != nil || !slices.Equal(got.Scopes, scopes) || !slices.Equal(got.AgentIDs, []string{ag.ID}) || !got.ExpiresAt.Equal(earlier) {
			t.Fatalf("stored %v %v %v, %v", got.Scopes, got.AgentIDs, got.ExpiresAt, err)
		}
		if evs, _ := s.ListKeyAuditEvents(ctx, a.ID, k.ID); len(evs) != 1 {
			t.Fatalf("%d events, want 1", len(evs))
		}
		if err := s.RevokeKey(ctx, a.ID, k.ID, "", t0, ev()); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateKeyAccess(ctx, a.ID, k.ID, scopes, nil, &earlier, ev()); !errors.Is(err, domain.ErrRevoked) {
			t.Fatalf("revoked key: %v, want ErrRevoked", err)
		}
	})
}

// TestDeleteClaims drops the old claims of a prefix only.
func TestDeleteClaims(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		for _, n := range []string{"console-reveal:ab", "bootstrap"} {
			if won, err := s.Claim(ctx, n); !won || err != nil {
				t.Fatal(n, won, err)
			}
		}
		if err := s.DeleteClaims(ctx, "console-reveal:", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for n, want := range map[string]bool{"console-reveal:ab": true, "bootstrap": false} {
			if won, _ := s.Claim(ctx, n); won != want {
				t.Errorf("claim %s again: %v, want %v", n, won, want)
			}
		}
	})
}
