package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/wire"
)

// eventLog follows one account's events from where it last read, as a
// consumer of GET /v1/events does.
type eventLog struct {
	t    *testing.T
	s    *store.Store
	acct string
	last int64
}

// next returns the events recorded since the previous call.
func (l *eventLog) next() []domain.Event {
	l.t.Helper()
	evs, err := l.s.ListEvents(context.Background(), store.EventQuery{AccountID: l.acct, AfterSeq: l.last, Limit: 1000})
	if err != nil {
		l.t.Fatal(err)
	}
	if len(evs) > 0 {
		l.last = evs[len(evs)-1].Seq
	}
	return evs
}

// one asserts that exactly one event of typ was recorded since the
// previous call and returns it.
func (l *eventLog) one(what string, typ domain.EventType) domain.Event {
	l.t.Helper()
	evs := l.next()
	if len(evs) != 1 || evs[0].Type != typ {
		l.t.Fatalf("%s: events %v, want one %s", what, eventTypes(evs), typ)
	}
	return evs[0]
}

// none asserts that nothing was recorded since the previous call.
func (l *eventLog) none(what string) {
	l.t.Helper()
	if evs := l.next(); len(evs) != 0 {
		l.t.Fatalf("%s: events %v, want none", what, eventTypes(evs))
	}
}

func eventTypes(evs []domain.Event) []domain.EventType {
	var out []domain.EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// sameJSON fails unless got and want encode to the same JSON object.
func sameJSON(t *testing.T, what string, got json.RawMessage, want any) {
	t.Helper()
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g1, w1 any
	if err := json.Unmarshal(got, &g1); err != nil {
		t.Fatalf("%s: %q: %v", what, got, err)
	}
	if err := json.Unmarshal(w, &w1); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g1)
	wb, _ := json.Marshal(w1)
	if string(gb) != string(wb) {
		t.Fatalf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

// keyData checks that ev's data is the key as GET /me shows it now.
func keyData(t *testing.T, s *store.Store, ev domain.Event, accountID, id string) {
	t.Helper()
	k, err := s.GetKey(context.Background(), accountID, id)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, string(ev.Type)+" data", ev.Data, wire.MeOf(k))
}

func userAudit(accountID, keyID string) domain.AuditEvent {
	return storetest.Event(accountID, keyID, domain.AuditAccessChanged, t0)
}

// TestKeyWritesRecordTheirEvent, on both engines: every key write records
// one event of its type, in its transaction, whose data is the key as GET
// /me shows it after the change, with the old values of what an update
// changed, the request id of the context and the actor of the audit
// entries; a write that changes nothing records none.
func TestKeyWritesRecordTheirEvent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := domain.WithRequestID(context.Background(), "req_abc")
		a := storetest.Account(t, s)
		log := &eventLog{t: t, s: s, acct: a.ID}
		k := storetest.Key(t, s, a.ID)
		ev := log.one("CreateKey", domain.EventKeyCreated)
		keyData(t, s, ev, a.ID, k.ID)
		if ev.Actor == nil || *ev.Actor != (domain.EventActor{Type: "user", ID: "usr_1"}) {
			t.Fatalf("CreateKey actor %+v, want user usr_1", ev.Actor)
		}

		checkRateLimitEvent(t, ctx, s, log, k)
		checkAllowedIPsEvent(t, ctx, s, log, k)
		checkAccessAndTextEvents(t, ctx, s, log, k)
		checkRetiringEvents(t, ctx, s, log, k)
		checkRevokeEvents(t, ctx, s, log, a.ID)
	})
}

func checkRateLimitEvent(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, k domain.APIKey) {
	t.Helper()
	support := func() domain.AuditEvent {
		return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: k.AccountID, KeyID: k.ID,
			Action: domain.AuditAccessChanged, Actor: "support", CreatedAt: t0}
	}
	if err := s.SetKeyRateLimit(ctx, k.ID, 300, support()); err != nil {
		t.Fatal(err)
	}
	ev := log.one("SetKeyRateLimit", domain.EventKeyUpdated)
	keyData(t, s, ev, k.AccountID, k.ID)
	sameJSON(t, "rate limit previous_attributes", ev.Previous, map[string]any{"rate_limit_per_minute": 120})
	if ev.RequestID != "req_abc" {
		t.Fatalf("request id %q, want req_abc", ev.RequestID)
	}
	if ev.Actor == nil || *ev.Actor != (domain.EventActor{Type: "system", ID: "support"}) {
		t.Fatalf("support actor %+v", ev.Actor)
	}
	if err := s.SetKeyRateLimit(ctx, k.ID, 300, support()); err != nil {
		t.Fatal(err)
	}
	log.none("SetKeyRateLimit to the same ceiling")
}

func checkAllowedIPsEvent(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, k domain.APIKey) {
	t.Helper()
	list, err := domain.NewAllowList([]string{"203.0.113.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeyAllowedIPs(ctx, k.AccountID, k.ID, list, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	ev := log.one("SetKeyAllowedIPs", domain.EventKeyUpdated)
	keyData(t, s, ev, k.AccountID, k.ID)
	sameJSON(t, "allowed_ips previous_attributes", ev.Previous, map[string]any{"allowed_ips": []string{}})
	if err := s.SetKeyAllowedIPs(ctx, k.AccountID, k.ID, list, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	log.none("SetKeyAllowedIPs to the same list")
}

func checkAccessAndTextEvents(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, k domain.APIKey) {
	t.Helper()
	scopes := []domain.Scope{domain.ScopeAgentsRead}
	if err := s.UpdateKeyAccess(ctx, k.AccountID, k.ID, scopes, nil, nil, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	ev := log.one("UpdateKeyAccess", domain.EventKeyUpdated)
	keyData(t, s, ev, k.AccountID, k.ID)
	sameJSON(t, "scopes previous_attributes", ev.Previous, map[string]any{"scopes": k.Scopes})
	if err := s.UpdateKeyAccess(ctx, k.AccountID, k.ID, scopes, nil, nil, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	log.none("UpdateKeyAccess to the same access")

	if err := s.UpdateKeyText(ctx, k.AccountID, k.ID, "renamed", k.Description, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	ev = log.one("UpdateKeyText", domain.EventKeyUpdated)
	keyData(t, s, ev, k.AccountID, k.ID)
	sameJSON(t, "name previous_attributes", ev.Previous, map[string]any{"name": k.Name})
	if err := s.UpdateKeyText(ctx, k.AccountID, k.ID, "renamed", k.Description, userAudit(k.AccountID, k.ID)); err != nil {
		t.Fatal(err)
	}
	log.none("UpdateKeyText to the same text")
}

// checkRetiringEvents: a rotation creates the new key and moves the old
// one's expiry, each with its event, in one transaction.
func checkRetiringEvents(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, old domain.APIKey) {
	t.Helper()
	id := domain.NewID(domain.PrefixKey, t0)
	nk := domain.APIKey{ID: id, AccountID: old.AccountID, Name: "k2", Prefix: "pfx_" + id[len(id)-12:], Env: domain.EnvLive,
		Hash: []byte{9}, Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 60, CreatedAt: t0, RotatedFrom: old.ID}
	at := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Millisecond)
	if err := s.CreateKeyRetiring(ctx, nk, old.ID, at, storetest.Event(old.AccountID, nk.ID, "rotated", t0)); err != nil {
		t.Fatal(err)
	}
	evs := log.next()
	if len(evs) != 2 {
		t.Fatalf("CreateKeyRetiring: events %v, want api_key.updated (old) and api_key.created (new)", eventTypes(evs))
	}
	byType := map[domain.EventType]domain.Event{evs[0].Type: evs[0], evs[1].Type: evs[1]}
	upd, cre := byType[domain.EventKeyUpdated], byType[domain.EventKeyCreated]
	if upd.ID == "" || cre.ID == "" {
		t.Fatalf("CreateKeyRetiring: events %v", eventTypes(evs))
	}
	keyData(t, s, upd, old.AccountID, old.ID)
	keyData(t, s, cre, old.AccountID, nk.ID)
	sameJSON(t, "retired previous_attributes", upd.Previous, map[string]any{"expires_at": nil})
}

// checkRevokeEvents: revoked by a user (api_key.revoked) or by secret
// scanning (api_key.leaked with its source and actor); revoking again
// records nothing.
func checkRevokeEvents(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, accountID string) {
	t.Helper()
	k := storetest.Key(t, s, accountID)
	log.one("CreateKey", domain.EventKeyCreated)
	at := t0.Add(time.Hour)
	if err := s.RevokeKey(ctx, accountID, k.ID, "usr_1", at, storetest.Event(accountID, k.ID, domain.AuditRevoked, at)); err != nil {
		t.Fatal(err)
	}
	ev := log.one("RevokeKey", domain.EventKeyRevoked)
	keyData(t, s, ev, accountID, k.ID)
	if ev.Previous != nil {
		t.Fatalf("revoked carries previous_attributes %s", ev.Previous)
	}
	if err := s.RevokeKey(ctx, accountID, k.ID, "usr_1", at, storetest.Event(accountID, k.ID, domain.AuditRevoked, at)); err != nil {
		t.Fatal(err)
	}
	log.none("RevokeKey of a revoked key")

	leaked := storetest.Key(t, s, accountID)
	log.one("CreateKey", domain.EventKeyCreated)
	scan := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, at), AccountID: accountID, KeyID: leaked.ID,
		Action: domain.AuditRevoked, Actor: "secret_scanning", CreatedAt: at}
	if err := s.RevokeLeakedKey(context.Background(), accountID, leaked.ID, at, "github", scan); err != nil {
		t.Fatal(err)
	}
	ev = log.one("RevokeLeakedKey", domain.EventKeyLeaked)
	keyData(t, s, ev, accountID, leaked.ID)
	sameJSON(t, "leaked extra", ev.Extra, map[string]any{"source": "github"})
	if ev.Actor == nil || *ev.Actor != (domain.EventActor{Type: "system", ID: "secret_scanning"}) || ev.RequestID != "" {
		t.Fatalf("leaked actor %+v request id %q", ev.Actor, ev.RequestID)
	}
	if err := s.RevokeLeakedKey(context.Background(), accountID, leaked.ID, at, "github", scan); err != nil {
		t.Fatal(err)
	}
	log.none("RevokeLeakedKey of a revoked key")
}

// TestAgentWritesRecordTheirEvent, on both engines: create, rename,
// disable and enable each record their event with the agent as the API
// shows it; a rename to the same name, disabling a disabled agent and a
// create refused as a duplicate record none.
func TestAgentWritesRecordTheirEvent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := domain.WithRequestID(context.Background(), "req_agent")
		a := storetest.Account(t, s)
		log := &eventLog{t: t, s: s, acct: a.ID}
		ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, t0), AccountID: a.ID, Name: "Scout", Instructions: "x",
			Enabled: true, CreatedAt: t0, UpdatedAt: t0}
		if err := s.CreateAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
		ev := log.one("CreateAgent", domain.EventAgentCreated)
		sameJSON(t, "created data", ev.Data, wire.AgentOf(ag))
		if ev.RequestID != "req_agent" || ev.AgentID != ag.ID {
			t.Fatalf("created: request id %q agent %q", ev.RequestID, ev.AgentID)
		}

		dup := ag
		dup.ID = domain.NewID(domain.PrefixAgent, t0)
		var de *domain.DuplicateError
		if err := s.CreateAgent(ctx, dup); !errors.As(err, &de) {
			t.Fatalf("duplicate create: %v", err)
		}
		log.none("a create refused as a duplicate")

		checkAgentUpdates(t, ctx, s, log, ag)
	})
}

func checkAgentUpdates(t *testing.T, ctx context.Context, s *store.Store, log *eventLog, ag domain.Agent) {
	t.Helper()
	at := t0.Add(time.Minute)
	update := func(what string, fn func(*domain.Agent)) domain.Agent {
		t.Helper()
		out, err := s.UpdateAgent(ctx, ag.AccountID, ag.ID, func(a *domain.Agent) (bool, error) {
			fn(a)
			a.UpdatedAt = at
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return out
	}
	got := update("rename", func(a *domain.Agent) { a.Name = "Ranger" })
	ev := log.one("rename", domain.EventAgentUpdated)
	sameJSON(t, "renamed data", ev.Data, wire.AgentOf(got))
	sameJSON(t, "rename previous_attributes", ev.Previous, map[string]any{"name": "Scout"})

	update("rename to the same name", func(a *domain.Agent) { a.Name = "Ranger" })
	log.none("rename to the same name")

	got = update("disable", func(a *domain.Agent) { a.Enabled = false })
	ev = log.one("disable", domain.EventAgentDisabled)
	sameJSON(t, "disabled data", ev.Data, wire.AgentOf(got))

	update("disable a disabled agent", func(a *domain.Agent) { a.Enabled = false })
	log.none("disabling a disabled agent")

	got = update("enable", func(a *domain.Agent) { a.Enabled = true })
	ev = log.one("enable", domain.EventAgentEnabled)
	sameJSON(t, "enabled data", ev.Data, wire.AgentOf(got))

	other := storetest.Agent(t, s, ag.AccountID, "Other", t0)
	log.one("CreateAgent", domain.EventAgentCreated)
	_, err := s.UpdateAgent(ctx, ag.AccountID, other.ID, func(a *domain.Agent) (bool, error) {
		a.Name = "Ranger"
		return true, nil
	})
	var de *domain.DuplicateError
	if !errors.As(err, &de) {
		t.Fatalf("rename onto another agent's name: %v", err)
	}
	log.none("a rename refused as a duplicate")
}
