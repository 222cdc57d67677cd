package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

func newUser(t *testing.T, s *store.Store, accountID, email string, role domain.Role) domain.User {
	t.Helper()
	u := domain.User{ID: domain.NewID(domain.PrefixUser, t0), AccountID: accountID, Email: email,
		Role: role, PasswordHash: "h", MustChangePassword: true, Active: true, CreatedAt: t0}
	if err := s.CreateUser(context.Background(), u); err != nil {
		t.Fatalf("create user: %v", err)
	}
	return u
}

func newSession(t *testing.T, s *store.Store, userID string, tag byte, expires time.Time) []byte {
	t.Helper()
	hash := bytes.Repeat([]byte{tag}, 32)
	if err := s.CreateSession(context.Background(), domain.Session{
		TokenHash: hash, UserID: userID, CSRF: "c", CreatedAt: t0, ExpiresAt: expires,
	}); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return hash
}

func TestSessionUser(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		u := newUser(t, s, a.ID, "owner@example.com", domain.RoleOwner)
		h := newSession(t, s, u.ID, 1, t0.Add(time.Hour))

		sess, got, err := s.SessionUser(ctx, h, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sess.TokenHash, h) || sess.CSRF != "c" || !sess.ExpiresAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("session %+v", sess)
		}
		if got.ID != u.ID || got.AccountID != a.ID || got.Email != u.Email || got.Role != domain.RoleOwner ||
			!got.MustChangePassword || !got.Active || !got.CreatedAt.Equal(t0) {
			t.Fatalf("user %+v", got)
		}

		_, _, err = s.SessionUser(ctx, h, t0.Add(time.Hour))
		wantNotFound(t, "expired", err)
		_, _, err = s.SessionUser(ctx, bytes.Repeat([]byte{9}, 32), t0)
		wantNotFound(t, "unknown", err)

		// A deactivated account ends its users' sessions, for good:
		// activating it again does not bring them back (a session stolen
		// before the deactivation stays dead). Another account's stay.
		other := storetest.Account(t, s)
		ou := newUser(t, s, other.ID, "other@example.com", domain.RoleOwner)
		oh := newSession(t, s, ou.ID, 2, t0.Add(time.Hour))
		if err := s.SetAccountActive(ctx, a.ID, false); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.SessionUser(ctx, h, t0)
		wantNotFound(t, "account deactivated", err)
		if err := s.SetAccountActive(ctx, a.ID, true); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.SessionUser(ctx, h, t0)
		wantNotFound(t, "account active again, old session", err)
		if _, _, err := s.SessionUser(ctx, oh, t0); err != nil {
			t.Fatalf("the other account's session: %v", err)
		}
		h = newSession(t, s, u.ID, 3, t0.Add(time.Hour))
		if _, _, err := s.SessionUser(ctx, h, t0); err != nil {
			t.Fatalf("a new session after activation: %v", err)
		}
		// An inactive user's session is refused even if a row exists for
		// it (DeactivateUser deletes the rows; this is the second line).
		idle := domain.User{ID: domain.NewID(domain.PrefixUser, t0), AccountID: a.ID, Email: "idle@example.com",
			Role: domain.RoleAdmin, PasswordHash: "h", Active: false, CreatedAt: t0}
		if err := s.CreateUser(ctx, idle); err != nil {
			t.Fatal(err)
		}
		ih := newSession(t, s, idle.ID, 4, t0.Add(time.Hour))
		_, _, err = s.SessionUser(ctx, ih, t0)
		wantNotFound(t, "user inactive", err)
	})
}

func TestDeactivateUser(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		u := newUser(t, s, a.ID, "u@example.com", domain.RoleAgent)
		keep := newUser(t, s, a.ID, "keep@example.com", domain.RoleAdmin)
		h1 := newSession(t, s, u.ID, 1, t0.Add(time.Hour))
		h2 := newSession(t, s, u.ID, 2, t0.Add(time.Hour))
		hk := newSession(t, s, keep.ID, 3, t0.Add(time.Hour))

		wantNotFound(t, "other account", s.DeactivateUser(ctx, b.ID, u.ID))
		if _, _, err := s.SessionUser(ctx, h1, t0); err != nil {
			t.Fatalf("another account's attempt touched the session: %v", err)
		}
		wantNotFound(t, "unknown user", s.DeactivateUser(ctx, a.ID, "usr_nope"))

		if err := s.DeactivateUser(ctx, a.ID, u.ID); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetUser(ctx, u.ID)
		if got.Active {
			t.Fatal("user still active")
		}
		for _, h := range [][]byte{h1, h2} {
			if ok, err := s.SessionRowExists(ctx, h); err != nil || ok {
				t.Fatalf("a session row of the deactivated user survived: %v (%v)", ok, err)
			}
		}
		if _, _, err := s.SessionUser(ctx, hk, t0); err != nil {
			t.Fatalf("another user's session ended: %v", err)
		}
	})
}

func TestChangePassword(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		u := newUser(t, s, a.ID, "u@example.com", domain.RoleOwner)
		other := newUser(t, s, a.ID, "o@example.com", domain.RoleAdmin)
		mine := newSession(t, s, u.ID, 1, t0.Add(time.Hour))
		elsewhere := newSession(t, s, u.ID, 2, t0.Add(time.Hour))
		theirs := newSession(t, s, other.ID, 3, t0.Add(time.Hour))

		if err := s.ChangePassword(ctx, u.ID, "new-hash", mine); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetUser(ctx, u.ID)
		if got.PasswordHash != "new-hash" || got.MustChangePassword {
			t.Fatalf("after change: %+v", got)
		}
		if _, _, err := s.SessionUser(ctx, mine, t0); err != nil {
			t.Fatalf("the changing session ended: %v", err)
		}
		if ok, err := s.SessionRowExists(ctx, elsewhere); err != nil || ok {
			t.Fatalf("the user's other session survived: %v (%v)", ok, err)
		}
		if _, _, err := s.SessionUser(ctx, theirs, t0); err != nil {
			t.Fatalf("another user's session ended: %v", err)
		}
		wantNotFound(t, "unknown user", s.ChangePassword(ctx, "usr_nope", "h", mine))

		// With no session to keep (support tooling), every session ends:
		// "token_hash <> NULL" matched no row.
		if err := s.ChangePassword(ctx, u.ID, "newer-hash", nil); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.SessionRowExists(ctx, mine); err != nil || ok {
			t.Fatalf("with nothing to keep, a session survived: %v (%v)", ok, err)
		}
	})
}

func TestDeleteExpiredSessions(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		u := newUser(t, s, a.ID, "u@example.com", domain.RoleOwner)
		old := newSession(t, s, u.ID, 1, t0)
		live := newSession(t, s, u.ID, 2, t0.Add(time.Millisecond))
		n, err := s.DeleteExpiredSessions(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("deleted %d, want 1", n)
		}
		if ok, err := s.SessionRowExists(ctx, old); err != nil || ok {
			t.Fatalf("expired row kept: %v (%v)", ok, err)
		}
		if _, _, err := s.SessionUser(ctx, live, t0); err != nil {
			t.Fatalf("live session deleted: %v", err)
		}
	})
}
