package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// t0 is the tests' clock, the fixtures' (storetest.T0): nothing here reads the real time.
var t0 = storetest.T0

// forEachEngine runs fn on a fresh store of every engine: SQLite always,
// PostgreSQL where the environment provides it (see storetest).
func forEachEngine(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { fn(t, storetest.Open(t, e)) })
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("%s: got %v, want ErrNotFound", what, err)
	}
}

func wantDuplicate(t *testing.T, what string, err error, existingID string) {
	t.Helper()
	var dup *domain.DuplicateError
	if !errors.As(err, &dup) {
		t.Fatalf("%s: got %v, want *domain.DuplicateError", what, err)
	}
	if dup.ExistingID != existingID {
		t.Fatalf("%s: existing id %q, want %q", what, dup.ExistingID, existingID)
	}
}

func TestEngineAndPing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		if want := t.Name()[strings.LastIndex(t.Name(), "/")+1:]; s.Engine() != want {
			t.Fatalf("Engine() = %q, want %q", s.Engine(), want)
		}
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func migrationCount(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.Writer().QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// reopen closes s, opens dsn again, which runs the migrations due, and
// checks that this open recorded added more than s had; the store it
// returns is closed when the test ends.
func reopen(t *testing.T, s *store.Store, dsn string, added int) *store.Store {
	t.Helper()
	n := migrationCount(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	if got := migrationCount(t, s2); got != n+added {
		t.Fatalf("reopen: %d migrations recorded, want %d", got, n+added)
	}
	return s2
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	ctx := context.Background()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "reopen.db")
			if e == store.EnginePostgres {
				dsn = storetest.PostgresURL(t)
			}
			s1, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			a := storetest.Account(t, s1)
			if migrationCount(t, s1) == 0 {
				t.Fatal("no migration recorded")
			}
			s2 := reopen(t, s1, dsn, 0)
			if _, err := s2.GetAccount(ctx, a.ID); err != nil {
				t.Fatalf("data lost on reopen: %v", err)
			}
		})
	}
}

// TestConcurrentOpen opens several stores at once on one fresh database,
// as instances starting together (or the CLI beside the server) do.
func TestConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "concurrent.db")
			if e == store.EnginePostgres {
				dsn = storetest.PostgresURL(t)
			}
			const n = 4
			stores, errs := concurrentOpenAll(ctx, dsn, n)
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("open %d: %v", i, errs[i])
				}
				defer stores[i].Close()
			}
			concurrentOpenCheckSameSchema(t, stores)
		})
	}
}

// concurrentOpenAll opens n stores on dsn at once and returns each open's
// store and error.
func concurrentOpenAll(ctx context.Context, dsn string, n int) ([]*store.Store, []error) {
	stores := make([]*store.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = store.Open(ctx, dsn) })
	}
	wg.Wait()
	return stores, errs
}

// concurrentOpenCheckSameSchema checks that every store sees the same
// migrations, and that an account one creates is read by another.
func concurrentOpenCheckSameSchema(t *testing.T, stores []*store.Store) {
	t.Helper()
	ctx := context.Background()
	n := len(stores)
	want := migrationCount(t, stores[0])
	for i := range n {
		if got := migrationCount(t, stores[i]); got != want || got == 0 {
			t.Fatalf("store %d sees %d migrations, want %d", i, got, want)
		}
	}
	// Every instance works on the same schema.
	a := storetest.Account(t, stores[1])
	if _, err := stores[n-1].GetAccount(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
}

func TestAccounts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		if n, err := s.CountAccounts(ctx); err != nil || n != 0 {
			t.Fatalf("count on empty: %d, %v", n, err)
		}
		a := storetest.Account(t, s)
		accountsCheckCreated(t, s, a)

		_, err := s.GetAccount(ctx, "acct_nope")
		wantNotFound(t, "get unknown", err)
		wantNotFound(t, "deactivate unknown", s.SetAccountActive(ctx, "acct_nope", false))
		wantNotFound(t, "feature of unknown", s.SetAccountFeature(ctx, "acct_nope", domain.FeatureAIAnswers, true))

		accountsCheckDeactivateAndFeatureOn(t, s, a.ID)
		accountsCheckFeatureOff(t, s, a.ID)
	})
}

// accountsCheckCreated checks the account just created: read back as
// given, counted, and its id refused a second time.
func accountsCheckCreated(t *testing.T, s *store.Store, a domain.Account) {
	t.Helper()
	ctx := context.Background()
	got, err := s.GetAccount(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || got.Name != "Acme" || !got.Active || len(got.Features) != 0 || !got.CreatedAt.Equal(t0) {
		t.Fatalf("got %+v", got)
	}
	if n, err := s.CountAccounts(ctx); err != nil || n != 1 {
		t.Fatalf("count: %d, %v", n, err)
	}
	wantDuplicate(t, "same id", s.CreateAccount(ctx, a), a.ID)
}

// accountsCheckDeactivateAndFeatureOn deactivates the account and switches
// a feature on twice, which keeps it once.
func accountsCheckDeactivateAndFeatureOn(t *testing.T, s *store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	if err := s.SetAccountActive(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	for range 2 { // switching on twice keeps one
		if err := s.SetAccountFeature(ctx, id, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetAccount(ctx, id)
	if got.Active || !slices.Equal(got.Features, []domain.Feature{domain.FeatureAIAnswers}) {
		t.Fatalf("after deactivate and feature on: %+v", got)
	}
}

// accountsCheckFeatureOff switches the feature off again.
func accountsCheckFeatureOff(t *testing.T, s *store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	if err := s.SetAccountFeature(ctx, id, domain.FeatureAIAnswers, false); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetAccount(ctx, id)
	if got.HasFeature(domain.FeatureAIAnswers) {
		t.Fatalf("feature still on: %+v", got)
	}
}

func TestUsers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := storetest.Account(t, s), storetest.Account(t, s)
		u := domain.User{
			ID: domain.NewID(domain.PrefixUser, t0), AccountID: a.ID, Email: "  Ann@Example.COM ",
			Role: domain.RoleOwner, PasswordHash: "h1", MustChangePassword: true, Active: true, CreatedAt: t0,
		}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		// The same email, differently spelled, in another account.
		other := u
		other.ID, other.AccountID, other.Email = domain.NewID(domain.PrefixUser, t0), b.ID, "ann@example.com"
		wantDuplicate(t, "taken email", s.CreateUser(ctx, other), u.ID)

		usersCheckGet(t, s, u)
		u2 := usersCheckList(t, s, a.ID, u)
		usersCheckDeactivate(t, s, a.ID, b.ID, u)
		usersCheckLastOwner(t, s, a.ID, u2)
	})
}

// usersCheckGet reads u back by its email in any spelling and by its id,
// and an unknown id and email not at all.
func usersCheckGet(t *testing.T, s *store.Store, u domain.User) {
	t.Helper()
	ctx := context.Background()
	got, err := s.GetUserByEmail(ctx, "ANN@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != u.ID || got.Email != "ann@example.com" || got.Role != domain.RoleOwner ||
		!got.MustChangePassword || !got.Active || got.PasswordHash != "h1" || !got.CreatedAt.Equal(t0) {
		t.Fatalf("got %+v", got)
	}
	if _, err := s.GetUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetUser(ctx, "usr_nope")
	wantNotFound(t, "get unknown", err)
	_, err = s.GetUserByEmail(ctx, "nobody@example.com")
	wantNotFound(t, "get unknown email", err)
}

// usersCheckList adds Bob, a second Owner, to the account and checks the
// account lists u then him; it returns Bob.
func usersCheckList(t *testing.T, s *store.Store, accountID string, u domain.User) domain.User {
	t.Helper()
	ctx := context.Background()
	u2 := domain.User{
		ID: domain.NewID(domain.PrefixUser, t0.Add(time.Second)), AccountID: accountID, Email: "bob@example.com",
		Role: domain.RoleOwner, PasswordHash: "h", Active: true, CreatedAt: t0.Add(time.Second),
	}
	if err := s.CreateUser(ctx, u2); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListUsers(ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != u.ID || list[1].ID != u2.ID {
		t.Fatalf("list: %+v", list)
	}
	return u2
}

// usersCheckDeactivate checks that another account cannot deactivate u and
// that its own can, keeping the password hash.
func usersCheckDeactivate(t *testing.T, s *store.Store, accountID, otherID string, u domain.User) {
	t.Helper()
	ctx := context.Background()
	wantNotFound(t, "deactivate from another account", s.DeactivateUser(ctx, otherID, u.ID))
	if got, _ := s.GetUser(ctx, u.ID); !got.Active {
		t.Fatal("another account deactivated the user")
	}
	if err := s.DeactivateUser(ctx, accountID, u.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetUser(ctx, u.ID)
	if got.Active || got.PasswordHash != "h1" {
		t.Fatalf("after deactivation: %+v", got)
	}
}

// usersCheckLastOwner checks that the account's last active Owner, u2,
// cannot be deactivated.
func usersCheckLastOwner(t *testing.T, s *store.Store, accountID string, u2 domain.User) {
	t.Helper()
	ctx := context.Background()
	// Bob is now the account's last active Owner.
	if err := s.DeactivateUser(ctx, accountID, u2.ID); !errors.Is(err, store.ErrLastOwner) {
		t.Fatalf("deactivate the last Owner: %v", err)
	}
	if got, _ := s.GetUser(ctx, u2.ID); !got.Active {
		t.Fatal("the last Owner was deactivated")
	}
}

func TestSessions(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		u := domain.User{ID: domain.NewID(domain.PrefixUser, t0), AccountID: a.ID, Email: "s@example.com",
			Role: domain.RoleAdmin, PasswordHash: "h", Active: true, CreatedAt: t0}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		hash := bytes.Repeat([]byte{0xab, 0x00}, 16)
		sess := domain.Session{TokenHash: hash, UserID: u.ID, CSRF: "csrf", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.SessionUser(ctx, hash, t0.Add(time.Hour-time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.TokenHash, hash) || got.UserID != u.ID || got.CSRF != "csrf" ||
			!got.CreatedAt.Equal(t0) || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("got %+v", got)
		}
		_, _, err = s.SessionUser(ctx, hash, t0.Add(time.Hour))
		wantNotFound(t, "expired at its expiry", err)
		_, _, err = s.SessionUser(ctx, []byte("other"), t0)
		wantNotFound(t, "unknown", err)
		if err := s.DeleteSession(ctx, hash); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.SessionRowExists(ctx, hash); err != nil || ok {
			t.Fatalf("deleted session: row kept %v (%v)", ok, err)
		}
		if err := s.DeleteSession(ctx, hash); err != nil {
			t.Fatalf("deleting a deleted session: %v", err)
		}
	})
}

func TestTimestampsRoundTripInUTC(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		zone := time.FixedZone("UTC-5", -5*3600)
		in := time.Date(2026, 7, 4, 9, 30, 15, 123_456_789, zone)
		want := time.Date(2026, 7, 4, 14, 30, 15, 123_000_000, time.UTC)
		check := func(what string, got time.Time) {
			t.Helper()
			timestampsCheckUTC(t, what, got, want)
		}
		acct := domain.Account{ID: domain.NewID(domain.PrefixAccount, in), Name: "Zoned", Active: true, CreatedAt: in}
		if err := s.CreateAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
		a, err := s.GetAccount(ctx, acct.ID)
		if err != nil {
			t.Fatal(err)
		}
		check("account created_at", a.CreatedAt)

		ag := storetest.Agent(t, s, acct.ID, "zoned", in)
		got, err := s.GetAgent(ctx, acct.ID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		check("agent created_at", got.CreatedAt)
		check("agent updated_at", got.UpdatedAt)

		gk := timestampsZonedKey(t, s, acct.ID, in)
		check("key expires_at", *gk.ExpiresAt)
		check("key last_used_at", *gk.LastUsedAt)
		evs, err := s.ListAuditEvents(ctx, acct.ID, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("events: %v, %v", evs, err)
		}
		check("event created_at", evs[0].CreatedAt)
	})
}

// timestampsCheckUTC fails unless got is want, in UTC.
func timestampsCheckUTC(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) || got.Location() != time.UTC || got != want {
		t.Fatalf("%s: got %v (%v), want %v", what, got, got.Location(), want)
	}
}

// timestampsZonedKey creates a key of the account that expires at in, and
// was last used at in, and returns it as read back, both times set and no
// revocation.
func timestampsZonedKey(t *testing.T, s *store.Store, accountID string, in time.Time) domain.APIKey {
	t.Helper()
	ctx := context.Background()
	k := storetest.Key(t, s, accountID)
	exp := in
	k2 := k
	k2.ID, k2.Prefix, k2.ExpiresAt = domain.NewID(domain.PrefixKey, t0), "pfx_zoned", &exp
	if err := s.CreateKey(ctx, k2, storetest.Event(accountID, k2.ID, "created", in)); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchKeys(ctx, map[string]time.Time{k2.ID: in}); err != nil {
		t.Fatal(err)
	}
	gk, err := s.GetKey(ctx, accountID, k2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gk.ExpiresAt == nil || gk.LastUsedAt == nil || gk.RevokedAt != nil {
		t.Fatalf("nullable times: %+v", gk)
	}
	return gk
}

func TestKeys(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		// Given out of id order: the restriction keeps the given order.
		ag2 := storetest.Agent(t, s, acct.ID, "two", t0.Add(time.Millisecond))
		ag1 := storetest.Agent(t, s, acct.ID, "one", t0)
		k := storetest.Key(t, s, acct.ID, ag2.ID, ag1.ID)
		plain := storetest.Key(t, s, acct.ID)

		keysCheckReadByPrefix(t, s, k, plain, []string{ag2.ID, ag1.ID})
		keysCheckInactiveAccount(t, s, k)

		dup := k
		dup.ID = domain.NewID(domain.PrefixKey, t0)
		wantDuplicate(t, "taken prefix", s.CreateKey(ctx, dup, storetest.Event(acct.ID, dup.ID, "created", t0)), k.ID)

		keysCheckGet(t, s, k, other.ID)
		keysCheckList(t, s, k, plain, other.ID)
		keysCheckRateLimit(t, s, k)
	})
}

// keysCheckReadByPrefix reads k back whole by its prefix, restricted to
// agentIDs in that order, with its account active; plain unrestricted; and
// an unknown prefix not at all.
func keysCheckReadByPrefix(t *testing.T, s *store.Store, k, plain domain.APIKey, agentIDs []string) {
	t.Helper()
	ctx := context.Background()
	got, active, err := s.ReadKeyByPrefix(ctx, k.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !active {
		t.Fatal("account reported inactive")
	}
	if got.ID != k.ID || got.AccountID != k.AccountID || got.Name != "k" || got.Description != "d" ||
		got.Env != domain.EnvLive || !bytes.Equal(got.Hash, k.Hash) || !slices.Equal(got.Scopes, k.Scopes) ||
		!slices.Equal(got.AgentIDs, agentIDs) || got.RateLimitPerMinute != 120 ||
		got.LastUsedAt != nil || got.ExpiresAt != nil || got.RevokedAt != nil || !got.CreatedAt.Equal(t0) ||
		got.CreatedBy != "usr_1" || got.RevokedBy != "" || got.RotatedFrom != "" {
		t.Fatalf("got %+v", got)
	}
	if p, _, _ := s.ReadKeyByPrefix(ctx, plain.Prefix); p.Restricted() {
		t.Fatalf("unrestricted key came back restricted: %v", p.AgentIDs)
	}
	_, _, err = s.ReadKeyByPrefix(ctx, "pfx_unknown")
	wantNotFound(t, "unknown prefix", err)
}

// keysCheckInactiveAccount deactivates k's account and checks the read by
// prefix says so.
func keysCheckInactiveAccount(t *testing.T, s *store.Store, k domain.APIKey) {
	t.Helper()
	ctx := context.Background()
	if err := s.SetAccountActive(ctx, k.AccountID, false); err != nil {
		t.Fatal(err)
	}
	if _, active, _ := s.ReadKeyByPrefix(ctx, k.Prefix); active {
		t.Fatal("deactivated account reported active")
	}
}

// keysCheckGet reads k by account and id, not from another account, and by
// its id alone; an unknown id not at all.
func keysCheckGet(t *testing.T, s *store.Store, k domain.APIKey, otherID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.GetKey(ctx, k.AccountID, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetKey(ctx, otherID, k.ID)
	wantNotFound(t, "key of another account", err)
	if g, err := s.GetKeyByID(ctx, k.ID); err != nil || g.ID != k.ID {
		t.Fatalf("by id: %v, %v", g.ID, err)
	}
	_, err = s.GetKeyByID(ctx, "key_nope")
	wantNotFound(t, "unknown id", err)
}

// keysCheckList lists the account's two keys, k and plain, in id order,
// k with its restriction, and none for the other account.
func keysCheckList(t *testing.T, s *store.Store, k, plain domain.APIKey, otherID string) {
	t.Helper()
	ctx := context.Background()
	list, err := s.ListKeys(ctx, k.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	// Same creation time: in id order.
	want := []string{k.ID, plain.ID}
	slices.Sort(want)
	if len(list) != 2 || list[0].ID != want[0] || list[1].ID != want[1] {
		t.Fatalf("list: %+v", list)
	}
	for _, l := range list {
		if l.ID == k.ID && !slices.Equal(l.AgentIDs, k.AgentIDs) {
			t.Fatalf("listed restriction %v, want %v", l.AgentIDs, k.AgentIDs)
		}
	}
	if l, err := s.ListKeys(ctx, otherID); err != nil || len(l) != 0 {
		t.Fatalf("other account's keys: %v, %v", l, err)
	}
}

// keysCheckRateLimit sets k's rate limit to 7, and an unknown key's not.
func keysCheckRateLimit(t *testing.T, s *store.Store, k domain.APIKey) {
	t.Helper()
	ctx := context.Background()
	if err := s.SetKeyRateLimit(ctx, k.ID, 7, storetest.Event(k.AccountID, k.ID, "rate_limit_changed", t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.GetKeyByID(ctx, k.ID); g.RateLimitPerMinute != 7 {
		t.Fatalf("rate limit %d", g.RateLimitPerMinute)
	}
	wantNotFound(t, "rate limit of unknown", s.SetKeyRateLimit(ctx, "key_nope", 7, storetest.Event(k.AccountID, "key_nope", "x", t0)))
}

func TestRevokeKey(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		at := t0.Add(time.Minute)

		wantNotFound(t, "revoke from another account",
			s.RevokeKey(ctx, other.ID, k.ID, "usr_2", at, storetest.Event(other.ID, k.ID, "revoked", at)))
		wantNotFound(t, "revoke unknown",
			s.RevokeKey(ctx, acct.ID, "key_nope", "usr_2", at, storetest.Event(acct.ID, "key_nope", "revoked", at)))
		if err := s.RevokeKey(ctx, acct.ID, k.ID, "usr_2", at, storetest.Event(acct.ID, k.ID, "revoked", at)); err != nil {
			t.Fatal(err)
		}
		later := at.Add(time.Minute)
		if err := s.RevokeKey(ctx, acct.ID, k.ID, "usr_3", later, storetest.Event(acct.ID, k.ID, "revoked", later)); err != nil {
			t.Fatalf("revoking a revoked key: %v", err)
		}
		got, _, err := s.ReadKeyByPrefix(ctx, k.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got.RevokedAt == nil || !got.RevokedAt.Equal(at) || got.RevokedBy != "usr_2" || got.Status(later) != domain.KeyRevoked {
			t.Fatalf("revoked key: %+v", got)
		}
		evs, err := s.ListAuditEvents(ctx, acct.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, ev := range evs {
			actions = append(actions, string(ev.Action))
		}
		if !slices.Equal(actions, []string{"revoked", "created"}) {
			t.Fatalf("events newest first: %v", actions)
		}
	})
}

func TestAuditEvents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		evs := auditEventsAddFive(t, s, acct.ID)
		got, err := s.ListAuditEvents(ctx, acct.ID, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, evs[:3]) {
			t.Fatalf("limit 3, newest first:\n%+v\nwant\n%+v", got, evs[:3])
		}
		if all, err := s.ListAuditEvents(ctx, acct.ID, 0); err != nil || !slices.Equal(all, evs) {
			t.Fatalf("no limit: %+v, %v", all, err)
		}
		auditEventsCheckKeyHistory(t, s, acct.ID, evs)
	})
}

// auditEventsAddFive adds five events of key_x to the account, two by two
// in the same second, and returns them newest first.
func auditEventsAddFive(t *testing.T, s *store.Store, accountID string) []domain.AuditEvent {
	t.Helper()
	ctx := context.Background()
	var evs []domain.AuditEvent
	for i := range 5 {
		// Pairs share a millisecond: ties are broken by id.
		ev := storetest.Event(accountID, "key_x", domain.AuditAction(fmt.Sprint("a", i)), t0.Add(time.Duration(i/2)*time.Second))
		ev.Detail = "detail"
		if err := s.AddAuditEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	slices.SortFunc(evs, func(a, b domain.AuditEvent) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return evs
}

// auditEventsCheckKeyHistory adds an event of key_y and one of key_x in
// another account, and checks each key's history: evs for key_x.
func auditEventsCheckKeyHistory(t *testing.T, s *store.Store, accountID string, evs []domain.AuditEvent) {
	t.Helper()
	ctx := context.Background()
	// One key's history: its events only, newest first, never another
	// account's even under the same key id.
	other := storetest.Event(accountID, "key_y", "created", t0.Add(time.Minute))
	foreign := storetest.Event(storetest.Account(t, s).ID, "key_x", "created", t0.Add(time.Minute))
	for _, ev := range []domain.AuditEvent{other, foreign} {
		if err := s.AddAuditEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ListKeyAuditEvents(ctx, accountID, "key_x"); err != nil || !slices.Equal(got, evs) {
		t.Fatalf("key_x's events: %+v, %v; want %+v", got, err, evs)
	}
	if got, err := s.ListKeyAuditEvents(ctx, accountID, "key_y"); err != nil || !slices.Equal(got, []domain.AuditEvent{other}) {
		t.Fatalf("key_y's events: %+v, %v", got, err)
	}
}

func TestTouchKeysMonotonic(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k1, k2 := storetest.Key(t, s, acct.ID), storetest.Key(t, s, acct.ID)
		t1, t2, t3 := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)
		lastUsed := func(id string) *time.Time {
			t.Helper()
			return touchKeysMonotonicLastUsed(t, s, id)
		}
		if err := s.TouchKeys(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.TouchKeys(ctx, map[string]time.Time{k1.ID: t2, k2.ID: t1, "key_unknown": t3}); err != nil {
			t.Fatal(err)
		}
		// An older flush, as from a slower instance, moves nothing back.
		if err := s.TouchKeys(ctx, map[string]time.Time{k1.ID: t1, k2.ID: t2}); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(k1.ID); got == nil || !got.Equal(t2) {
			t.Fatalf("k1 last used %v, want %v", got, t2)
		}
		if got := lastUsed(k2.ID); got == nil || !got.Equal(t2) {
			t.Fatalf("k2 last used %v, want %v", got, t2)
		}
		// Concurrent flushes end at the newest time.
		touchKeysMonotonicConcurrent(t, s, k1.ID, k2.ID)
		if got, want := lastUsed(k1.ID), t0.Add(29*time.Second); got == nil || !got.Equal(want) {
			t.Fatalf("after concurrent touches %v, want %v", got, want)
		}
	})
}

// touchKeysMonotonicLastUsed returns when the key was last used.
func touchKeysMonotonicLastUsed(t *testing.T, s *store.Store, id string) *time.Time {
	t.Helper()
	k, err := s.GetKeyByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return k.LastUsedAt
}

// touchKeysMonotonicConcurrent flushes 20 times at once, each time both
// keys at a time of its own, from t0+10s to t0+29s.
func touchKeysMonotonicConcurrent(t *testing.T, s *store.Store, id1, id2 string) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			at := t0.Add(time.Duration(10+i) * time.Second)
			if err := s.TouchKeys(ctx, map[string]time.Time{id1: at, id2: at}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestAgents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		ag := storetest.Agent(t, s, acct.ID, "Support Bot", t0)
		got, err := s.GetAgent(ctx, acct.ID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got != ag {
			t.Fatalf("got %+v, want %+v", got, ag)
		}
		_, err = s.GetAgent(ctx, other.ID, ag.ID)
		wantNotFound(t, "agent of another account", err)

		// The name key is trimmed and case-folded.
		dup := ag
		dup.ID, dup.Name = domain.NewID(domain.PrefixAgent, t0), "  support BOT "
		wantDuplicate(t, "same name key", s.CreateAgent(ctx, dup), ag.ID)
		// Names are unique per account only.
		storetest.Agent(t, s, other.ID, "Support Bot", t0)

		disabled := ag
		disabled.ID, disabled.Name, disabled.Enabled = domain.NewID(domain.PrefixAgent, t0), "Off", false
		if err := s.CreateAgent(ctx, disabled); err != nil {
			t.Fatal(err)
		}
		if g, _ := s.GetAgent(ctx, acct.ID, disabled.ID); g.Enabled {
			t.Fatal("disabled agent came back enabled")
		}
	})
}

func TestConcurrentCreateAgentOneWinner(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		const n = 20
		ids, errs := concurrentCreateAgentRace(s, acct.ID, n)
		winner := concurrentCreateAgentWinner(t, ids, errs)
		for i, err := range errs {
			if ids[i] != winner {
				wantDuplicate(t, fmt.Sprintf("loser %d", i), err, winner)
			}
		}
		list, err := s.ListAgents(ctx, store.AgentQuery{AccountID: acct.ID})
		if err != nil || len(list) != 1 || list[0].ID != winner {
			t.Fatalf("stored: %v, %v", list, err)
		}
	})
}

// concurrentCreateAgentRace creates n agents of one name key (spelled
// with 0 to 2 trailing spaces) at once, and returns their ids and the
// creations' errors.
func concurrentCreateAgentRace(s *store.Store, accountID string, n int) ([]string, []error) {
	ctx := context.Background()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			a := domain.Agent{
				ID: domain.NewID(domain.PrefixAgent, t0), AccountID: accountID, Name: fmt.Sprintf("Racer%s", strings.Repeat(" ", i%3)),
				Enabled: true, CreatedAt: t0, UpdatedAt: t0,
			}
			ids[i] = a.ID
			<-start
			errs[i] = s.CreateAgent(ctx, a)
		})
	}
	close(start)
	wg.Wait()
	return ids, errs
}

// concurrentCreateAgentWinner returns the id of the one creation that
// succeeded, and fails if none or more than one did.
func concurrentCreateAgentWinner(t *testing.T, ids []string, errs []error) string {
	t.Helper()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two winners: %s and %s", winner, ids[i])
			}
			winner = ids[i]
		}
	}
	if winner == "" {
		t.Fatalf("no winner: %v", errs)
	}
	return winner
}

func TestUpdateAgent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		a := storetest.Agent(t, s, acct.ID, "Alpha", t0)
		b := storetest.Agent(t, s, acct.ID, "Beta", t0)
		later := t0.Add(time.Hour + 1500*time.Microsecond)

		_, err := s.UpdateAgent(ctx, other.ID, a.ID, func(*domain.Agent) (bool, error) {
			t.Fatal("fn called for an agent of another account")
			return false, nil
		})
		wantNotFound(t, "update in another account", err)

		updateAgentCheckNoChange(t, s, a)
		updateAgentCheckFnError(t, s, a)
		want := updateAgentCheckRename(t, s, a, later)
		updateAgentCheckRenameOntoOther(t, s, a.ID, b, want)

		// Concurrent updates serialize: every increment survives.
		updateAgentConcurrentIncrements(t, s, b)
		if stored, _ := s.GetAgent(ctx, acct.ID, b.ID); stored.Instructions != "be kind"+strings.Repeat("x", 10) {
			t.Fatalf("lost updates: %q", stored.Instructions)
		}
	})
}

// updateAgentCheckNoChange: fn sees a and changes nothing; nothing is
// written and a comes back.
func updateAgentCheckNoChange(t *testing.T, s *store.Store, a domain.Agent) {
	t.Helper()
	ctx := context.Background()
	// No change: nothing is written.
	got, err := s.UpdateAgent(ctx, a.AccountID, a.ID, func(ag *domain.Agent) (bool, error) {
		if *ag != a {
			t.Errorf("fn saw %+v, want %+v", *ag, a)
		}
		return false, nil
	})
	if err != nil || got != a {
		t.Fatalf("unchanged: %+v, %v", got, err)
	}
}

// updateAgentCheckFnError: fn's error comes back from UpdateAgent.
func updateAgentCheckFnError(t *testing.T, s *store.Store, a domain.Agent) {
	t.Helper()
	ctx := context.Background()
	// fn's error comes back as is, and nothing is written.
	boom := errors.New("boom")
	_, err := s.UpdateAgent(ctx, a.AccountID, a.ID, func(ag *domain.Agent) (bool, error) {
		ag.Name = "Gamma"
		return true, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
}

// updateAgentCheckRename renames a to its own name key in other case and
// changes the rest at later, checks what UpdateAgent returns and stores,
// and returns that agent.
func updateAgentCheckRename(t *testing.T, s *store.Store, a domain.Agent, later time.Time) domain.Agent {
	t.Helper()
	ctx := context.Background()
	got, err := s.UpdateAgent(ctx, a.AccountID, a.ID, func(ag *domain.Agent) (bool, error) {
		ag.Name, ag.Instructions, ag.Enabled, ag.UpdatedAt = "ALPHA", "new", false, later
		ag.CreatedAt = later // not fn's to change; ignored
		return true, nil
	})
	if err != nil {
		t.Fatalf("rename to own name key: %v", err)
	}
	want := domain.Agent{ID: a.ID, AccountID: a.AccountID, Name: "ALPHA", Instructions: "new", Enabled: false,
		CreatedAt: t0, UpdatedAt: later.Truncate(time.Millisecond)}
	if got != want {
		t.Fatalf("returned %+v, want %+v", got, want)
	}
	if stored, _ := s.GetAgent(ctx, a.AccountID, a.ID); stored != want {
		t.Fatalf("stored %+v, want %+v", stored, want)
	}
	return want
}

// updateAgentCheckRenameOntoOther renames the agent id onto b's name key:
// refused as a duplicate of b, the agent still want.
func updateAgentCheckRenameOntoOther(t *testing.T, s *store.Store, id string, b, want domain.Agent) {
	t.Helper()
	ctx := context.Background()
	_, err := s.UpdateAgent(ctx, want.AccountID, id, func(ag *domain.Agent) (bool, error) {
		ag.Name = " beta"
		return true, nil
	})
	wantDuplicate(t, "rename onto another agent", err, b.ID)
	if stored, _ := s.GetAgent(ctx, want.AccountID, id); stored != want {
		t.Fatalf("failed rename changed the agent: %+v", stored)
	}
}

// updateAgentConcurrentIncrements appends "x" to b's instructions in 10
// updates at once.
func updateAgentConcurrentIncrements(t *testing.T, s *store.Store, b domain.Agent) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := s.UpdateAgent(ctx, b.AccountID, b.ID, func(ag *domain.Agent) (bool, error) {
				ag.Instructions += "x"
				return true, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// listBoth lists through ListAgents and ListAgentItems, fails unless the
// items are exactly the agents' four list fields in the same order, and
// returns the agents: every list test holds for both read paths.
func listBoth(t *testing.T, s *store.Store, q store.AgentQuery) ([]domain.Agent, error) {
	t.Helper()
	ctx := context.Background()
	agents, err := s.ListAgents(ctx, q)
	if err != nil {
		return nil, err
	}
	items, err := s.ListAgentItems(ctx, q)
	if err != nil {
		return nil, err
	}
	want := make([]store.AgentItem, len(agents))
	for i, a := range agents {
		want[i] = store.AgentItem{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: a.CreatedAt}
	}
	if !slices.EqualFunc(items, want, func(x, y store.AgentItem) bool {
		return x.ID == y.ID && x.Name == y.Name && x.Enabled == y.Enabled && x.CreatedAt.Equal(y.CreatedAt)
	}) {
		t.Fatalf("ListAgentItems(%+v) = %v, want %v", q, items, want)
	}
	return agents, nil
}

func TestListAgentsKeysetPagination(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		storetest.Agent(t, s, other.ID, "elsewhere", t0)
		// 23 agents over 5 distinct milliseconds: ties are broken by id.
		var all []domain.Agent
		for i := range 23 {
			at := t0.Add(time.Duration(i%5) * time.Millisecond)
			all = append(all, storetest.Agent(t, s, acct.ID, fmt.Sprint("agent ", i), at))
		}
		slices.SortFunc(all, func(a, b domain.Agent) int {
			if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		var got []domain.Agent
		q := store.AgentQuery{AccountID: acct.ID, Limit: 4}
		pages := 0
		for {
			page, err := listBoth(t, s, q)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			got = append(got, page...)
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			q.AfterCreatedAt, q.AfterID = last.CreatedAt, last.ID
		}
		if pages != 6 {
			t.Fatalf("%d pages, want 6", pages)
		}
		if !slices.Equal(got, all) {
			t.Fatalf("paged:\n%v\nwant:\n%v", got, all)
		}

		all2, err := listBoth(t, s, store.AgentQuery{AccountID: acct.ID})
		if err != nil || !slices.Equal(all2, all) {
			t.Fatalf("no limit: %d agents, %v", len(all2), err)
		}
	})
}

func TestListAgentsFilters(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		var agents []domain.Agent
		for i := range 6 {
			agents = append(agents, storetest.Agent(t, s, acct.ID, fmt.Sprint("f", i), t0.Add(time.Duration(i)*time.Second)))
		}
		ids := listAgentsFiltersIDs

		since := t0.Add(3 * time.Second)
		listAgentsFiltersCheckUpdatedSince(t, s, agents, since)
		// An update moves an old agent into the window.
		if _, err := s.UpdateAgent(ctx, acct.ID, agents[0].ID, func(a *domain.Agent) (bool, error) {
			a.Instructions, a.Enabled, a.UpdatedAt = "changed", false, since
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		list, _ := listBoth(t, s, store.AgentQuery{AccountID: acct.ID, UpdatedSince: &since})
		if want := append([]string{agents[0].ID}, ids(agents[3:])...); !slices.Equal(ids(list), want) {
			t.Fatalf("updated since after update: %v, want %v", ids(list), want)
		}

		listAgentsFiltersCheckOnlyKey(t, s, agents, since)
	})
}

// listAgentsFiltersIDs returns the agents' ids in order.
func listAgentsFiltersIDs(list []domain.Agent) []string {
	var out []string
	for _, a := range list {
		out = append(out, a.ID)
	}
	return out
}

// listAgentsFiltersCheckUpdatedSince: of the six agents, updated a second
// apart, the last three are updated since since.
func listAgentsFiltersCheckUpdatedSince(t *testing.T, s *store.Store, agents []domain.Agent, since time.Time) {
	t.Helper()
	ids := listAgentsFiltersIDs
	list, err := listBoth(t, s, store.AgentQuery{AccountID: agents[0].AccountID, UpdatedSince: &since})
	if err != nil {
		t.Fatal(err)
	}
	if want := ids(agents[3:]); !slices.Equal(ids(list), want) {
		t.Fatalf("updated since: %v, want %v", ids(list), want)
	}
}

// listAgentsFiltersCheckOnlyKey filters by a key restricted to agents 4, 1
// and 2, alone and with the other filters and a page boundary, and by an
// unrestricted key, which keeps nothing.
func listAgentsFiltersCheckOnlyKey(t *testing.T, s *store.Store, agents []domain.Agent, since time.Time) {
	t.Helper()
	ids := listAgentsFiltersIDs
	accountID := agents[0].AccountID
	k := storetest.Key(t, s, accountID, agents[4].ID, agents[1].ID, agents[2].ID)
	list, err := listBoth(t, s, store.AgentQuery{AccountID: accountID, OnlyKeyID: k.ID})
	if err != nil {
		t.Fatal(err)
	}
	if want := ids([]domain.Agent{agents[1], agents[2], agents[4]}); !slices.Equal(ids(list), want) {
		t.Fatalf("only key: %v, want %v", ids(list), want)
	}
	// All three filters and a page boundary together.
	list, _ = listBoth(t, s, store.AgentQuery{
		AccountID: accountID, OnlyKeyID: k.ID, UpdatedSince: &since,
		AfterCreatedAt: agents[1].CreatedAt, AfterID: agents[1].ID, Limit: 5,
	})
	if want := []string{agents[4].ID}; !slices.Equal(ids(list), want) {
		t.Fatalf("combined: %v, want %v", ids(list), want)
	}
	plain := storetest.Key(t, s, accountID)
	if list, _ := listBoth(t, s, store.AgentQuery{AccountID: accountID, OnlyKeyID: plain.ID}); len(list) != 0 {
		t.Fatalf("unrestricted key as a filter keeps nothing, got %v", ids(list))
	}
}

func TestQueryPlansUseIndexes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		since := t0
		// Both list reads (full rows for the console, list items for the
		// API), with every filter and without any.
		for _, build := range []func(store.AgentQuery) (string, []any){store.ListAgentsSQL, store.ListAgentItemsSQL} {
			for _, q := range []store.AgentQuery{
				{AccountID: "acct_x", OnlyKeyID: "key_x", UpdatedSince: &since, AfterCreatedAt: t0, AfterID: "agt_x", Limit: 10},
				{AccountID: "acct_x", AfterCreatedAt: t0, AfterID: "agt_x", Limit: 31},
			} {
				query, args := build(q)
				queryPlansCheckListRead(t, s, query, args)
			}
		}
		queryPlansCheckKeyByPrefix(t, s)
	})
}

// queryPlansCheckListRead checks that a list read's query plan reads the
// agents_page index in order, the keyset condition a bound of its range.
func queryPlansCheckListRead(t *testing.T, s *store.Store, query string, args []any) {
	t.Helper()
	plan, err := s.Explain(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	// The keyset condition is a bound of the index range, not a filter.
	var want []string
	if s.Engine() == store.EngineSQLite {
		want = []string{"USING INDEX agents_page (account_id=? AND (created_at,id)>(?,?))"}
	} else {
		want = []string{"Index Scan using agents_page", "Index Cond: ((account_id = ", "ROW(created_at, id) > ROW("}
	}
	for _, w := range want {
		if !strings.Contains(plan, w) {
			t.Fatalf("%s\nplan lacks %q:\n%s", query, w, plan)
		}
	}
	if strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") || strings.Contains(plan, "Sort Key") {
		t.Fatalf("%s\nsorts instead of reading the index in order:\n%s", query, plan)
	}
}

// queryPlansCheckKeyByPrefix checks that the key by prefix read finds the
// key and its account by index.
func queryPlansCheckKeyByPrefix(t *testing.T, s *store.Store) {
	t.Helper()
	plan, err := s.Explain(context.Background(), store.KeyByPrefixSQL, "pfx")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if s.Engine() == store.EngineSQLite {
		want = []string{"SEARCH k USING INDEX", "(prefix=?)", "SEARCH a USING INDEX"}
	} else {
		want = []string{"Index Scan using api_keys_prefix_key", "Index Scan using accounts_pkey"}
	}
	for _, w := range want {
		if !strings.Contains(plan, w) {
			t.Fatalf("key by prefix plan lacks %q:\n%s", w, plan)
		}
	}
}

func TestSecret(t *testing.T) {
	ctx := context.Background()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "secret.db")
			if e == store.EnginePostgres {
				dsn = storetest.PostgresURL(t)
			}
			// Two instances on one database, racing for the first secret.
			var stores [2]*store.Store
			for i := range stores {
				s, err := store.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				stores[i] = s
			}
			got := secretRaceForCursor(t, stores)
			secretCheckAllSame(t, got)
			other, err := stores[0].Secret(ctx, "other")
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(other, got[0]) {
				t.Fatal("two names share one secret")
			}
		})
	}
}

// secretRaceForCursor asks for the secret "cursor" 8 times at once,
// alternately from each store, and returns what each asking got.
func secretRaceForCursor(t *testing.T, stores [2]*store.Store) [8][]byte {
	t.Helper()
	ctx := context.Background()
	var got [8][]byte
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			v, err := stores[i%2].Secret(ctx, "cursor")
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	return got
}

// secretCheckAllSame fails unless every secret is the first, of 32 bytes.
func secretCheckAllSame(t *testing.T, got [8][]byte) {
	t.Helper()
	for i := range got {
		if len(got[i]) != 32 || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("secret %d = %x, secret 0 = %x", i, got[i], got[0])
		}
	}
}

func TestClaim(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 10 {
			wg.Go(func() {
				ok, err := s.Claim(ctx, "bootstrap")
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d claims won, want 1", won)
		}
		if ok, err := s.Claim(ctx, "other"); err != nil || !ok {
			t.Fatalf("another name: %v, %v", ok, err)
		}
	})
}

// BenchmarkKeyByPrefix measures the authentication hot path.
func BenchmarkKeyByPrefix(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e, func(b *testing.B) {
			s := storetest.Open(b, e)
			ctx := context.Background()
			acct := storetest.Account(b, s)
			ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, t0), AccountID: acct.ID, Name: "a", CreatedAt: t0, UpdatedAt: t0}
			if err := s.CreateAgent(ctx, ag); err != nil {
				b.Fatal(err)
			}
			k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: acct.ID, Name: "k", Prefix: "pfx_bench",
				Env: domain.EnvLive, Hash: []byte{1}, Scopes: []domain.Scope{domain.ScopeAgentsRead},
				AgentIDs: []string{ag.ID}, RateLimitPerMinute: 1, CreatedAt: t0}
			if err := s.CreateKey(ctx, k, storetest.Event(acct.ID, k.ID, "created", t0)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := s.ReadKeyByPrefix(ctx, "pfx_bench"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func TestImportAgents(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			s := storetest.Open(t, engine)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Millisecond)
			acct := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "bulk", Active: true, CreatedAt: now}
			if err := s.CreateAccount(ctx, acct); err != nil {
				t.Fatal(err)
			}
			var agents []domain.Agent
			for i := range 1203 {
				at := now.Add(time.Duration(i) * time.Millisecond)
				agents = append(agents, domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: acct.ID,
					Name: fmt.Sprintf("bulk %d", i), Enabled: true, CreatedAt: at, UpdatedAt: at})
			}
			if err := s.ImportAgents(ctx, agents); err != nil {
				t.Fatal(err)
			}
			got, err := s.ListAgents(ctx, store.AgentQuery{AccountID: acct.ID, Limit: 2000})
			if err != nil || len(got) != len(agents) || got[1202].ID != agents[1202].ID {
				t.Fatalf("listed %d agents (%v)", len(got), err)
			}
			var dup *domain.DuplicateError
			if err := s.ImportAgents(ctx, agents[:1]); !errors.As(err, &dup) {
				t.Fatalf("re-import: %v", err)
			}
		})
	}
}

// BenchmarkListAgentPage: one page of 31 (the API's limit 30 plus one to
// learn has_more) from 3,000 agents, through the full-row read and
// through the list-item read GET /ai-agents uses.
func BenchmarkListAgentPage(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e, func(b *testing.B) {
			s := storetest.Open(b, e)
			acct := storetest.Account(b, s)
			agents := listAgentPageImport(b, s, acct.ID)
			mid := agents[len(agents)/2]
			q := store.AgentQuery{AccountID: acct.ID, AfterCreatedAt: mid.CreatedAt, AfterID: mid.ID, Limit: 31}
			b.Run("ListAgents", func(b *testing.B) { listAgentPageBenchAgents(b, s, q) })
			b.Run("ListAgentItems", func(b *testing.B) { listAgentPageBenchItems(b, s, q) })
		})
	}
}

// listAgentPageImport imports 3,000 agents into the account, a
// millisecond apart, and returns them.
func listAgentPageImport(b *testing.B, s *store.Store, accountID string) []domain.Agent {
	b.Helper()
	agents := make([]domain.Agent, 3000)
	for i := range agents {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		agents[i] = domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: accountID,
			Name: fmt.Sprintf("agent %07d", i), Instructions: "be kind", Enabled: true, CreatedAt: at, UpdatedAt: at}
	}
	if err := s.ImportAgents(context.Background(), agents); err != nil {
		b.Fatal(err)
	}
	return agents
}

// listAgentPageBenchAgents reads the page q through ListAgents.
func listAgentPageBenchAgents(b *testing.B, s *store.Store, q store.AgentQuery) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if l, err := s.ListAgents(ctx, q); err != nil || len(l) != 31 {
			b.Fatal(len(l), err)
		}
	}
}

// listAgentPageBenchItems reads the page q through ListAgentItems.
func listAgentPageBenchItems(b *testing.B, s *store.Store, q store.AgentQuery) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if l, err := s.ListAgentItems(ctx, q); err != nil || len(l) != 31 {
			b.Fatal(len(l), err)
		}
	}
}

// TestReadPoolKeepsItsConnections: as many concurrent reads as the pool
// holds open connections find them again afterwards. A pool that kept
// fewer idle than open closed a connection after nearly every busy moment
// and opened another for the next (a PostgreSQL backend started, and every
// statement prepared again, per burst): the agent list lost half its
// throughput and gained 40 ms at p99.
func TestReadPoolKeepsItsConnections(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		k := storetest.Key(t, s, a.ID)
		open := s.ReadPoolStats().MaxOpenConnections
		var wg sync.WaitGroup
		for range open {
			wg.Go(func() {
				for range 30 {
					if _, _, err := s.ReadKeyByPrefix(ctx, k.Prefix); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if st := s.ReadPoolStats(); st.MaxIdleClosed != 0 {
			t.Fatalf("%d of %d connections closed for want of idle room (%+v)", st.MaxIdleClosed, st.OpenConnections, st)
		}
	})
}
