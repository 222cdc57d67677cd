package keys_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestRevokeLeaked: a reported credential of ours is revoked once, with
// its audit event and a new key epoch; a replay, a revoked key, another
// key's prefix with a wrong secret and tokens not ours change nothing.
func TestRevokeLeaked(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			st := storetest.Open(t, engine)
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			svc := keys.New(st, func() time.Time { return now })
			acct := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Acme", Active: true, CreatedAt: now}
			if err := st.CreateAccount(ctx, acct); err != nil {
				t.Fatal(err)
			}
			owner := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: acct.ID, Email: "o@acme.test",
				Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
			if err := st.CreateUser(ctx, owner); err != nil {
				t.Fatal(err)
			}
			mk := func(name string) keys.Created {
				c, err := svc.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{AccountID: acct.ID, Name: name, Scopes: []domain.Scope{domain.ScopeAgentsRead}})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			leaked, bystander, revoked := mk("leaked"), mk("bystander"), mk("revoked by hand")
			if err := svc.Revoke(ctx, keys.Actor{User: &owner}, acct.ID, revoked.Key.ID); err != nil {
				t.Fatal(err)
			}
			events := func(keyID string) []domain.AuditEvent {
				t.Helper()
				evs, err := st.ListKeyAuditEvents(ctx, acct.ID, keyID)
				if err != nil {
					t.Fatal(err)
				}
				return evs
			}

			// Our prefix, a secret that is not the key's, the checksum
			// recomputed: well formed, but not ours.
			body := []byte(bystander.Credential[:len(bystander.Credential)-credential.ChecksumLen])
			if body[22] == 'a' {
				body[22] = 'b'
			} else {
				body[22] = 'a'
			}
			forged := string(body) + credential.Checksum(string(body))
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
				l, err := svc.RevokeLeaked(ctx, token, "https://github.com/o/r")
				if err != nil || l.Ours || l.Revoked {
					t.Fatalf("%s: %+v, %v; want not ours", name, l, err)
				}
			}
			if k, _ := svc.Get(ctx, acct.ID, bystander.Key.ID); k.RevokedAt != nil {
				t.Fatal("a token with the bystander's prefix but another secret revoked it")
			}

			url := "https://github.com/o/r/blob/main/.env\x00\x1b[31m"
			l, err := svc.RevokeLeaked(ctx, leaked.Credential, url)
			if err != nil || !l.Ours || !l.Revoked || l.Key.ID != leaked.Key.ID || l.Key.Hash != nil {
				t.Fatalf("leaked: %+v, %v", l, err)
			}
			k, err := svc.Get(ctx, acct.ID, leaked.Key.ID)
			if err != nil || k.RevokedAt == nil || !k.RevokedAt.Equal(now) {
				t.Fatalf("not revoked: %+v, %v", k, err)
			}
			evs := events(leaked.Key.ID)
			if len(evs) != 2 || evs[0].Action != "revoked" || evs[0].Actor != keys.LeakActor ||
				evs[0].Detail != "reported leaked at https://github.com/o/r/blob/main/.env[31m" {
				t.Fatalf("audit events %+v", evs)
			}
			// The key epoch moved on: the lookup above left the key in this
			// store's cache, active, and the next lookup must not serve it.
			if got, _, err := st.ReadKeyByPrefix(ctx, leaked.Key.Prefix); err != nil || got.RevokedAt == nil {
				t.Fatalf("ReadKeyByPrefix after the leak report: %+v, %v", got, err)
			}

			// Replayed: ours, nothing revoked, no second event.
			now = now.Add(time.Minute)
			l, err = svc.RevokeLeaked(ctx, leaked.Credential, url)
			if err != nil || !l.Ours || l.Revoked {
				t.Fatalf("replay: %+v, %v", l, err)
			}
			if n := len(events(leaked.Key.ID)); n != 2 {
				t.Fatalf("replay wrote an event: %d events", n)
			}
			// Revoked by hand before: ours, left as it was.
			l, err = svc.RevokeLeaked(ctx, revoked.Credential, url)
			if err != nil || !l.Ours || l.Revoked {
				t.Fatalf("already revoked: %+v, %v", l, err)
			}
			if evs := events(revoked.Key.ID); len(evs) != 2 || evs[0].Actor != owner.Email {
				t.Fatalf("already revoked key's events %+v", evs)
			}

			// The banner's list: the leak only, newest first, in the window.
			leaks, err := svc.RecentLeaks(ctx, acct.ID, now.Add(-30*24*time.Hour))
			if err != nil || len(leaks) != 1 || leaks[0].Event.KeyID != leaked.Key.ID || leaks[0].URL != "https://github.com/o/r/blob/main/.env[31m" {
				t.Fatalf("RecentLeaks = %+v, %v", leaks, err)
			}
			if leaks, err := svc.RecentLeaks(ctx, acct.ID, now.Add(time.Second)); err != nil || len(leaks) != 0 {
				t.Fatalf("RecentLeaks after the window = %+v, %v", leaks, err)
			}
		})
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
