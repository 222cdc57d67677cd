package keys_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestAuditActionsAreTyped runs every change the service records and
// checks that the trail holds only domain.AuditActions, each of them once
// at least but the one the authenticator writes (expired_in_use) and the
// users' (internal/accounts).
func TestAuditActionsAreTyped(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"rename", func() error { _, err := w.svc.Rename(ctx, actor, w.account.ID, c.Key.ID, "k2", ""); return err }},
		{"describe", func() error { _, err := w.svc.Rename(ctx, actor, w.account.ID, c.Key.ID, "k2", "about"); return err }},
		{"rate limit", func() error { return w.svc.SetRateLimit(ctx, c.Key.ID, 7) }},
		{"allowed ips", func() error {
			list, err := domain.ParseAllowList("192.0.2.0/24")
			if err != nil {
				return err
			}
			_, err = w.svc.SetAllowedIPs(ctx, actor, w.account.ID, c.Key.ID, list)
			return err
		}},
		{"access", func() error {
			_, err := w.svc.SetAccess(ctx, actor, w.account.ID, c.Key.ID, keys.Access{Scopes: []domain.Scope{domain.ScopeAgentsQuery}})
			return err
		}},
		{"rotate", func() error { _, err := w.svc.Rotate(ctx, actor, w.account.ID, c.Key.ID, nil); return err }},
		{"revoke", func() error { return w.svc.Revoke(ctx, actor, w.account.ID, c.Key.ID) }},
		{"key policy", func() error {
			_, err := w.svc.SetPolicy(ctx, actor, w.account.ID, domain.KeyPolicy{MaxKeyLifetimeDays: 30})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
	events, err := w.st.ListAuditEvents(ctx, w.account.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[domain.AuditAction]bool{}
	for _, ev := range events {
		a := ev.Action
		if !slices.Contains(domain.AuditActions, a) {
			t.Errorf("event %s has action %q, not a domain.AuditAction", ev.ID, ev.Action)
		}
		seen[a] = true
	}
	for _, a := range domain.AuditActions {
		background := a == domain.AuditExpiredInUse || a == domain.AuditAnomaly || a == domain.AuditNoticeDismissed
		if !seen[a] && !background && !slices.Contains(domain.UserAuditActions, a) && !slices.Contains(domain.WebhookAuditActions, a) {
			t.Errorf("no event recorded %q", a)
		}
	}
}
