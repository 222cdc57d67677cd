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
		ctx := context.Background()
		a, other := storetest.Account(t, s), storetest.Account(t, s)
		mk := func(acct string, i int, at time.Time) domain.APIKey {
			k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, at), AccountID: acct, Name: fmt.Sprintf("Key_%02d", i),
				Prefix: fmt.Sprintf("p%011d", i) + acct[len(acct)-3:], Env: domain.EnvLive, Hash: []byte{byte(i)},
				Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: at}
			if i%4 == 1 {
				e := t0.Add(time.Hour)
				k.ExpiresAt = &e
			}
			ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, at), AccountID: acct, KeyID: k.ID, Action: "created", Actor: "ann@acme.test", CreatedAt: at}
			if err := s.CreateKey(ctx, k, ev); err != nil {
				t.Fatal(err)
			}
			return k
		}
		for i := range 23 {
			// Three keys a millisecond: the cursor needs the id too.
			mk(a.ID, i, t0.Add(time.Duration(i/3)*time.Millisecond))
		}
		mk(other.ID, 99, t0)
		seen := map[string]bool{}
		var after store.Cursor
		var last domain.APIKey
		for pages := 0; ; pages++ {
			ks, next, err := s.KeyPage(ctx, store.KeyPageQuery{AccountID: a.ID, Now: t0, After: after, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range ks {
				if seen[k.ID] || k.AccountID != a.ID {
					t.Fatalf("key %s again, or another account's", k.ID)
				}
				if last.ID != "" && (k.CreatedAt.After(last.CreatedAt) || (k.CreatedAt.Equal(last.CreatedAt) && k.ID > last.ID)) {
					t.Fatal("not newest first")
				}
				seen[k.ID], last = true, k
			}
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
		count := func(q store.KeyPageQuery) int {
			t.Helper()
			q.AccountID, q.Limit = a.ID, 100
			ks, _, err := s.KeyPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return len(ks)
		}
		if n := count(store.KeyPageQuery{Status: domain.KeyExpired, Now: t0.Add(2 * time.Hour)}); n != 6 {
			t.Errorf("expired: %d", n)
		}
		if n := count(store.KeyPageQuery{Status: domain.KeyActive, Now: t0.Add(2 * time.Hour)}); n != 17 {
			t.Errorf("active: %d", n)
		}
		if n := count(store.KeyPageQuery{Status: domain.KeyActive, Now: t0}); n != 23 {
			t.Errorf("active before the expiries: %d", n)
		}
		for q, want := range map[string]int{"key_1": 10, "KEY_1": 10, "ey_0": 10, "%": 0, "_": 23, "p0000000000": 10, "p00000000007": 1, "Key_99": 0} {
			if n := count(store.KeyPageQuery{Search: q, Now: t0}); n != want {
				t.Errorf("search %q: %d, want %d", q, n, want)
			}
		}
		items, next, err := s.AuditPage(ctx, store.AuditPageQuery{AccountID: a.ID, Search: "key_22", Limit: 5})
		if err != nil || len(items) != 1 || items[0].KeyName != "Key_22" || !next.IsZero() {
			t.Fatalf("audit search: %+v %v", items, err)
		}
		items, next, err = s.AuditPage(ctx, store.AuditPageQuery{AccountID: a.ID, Limit: 20})
		if err != nil || len(items) != 20 || next.IsZero() {
			t.Fatalf("audit page: %d %v", len(items), err)
		}
		if rest, _, _ := s.AuditPage(ctx, store.AuditPageQuery{AccountID: a.ID, After: next, Limit: 20}); len(rest) != 3 {
			t.Fatalf("audit second page: %d", len(rest))
		}
		for i := range 7 {
			newUser(t, s, a.ID, fmt.Sprintf("u%d@acme.test", i), domain.RoleAgent)
		}
		us, unext, err := s.UserPage(ctx, store.UserPageQuery{AccountID: a.ID, Limit: 5})
		if err != nil || len(us) != 5 || unext.IsZero() {
			t.Fatalf("users: %d %v", len(us), err)
		}
		if us2, n2, _ := s.UserPage(ctx, store.UserPageQuery{AccountID: a.ID, After: unext, Limit: 5}); len(us2) != 2 || !n2.IsZero() {
			t.Fatalf("users page 2: %d", len(us2))
		}
		if us, _, _ := s.UserPage(ctx, store.UserPageQuery{AccountID: a.ID, Search: "U3@", Limit: 5}); len(us) != 1 {
			t.Fatalf("user search: %d", len(us))
		}
		for _, n := range []string{"Zeta", "alpha", "Beta", "gamma"} {
			storetest.Agent(t, s, a.ID, n, t0)
		}
		ags, anext, err := s.AgentPickerPage(ctx, a.ID, "", "", 2)
		if err != nil || len(ags) != 2 || ags[0].Name != "alpha" || ags[1].Name != "Beta" || anext == "" {
			t.Fatalf("picker: %+v %q %v", ags, anext, err)
		}
		if ags, anext, _ = s.AgentPickerPage(ctx, a.ID, "", anext, 2); len(ags) != 2 || ags[0].Name != "gamma" || anext != "" {
			t.Fatalf("picker page 2: %+v %q", ags, anext)
		}
		if ags, _, _ = s.AgentPickerPage(ctx, a.ID, "ETA", "", 10); len(ags) != 2 {
			t.Fatalf("picker search: %+v", ags)
		}
	})
}

// CreateKeyRetiring sets the old key's expiry in the key's transaction,
// never later than one it has; UpdateKeyText is ErrNotFound for another
// account's key.
func TestRetiringAndText(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, other := storetest.Account(t, s), storetest.Account(t, s)
		mk := func(name, prefix string, expires *time.Time) domain.APIKey {
			k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: a.ID, Name: name, Prefix: prefix, Env: domain.EnvLive,
				Hash: []byte(prefix), Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: t0, ExpiresAt: expires}
			return k
		}
		old := mk("old", "aaaaaaaaaaa1", nil)
		if err := s.CreateKey(ctx, old); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Hour)
		nu := mk("new", "aaaaaaaaaaa2", nil)
		if err := s.CreateKeyRetiring(ctx, nu, old.ID, at); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetKey(ctx, a.ID, old.ID)
		if got.ExpiresAt == nil || !got.ExpiresAt.Equal(at) {
			t.Fatalf("old key expires %v", got.ExpiresAt)
		}
		if err := s.CreateKeyRetiring(ctx, mk("newer", "aaaaaaaaaaa3", nil), old.ID, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetKey(ctx, a.ID, old.ID); !got.ExpiresAt.Equal(at) {
			t.Fatal("a later retirement moved the expiry out")
		}
		if taken, err := s.KeyNameTaken(ctx, a.ID, "newer"); err != nil || !taken {
			t.Fatalf("name taken: %v %v", taken, err)
		}
		if taken, _ := s.KeyNameTaken(ctx, other.ID, "newer"); taken {
			t.Fatal("another account's name is taken")
		}
		if rs, err := s.KeysRotatedFrom(ctx, a.ID, old.ID); err != nil || len(rs) != 0 {
			t.Fatalf("rotated from (none set): %v %v", rs, err)
		}
		ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: other.ID, KeyID: old.ID, Action: "renamed", CreatedAt: t0}
		if err := s.UpdateKeyText(ctx, other.ID, old.ID, "x", "", ev); err != domain.ErrNotFound {
			t.Fatalf("another account's key: %v", err)
		}
		ev.AccountID = a.ID
		if err := s.UpdateKeyText(ctx, a.ID, old.ID, "renamed", "d", ev); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetKey(ctx, a.ID, old.ID); got.Name != "renamed" || got.Description != "d" {
			t.Fatalf("text: %+v", got)
		}
	})
}
