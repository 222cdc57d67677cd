package keys_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestRevokeLeaked: a reported credential of ours is revoked once, with
// its audit event and a new key epoch; a replay, a revoked key, another
// key's prefix with a wrong secret and tokens not ours change nothing.
func TestRevokeLeaked(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			w := newRevokeLeakedWorld(t, engine)
			leaked, bystander, revoked := w.create(t, "leaked"), w.create(t, "bystander"), w.create(t, "revoked by hand")
			if err := w.svc.Revoke(w.ctx, keys.Actor{User: &w.owner}, w.acct.ID, revoked.Key.ID); err != nil {
				t.Fatal(err)
			}

			revokeLeakedCheckNotOurs(t, w, bystander)

			url := "https://github.com/o/r/blob/main/.env\x00\x1b[31m"
			revokeLeakedCheckReported(t, w, leaked, url)

			// Replayed: ours, nothing revoked, no second event.
			w.now = w.now.Add(time.Minute)
			revokeLeakedCheckReplays(t, w, leaked, revoked, url)

			revokeLeakedCheckRecent(t, w, leaked)
		})
	}
}

// revokeLeakedWorld is TestRevokeLeaked's store, service and clock, with
// one account and its owner.
type revokeLeakedWorld struct {
	ctx   context.Context
	st    *store.Store
	svc   *keys.Service
	now   time.Time
	acct  domain.Account
	owner domain.User
}

func newRevokeLeakedWorld(t *testing.T, engine string) *revokeLeakedWorld {
	t.Helper()
	w := &revokeLeakedWorld{ctx: context.Background(), st: storetest.Open(t, engine)}
	w.now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	w.svc = keys.New(w.st, func() time.Time { return w.now })
	w.acct = domain.Account{ID: domain.NewID(domain.PrefixAccount, w.now), Name: "Acme", Active: true, CreatedAt: w.now}
	if err := w.st.CreateAccount(w.ctx, w.acct); err != nil {
		t.Fatal(err)
	}
	w.owner = domain.User{ID: domain.NewID(domain.PrefixUser, w.now), AccountID: w.acct.ID, Email: "o@acme.test",
		Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: w.now}
	if err := w.st.CreateUser(w.ctx, w.owner); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *revokeLeakedWorld) create(t *testing.T, name string) keys.Created {
	t.Helper()
	c, err := w.svc.Create(w.ctx, keys.Actor{User: &w.owner}, keys.CreateParams{AccountID: w.acct.ID, Name: name, Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (w *revokeLeakedWorld) events(t *testing.T, keyID string) []domain.AuditEvent {
	t.Helper()
	evs, err := w.st.ListKeyAuditEvents(w.ctx, w.acct.ID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// revokeLeakedCheckNotOurs: tokens not ours, malformed or with the
// bystander's prefix but another secret revoke nothing.
func revokeLeakedCheckNotOurs(t *testing.T, w *revokeLeakedWorld, bystander keys.Created) {
	t.Helper()
	// Our prefix, a secret that is not the key's, the checksum
	// recomputed: well formed, but not ours.
	forged := secretscantest.Forged(bystander.Credential)
	// The checksum's last character changed (to another: the
	// credential may end in either).
	last := "Z"
	if strings.HasSuffix(bystander.Credential, last) {
		last = "Y"
	}
	if _, err := credential.Parse(forged); err != nil {
		t.Fatalf("forged token does not parse: %v", err)
	}
	for name, token := range map[string]string{
		"not ours":     "ghp_" + strings.Repeat("a", 36),
		"bad checksum": bystander.Credential[:len(bystander.Credential)-1] + last,
		"wrong secret": forged,
		"unknown key":  unknownCredential(t),
		"empty":        "",
		"whitespace":   " " + bystander.Credential,
	} {
		l, err := w.svc.RevokeLeaked(w.ctx, token, "https://github.com/o/r")
		if err != nil || l.Ours || l.Revoked {
			t.Fatalf("%s: %+v, %v; want not ours", name, l, err)
		}
	}
	if k, _ := w.svc.Get(w.ctx, w.acct.ID, bystander.Key.ID); k.RevokedAt != nil {
		t.Fatal("a token with the bystander's prefix but another secret revoked it")
	}
}

// revokeLeakedCheckReported: the first report of the leaked key revokes
// it, writes its audit event and moves the key epoch on.
func revokeLeakedCheckReported(t *testing.T, w *revokeLeakedWorld, leaked keys.Created, url string) {
	t.Helper()
	l, err := w.svc.RevokeLeaked(w.ctx, leaked.Credential, url)
	if err != nil || !l.Ours || !l.Revoked || l.Key.ID != leaked.Key.ID || l.Key.Hash != nil {
		t.Fatalf("leaked: %+v, %v", l, err)
	}
	k, err := w.svc.Get(w.ctx, w.acct.ID, leaked.Key.ID)
	if err != nil || k.RevokedAt == nil || !k.RevokedAt.Equal(w.now) {
		t.Fatalf("not revoked: %+v, %v", k, err)
	}
	evs := w.events(t, leaked.Key.ID)
	if len(evs) != 2 || evs[0].Action != "revoked" || evs[0].Actor != keys.LeakActor ||
		evs[0].Detail != "reported leaked at https://github.com/o/r/blob/main/.env[31m" {
		t.Fatalf("audit events %+v", evs)
	}
	// The key epoch moved on: the lookup above left the key in this
	// store's cache, active, and the next lookup must not serve it.
	if got, _, err := w.st.ReadKeyByPrefix(w.ctx, leaked.Key.Prefix); err != nil || got.RevokedAt == nil {
		t.Fatalf("ReadKeyByPrefix after the leak report: %+v, %v", got, err)
	}
}

// revokeLeakedCheckReplays: a replayed report and a report of a key
// revoked by hand are ours but revoke nothing and write no event.
func revokeLeakedCheckReplays(t *testing.T, w *revokeLeakedWorld, leaked, revoked keys.Created, url string) {
	t.Helper()
	l, err := w.svc.RevokeLeaked(w.ctx, leaked.Credential, url)
	if err != nil || !l.Ours || l.Revoked {
		t.Fatalf("replay: %+v, %v", l, err)
	}
	if n := len(w.events(t, leaked.Key.ID)); n != 2 {
		t.Fatalf("replay wrote an event: %d events", n)
	}
	// Revoked by hand before: ours, left as it was.
	l, err = w.svc.RevokeLeaked(w.ctx, revoked.Credential, url)
	if err != nil || !l.Ours || l.Revoked {
		t.Fatalf("already revoked: %+v, %v", l, err)
	}
	if evs := w.events(t, revoked.Key.ID); len(evs) != 2 || evs[0].Actor != w.owner.Email {
		t.Fatalf("already revoked key's events %+v", evs)
	}
}

// revokeLeakedCheckRecent: the banner's list holds the leak only, newest
// first, in the window.
func revokeLeakedCheckRecent(t *testing.T, w *revokeLeakedWorld, leaked keys.Created) {
	t.Helper()
	leaks, err := w.svc.RecentLeaks(w.ctx, w.acct.ID, w.now.Add(-30*24*time.Hour))
	if err != nil || len(leaks) != 1 || leaks[0].Event.KeyID != leaked.Key.ID || leaks[0].URL != "https://github.com/o/r/blob/main/.env[31m" {
		t.Fatalf("RecentLeaks = %+v, %v", leaks, err)
	}
	if leaks, err := w.svc.RecentLeaks(w.ctx, w.acct.ID, w.now.Add(time.Second)); err != nil || len(leaks) != 0 {
		t.Fatalf("RecentLeaks after the window = %+v, %v", leaks, err)
	}
}

func unknownCredential(t *testing.T) string {
	t.Helper()
	c, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	return c.Text
}
