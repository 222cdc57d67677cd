package keys_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestSetAccess edits a key's scopes, restriction and expiry: an
// authenticator holding the key in memory sees each change on the next
// request, the trail says before and after, and an expiry never moves
// later.
func TestSetAccess(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, w.now), AccountID: w.account.ID, Name: "Support bot", Enabled: true, CreatedAt: w.now, UpdatedAt: w.now}
	if err := w.st.CreateAgent(ctx, ag); err != nil {
		t.Fatal(err)
	}
	exp := w.now.Add(30 * 24 * time.Hour)
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	var background sync.WaitGroup
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: w.st, Background: &background})
	if err != nil {
		t.Fatal(err)
	}
	defer background.Wait()
	if k, err := a.Authenticate(ctx, c.Credential, w.now); err != nil || len(k.Scopes) != 1 {
		t.Fatalf("before: %v %v", k.Scopes, err)
	}
	earlier := w.now.Add(7 * 24 * time.Hour)
	want := keys.Access{Scopes: []domain.Scope{domain.ScopeAgentsQuery, domain.ScopeAgentsRead}, AgentIDs: []string{ag.ID}, ExpiresAt: &earlier}
	if _, err := w.svc.SetAccess(ctx, actor, w.account.ID, c.Key.ID, want); err != nil {
		t.Fatal(err)
	}
	k, err := a.Authenticate(ctx, c.Credential, w.now)
	if err != nil || !slices.Contains(k.Scopes, domain.ScopeAgentsQuery) || !slices.Equal(k.AgentIDs, want.AgentIDs) || !k.ExpiresAt.Equal(earlier) {
		t.Fatalf("after: %v %v %v, %v", k.Scopes, k.AgentIDs, k.ExpiresAt, err)
	}
	events := setAccessCheckTrail(t, w, c.Key.ID, exp, earlier)

	setAccessCheckNeverLater(t, w, actor, c.Key.ID, want.Scopes, exp, earlier)
	n := len(events)
	if _, err := w.svc.SetAccess(ctx, actor, w.account.ID, c.Key.ID, want); err != nil {
		t.Fatal(err)
	}
	if again, _ := w.st.ListKeyAuditEvents(ctx, w.account.ID, c.Key.ID); len(again) != n {
		t.Errorf("an edit that changes nothing recorded %d events", len(again)-n)
	}
	if err := w.svc.Revoke(ctx, actor, w.account.ID, c.Key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.SetAccess(ctx, actor, w.account.ID, c.Key.ID, keys.Access{Scopes: want.Scopes}); !domain.IsCode(err, domain.CodeImmutableState) {
		t.Errorf("revoked key: %v, want immutable_state", err)
	}
}

// setAccessCheckTrail: the key's trail ends with an access_changed event
// saying the scopes, AI agents and expiry (exp, now earlier) before and
// after; it returns the trail.
func setAccessCheckTrail(t *testing.T, w *world, keyID string, exp, earlier time.Time) []domain.AuditEvent {
	t.Helper()
	events, err := w.st.ListKeyAuditEvents(context.Background(), w.account.ID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if events[0].Action == domain.AuditAccessChanged {
		last = events[0]
	}
	for _, part := range []string{"scopes: aiagents:read → aiagents:read, aiagents:query", `AI agents: every AI agent → "Support bot"`,
		"expires: " + exp.Format("2006-01-02 15:04:05 UTC") + " → " + earlier.Format("2006-01-02 15:04:05 UTC")} {
		if last.Action != domain.AuditAccessChanged || !strings.Contains(last.Detail, part) {
			t.Errorf("event %s %q lacks %q", last.Action, last.Detail, part)
		}
	}
	return events
}

// setAccessCheckNeverLater: an edit moving the key's expiry (earlier) later
// (to exp) or to never is refused with a field error, and changes nothing.
func setAccessCheckNeverLater(t *testing.T, w *world, actor keys.Actor, keyID string, scopes []domain.Scope, exp, earlier time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		expires *time.Time
	}{{"later", &exp}, {"never", nil}} {
		_, err := w.svc.SetAccess(ctx, actor, w.account.ID, keyID, keys.Access{Scopes: scopes, ExpiresAt: tc.expires})
		var de *domain.Error
		if !errors.As(err, &de) || len(de.Fields) != 1 || de.Fields[0].Field != "expires_at" {
			t.Errorf("%s: %v, want a field error on expires_at", tc.name, err)
		}
	}
	if k, _ := w.svc.Get(ctx, w.account.ID, keyID); !k.ExpiresAt.Equal(earlier) || len(k.AgentIDs) != 1 {
		t.Errorf("a refused edit changed the key: %v %v", k.ExpiresAt, k.AgentIDs)
	}
}
