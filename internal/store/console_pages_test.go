package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// The console's keyset pages, on both engines: pages of keys newest first
// that together hold every key once (also with several keys in one
// millisecond), the status filter at a given time, search by name
// (case-insensitive, LIKE's wildcards as text) or prefix, another
// account's rows never; the audit trail with its keys' names; users; the
// agent picker by name.
func TestConsolePages(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		a, other := storetest.Account(t, s), storetest.Account(t, s)
		for i := range 23 {
			// Three keys a millisecond: the cursor needs the id too.
			consolePagesMakeKey(t, s, a.ID, i, t0.Add(time.Duration(i/3)*time.Millisecond))
		}
		consolePagesMakeKey(t, s, other.ID, 99, t0)
		consolePagesWalkKeys(t, s, a.ID)
		consolePagesCheckFilters(t, s, a.ID)
		consolePagesCheckAudit(t, s, a.ID)
		consolePagesCheckUsers(t, s, a.ID)
		consolePagesCheckPicker(t, s, a.ID)
	})
}

// consolePagesMakeKey creates key i of acct at at, every fourth expiring an
// hour after t0, with its "created" audit event.
func consolePagesMakeKey(t *testing.T, s *store.Store, acct string, i int, at time.Time) {
	t.Helper()
	k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, at), AccountID: acct, Name: fmt.Sprintf("Key_%02d", i),
		Prefix: fmt.Sprintf("p%011d", i) + acct[len(acct)-3:], Env: domain.EnvLive, Hash: []byte{byte(i)},
		Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: at}
	if i%4 == 1 {
		e := t0.Add(time.Hour)
		k.ExpiresAt = &e
	}
	ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, at), AccountID: acct, KeyID: k.ID, Action: "created", Actor: "ann@acme.test", CreatedAt: at}
	if err := s.CreateKey(context.Background(), k, ev); err != nil {
		t.Fatal(err)
	}
}

// consolePagesWalkKeys reads the account's keys five a page: 23 keys over
// five pages, each once, newest first, every cursor reading back.
func consolePagesWalkKeys(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	seen := map[string]bool{}
	var after store.Cursor
	var last domain.APIKey
	for pages := 0; ; pages++ {
		ks, next, err := s.KeyPage(context.Background(), store.KeyPageQuery{AccountID: accountID, Now: t0, After: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		last = consolePagesCheckKeyOrder(t, ks, accountID, seen, last)
		if next.IsZero() {
			if len(seen) != 23 || pages != 4 {
				t.Fatalf("%d keys over %d pages", len(seen), pages+1)
			}
			break
		}
		c, ok := store.ParseCursor(next.String())
		if !ok || c != next {
			t.Fatalf("cursor %q does not read back", next.String())
		}
		after = next
	}
}

// consolePagesCheckKeyOrder checks one page's keys are the account's, unseen,
// and newest first after last; it marks them seen and returns the page's last.
func consolePagesCheckKeyOrder(t *testing.T, ks []domain.APIKey, accountID string, seen map[string]bool, last domain.APIKey) domain.APIKey {
	t.Helper()
	for _, k := range ks {
		if seen[k.ID] || k.AccountID != accountID {
			t.Fatalf("key %s again, or another account's", k.ID)
		}
		if last.ID != "" && (k.CreatedAt.After(last.CreatedAt) || (k.CreatedAt.Equal(last.CreatedAt) && k.ID > last.ID)) {
			t.Fatal("not newest first")
		}
		seen[k.ID], last = true, k
	}
	return last
}

// consolePagesCount is how many of the account's keys q finds in one page
// of 100.
func consolePagesCount(t *testing.T, s *store.Store, accountID string, q store.KeyPageQuery) int {
	t.Helper()
	q.AccountID, q.Limit = accountID, 100
	ks, _, err := s.KeyPage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return len(ks)
}

// consolePagesCheckFilters checks the status filter before and after the
// expiries, and search by name or prefix.
func consolePagesCheckFilters(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	if n := consolePagesCount(t, s, accountID, store.KeyPageQuery{Status: domain.KeyExpired, Now: t0.Add(2 * time.Hour)}); n != 6 {
		t.Errorf("expired: %d", n)
	}
	if n := consolePagesCount(t, s, accountID, store.KeyPageQuery{Status: domain.KeyActive, Now: t0.Add(2 * time.Hour)}); n != 17 {
		t.Errorf("active: %d", n)
	}
	if n := consolePagesCount(t, s, accountID, store.KeyPageQuery{Status: domain.KeyActive, Now: t0}); n != 23 {
		t.Errorf("active before the expiries: %d", n)
	}
	for q, want := range map[string]int{"key_1": 10, "KEY_1": 10, "ey_0": 10, "%": 0, "_": 23, "p0000000000": 10, "p00000000007": 1, "Key_99": 0} {
		if n := consolePagesCount(t, s, accountID, store.KeyPageQuery{Search: q, Now: t0}); n != want {
			t.Errorf("search %q: %d, want %d", q, n, want)
		}
	}
}

// consolePagesCheckAudit checks the audit trail: search by key name, and
// 23 events over two pages of 20.
func consolePagesCheckAudit(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	ctx := context.Background()
	items, next, err := s.AuditPage(ctx, store.AuditPageQuery{AccountID: accountID, Search: "key_22", Limit: 5})
	if err != nil || len(items) != 1 || items[0].KeyName != "Key_22" || !next.IsZero() {
		t.Fatalf("audit search: %+v %v", items, err)
	}
	items, next, err = s.AuditPage(ctx, store.AuditPageQuery{AccountID: accountID, Limit: 20})
	if err != nil || len(items) != 20 || next.IsZero() {
		t.Fatalf("audit page: %d %v", len(items), err)
	}
	if rest, _, _ := s.AuditPage(ctx, store.AuditPageQuery{AccountID: accountID, After: next, Limit: 20}); len(rest) != 3 {
		t.Fatalf("audit second page: %d", len(rest))
	}
}

// consolePagesCheckUsers adds seven users and checks their pages and the
// search by email.
func consolePagesCheckUsers(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	ctx := context.Background()
	for i := range 7 {
		newUser(t, s, accountID, fmt.Sprintf("u%d@acme.test", i), domain.RoleAgent)
	}
	us, unext, err := s.UserPage(ctx, store.UserPageQuery{AccountID: accountID, Limit: 5})
	if err != nil || len(us) != 5 || unext.IsZero() {
		t.Fatalf("users: %d %v", len(us), err)
	}
	if us2, n2, _ := s.UserPage(ctx, store.UserPageQuery{AccountID: accountID, After: unext, Limit: 5}); len(us2) != 2 || !n2.IsZero() {
		t.Fatalf("users page 2: %d", len(us2))
	}
	if us, _, _ := s.UserPage(ctx, store.UserPageQuery{AccountID: accountID, Search: "U3@", Limit: 5}); len(us) != 1 {
		t.Fatalf("user search: %d", len(us))
	}
}

// consolePagesCheckPicker adds four agents and checks the agent picker's
// pages, by name case-insensitively, and its search.
func consolePagesCheckPicker(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []string{"Zeta", "alpha", "Beta", "gamma"} {
		storetest.Agent(t, s, accountID, n, t0)
	}
	ags, anext, err := s.AgentPickerPage(ctx, accountID, "", "", 2)
	if err != nil || len(ags) != 2 || ags[0].Name != "alpha" || ags[1].Name != "Beta" || anext == "" {
		t.Fatalf("picker: %+v %q %v", ags, anext, err)
	}
	if ags, anext, _ = s.AgentPickerPage(ctx, accountID, "", anext, 2); len(ags) != 2 || ags[0].Name != "gamma" || anext != "" {
		t.Fatalf("picker page 2: %+v %q", ags, anext)
	}
	if ags, _, _ = s.AgentPickerPage(ctx, accountID, "ETA", "", 10); len(ags) != 2 {
		t.Fatalf("picker search: %+v", ags)
	}
}

// CreateKeyRetiring sets the old key's expiry in the key's transaction,
// never later than one it has; UpdateKeyText is ErrNotFound for another
// account's key.
func TestRetiringAndText(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		a, other := storetest.Account(t, s), storetest.Account(t, s)
		old := retiringAndTextCheckRetire(t, s, a.ID)
		retiringAndTextCheckNames(t, s, a.ID, other.ID, old.ID)
		retiringAndTextCheckUpdate(t, s, a.ID, other.ID, old.ID)
	})
}

// retiringAndTextKey is a key of the account created at t0.
func retiringAndTextKey(accountID, name, prefix string, expires *time.Time) domain.APIKey {
	k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: accountID, Name: name, Prefix: prefix, Env: domain.EnvLive,
		Hash: []byte(prefix), Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: t0, ExpiresAt: expires}
	return k
}

// retiringAndTextCheckRetire creates the old key, retires it an hour after
// t0 with a new one, then again later with a newer one, and checks the
// expiry stays the first; it returns the old key.
func retiringAndTextCheckRetire(t *testing.T, s *store.Store, accountID string) domain.APIKey {
	t.Helper()
	ctx := context.Background()
	old := retiringAndTextKey(accountID, "old", "aaaaaaaaaaa1", nil)
	if err := s.CreateKey(ctx, old); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Hour)
	nu := retiringAndTextKey(accountID, "new", "aaaaaaaaaaa2", nil)
	if err := s.CreateKeyRetiring(ctx, nu, old.ID, at); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetKey(ctx, accountID, old.ID)
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(at) {
		t.Fatalf("old key expires %v", got.ExpiresAt)
	}
	if err := s.CreateKeyRetiring(ctx, retiringAndTextKey(accountID, "newer", "aaaaaaaaaaa3", nil), old.ID, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetKey(ctx, accountID, old.ID); !got.ExpiresAt.Equal(at) {
		t.Fatal("a later retirement moved the expiry out")
	}
	return old
}

// retiringAndTextCheckNames checks the newer key's name is taken in its
// account only, and that no key names the old one as rotated from.
func retiringAndTextCheckNames(t *testing.T, s *store.Store, accountID, otherID, oldID string) {
	t.Helper()
	ctx := context.Background()
	if taken, err := s.KeyNameTaken(ctx, accountID, "newer"); err != nil || !taken {
		t.Fatalf("name taken: %v %v", taken, err)
	}
	if taken, _ := s.KeyNameTaken(ctx, otherID, "newer"); taken {
		t.Fatal("another account's name is taken")
	}
	if rs, err := s.KeysRotatedFrom(ctx, accountID, oldID); err != nil || len(rs) != 0 {
		t.Fatalf("rotated from (none set): %v %v", rs, err)
	}
}

// retiringAndTextCheckUpdate checks UpdateKeyText refuses the other account
// and renames the old key for its own.
func retiringAndTextCheckUpdate(t *testing.T, s *store.Store, accountID, otherID, oldID string) {
	t.Helper()
	ctx := context.Background()
	ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: otherID, KeyID: oldID, Action: "renamed", CreatedAt: t0}
	if err := s.UpdateKeyText(ctx, otherID, oldID, "x", "", ev); err != domain.ErrNotFound {
		t.Fatalf("another account's key: %v", err)
	}
	ev.AccountID = accountID
	if err := s.UpdateKeyText(ctx, accountID, oldID, "renamed", "d", ev); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetKey(ctx, accountID, oldID); got.Name != "renamed" || got.Description != "d" {
		t.Fatalf("text: %+v", got)
	}
}
