package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// T0 is the fixtures' clock: nothing they create reads the real time.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Creator is what the fixtures write through: a *store.Store, or a test's
// wrapper around one (a key cache, a list cache).
type Creator interface {
	CreateAccount(context.Context, domain.Account) error
	CreateAgent(context.Context, domain.Agent) error
	CreateKey(context.Context, domain.APIKey, ...domain.AuditEvent) error
}

// EachEngine runs fn as one subtest per engine of Engines, named after it.
func EachEngine(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range Engines() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

// Account creates an active account "Acme" at T0.
func Account(t testing.TB, s Creator) domain.Account {
	t.Helper()
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, T0), Name: "Acme", Active: true, CreatedAt: T0}
	if err := s.CreateAccount(context.Background(), a); err != nil {
		t.Fatalf("create account: %v", err)
	}
	return a
}

// Agent creates an enabled agent named name in the account, at at.
func Agent(t testing.TB, s Creator, accountID, name string, at time.Time) domain.Agent {
	t.Helper()
	a := domain.Agent{
		ID: domain.NewID(domain.PrefixAgent, at), AccountID: accountID, Name: name,
		Instructions: "be kind", Enabled: true, CreatedAt: at, UpdatedAt: at,
	}
	if err := s.CreateAgent(context.Background(), a); err != nil {
		t.Fatalf("create agent %q: %v", name, err)
	}
	return a
}

// Key creates a live key in the account at T0, with its "created" audit
// event, restricted to agentIDs when any are given.
func Key(t testing.TB, s Creator, accountID string, agentIDs ...string) domain.APIKey {
	t.Helper()
	id := domain.NewID(domain.PrefixKey, T0)
	k := domain.APIKey{
		ID: id, AccountID: accountID, Name: "k", Description: "d", Prefix: "pfx_" + id[len(id)-12:],
		Env: domain.EnvLive, Hash: []byte{1, 2, 3, 0, 255}, Scopes: []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsQuery},
		AgentIDs: agentIDs, RateLimitPerMinute: 120, CreatedAt: T0, CreatedBy: "usr_1",
	}
	if err := s.CreateKey(context.Background(), k, Event(accountID, k.ID, "created", T0)); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return k
}

// Event is an audit event on a key, by user usr_1 (a@example.com).
func Event(accountID, keyID string, action domain.AuditAction, at time.Time) domain.AuditEvent {
	return domain.AuditEvent{
		ID: domain.NewID(domain.PrefixEvent, at), AccountID: accountID, KeyID: keyID,
		Action: action, ActorID: "usr_1", Actor: "a@example.com", CreatedAt: at,
	}
}
