package keys_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestAdmitChangeRereadsOnlyItsAccount: with the mirror (PostgreSQL and
// Redis), a revocation in account A is refused on every instance's very
// next request, while a key of account B, held everywhere, is admitted
// with no store read of any key: a change in A makes no instance re-read
// B's keys.
func TestAdmitChangeRereadsOnlyItsAccount(t *testing.T) {
	w := newMirroredWorld(t, testenv.RedisURL(t))
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	other := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Other", Active: true, CreatedAt: now}
	if err := w.writer.st.CreateAccount(ctx, other); err != nil {
		t.Fatal(err)
	}
	otherOwner := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: other.ID, Email: "owner@other.test",
		Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
	if err := w.writer.st.CreateUser(ctx, otherOwner); err != nil {
		t.Fatal(err)
	}
	kb, err := keys.New(w.writer.st, nil).Create(ctx, keys.Actor{User: &otherOwner},
		keys.CreateParams{AccountID: other.ID, Name: "b", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	ka := w.newKey(t)
	w.warm(t, ka.Credential)
	w.warm(t, kb.Credential)
	if err := keys.New(w.writer.st, nil).Revoke(ctx, keys.Actor{User: &w.owner}, w.account.ID, ka.Key.ID); err != nil {
		t.Fatal(err)
	}
	w.allRefuse(t, 0, ka.Credential)
	for i, in := range w.instances {
		before := in.authn.CacheStats()
		if err := in.admit(kb.Credential); err != nil {
			t.Fatalf("instance %d: B's key after a change in A: %v", i, err)
		}
		if d := in.authn.CacheStats(); d.Reads != before.Reads || d.Misses != before.Misses {
			t.Fatalf("instance %d: B's key after a change in A read the store: %+v -> %+v", i, before, d)
		}
	}
}
