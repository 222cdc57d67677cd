package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestPagesBackwards, on both engines: reading a list backwards (a Back
// cursor at a page's first row) gives the pages read forwards, in the
// list's order, with a cursor to go on back until the first page; for
// keys (newest first) and for agents (oldest first, counters beside).
func TestPagesBackwards(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		for i := range 23 {
			// Three rows a millisecond: the cursor needs the id too.
			at := t0.Add(time.Duration(i/3) * time.Millisecond)
			k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, at), AccountID: a.ID, Name: fmt.Sprintf("Key %02d", i),
				Prefix: fmt.Sprintf("b%011d", i), Env: domain.EnvLive, Hash: []byte{byte(i)},
				Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: at}
			if err := s.CreateKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: a.ID, Name: fmt.Sprintf("Agent %02d", i),
				Enabled: true, CreatedAt: at, UpdatedAt: at}
			if err := s.CreateAgent(ctx, ag); err != nil {
				t.Fatal(err)
			}
		}
		keyPage := func(c store.Cursor) ([]string, store.Cursor, store.Cursor) {
			ks, more, err := s.KeyPage(ctx, store.KeyPageQuery{AccountID: a.ID, Now: t0, After: c, Limit: 5})
			if err != nil || len(ks) == 0 {
				t.Fatalf("key page after %v: %d, %v", c, len(ks), err)
			}
			var ids []string
			for _, k := range ks {
				ids = append(ids, k.ID)
			}
			return ids, more, store.Cursor{CreatedAt: ks[0].CreatedAt, ID: ks[0].ID, Back: true}
		}
		agentPage := func(c store.Cursor) ([]string, store.Cursor, store.Cursor) {
			items, more, err := s.AgentPage(ctx, store.AgentPageQuery{AccountID: a.ID, After: c, Limit: 5})
			if err != nil || len(items) == 0 {
				t.Fatalf("agent page after %v: %d, %v", c, len(items), err)
			}
			var ids []string
			for _, it := range items {
				ids = append(ids, it.ID)
			}
			return ids, more, store.Cursor{CreatedAt: items[0].CreatedAt, ID: items[0].ID, Back: true}
		}
		for name, read := range map[string]func(store.Cursor) ([]string, store.Cursor, store.Cursor){"keys": keyPage, "agents": agentPage} {
			var forward [][]string
			var c, back store.Cursor
			for {
				ids, more, first := read(c)
				forward, back = append(forward, ids), first
				if more.IsZero() {
					break
				}
				c = more
			}
			for i := len(forward) - 2; i >= 0; i-- {
				if parsed, ok := store.ParseCursor(back.String()); !ok || parsed != back {
					t.Fatalf("%s: cursor %q does not read back", name, back.String())
				}
				ids, more, _ := read(back)
				if !slices.Equal(ids, forward[i]) {
					t.Fatalf("%s: page %d backwards %v, forwards %v", name, i+1, ids, forward[i])
				}
				if (i == 0) != more.IsZero() {
					t.Fatalf("%s: page %d backwards: more %v", name, i+1, more)
				}
				back = more
			}
		}
	})
}
