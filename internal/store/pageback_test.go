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
		a := storetest.Account(t, s)
		pagesBackwardsSeed(t, s, a.ID)
		keyPage := func(c store.Cursor) ([]string, store.Cursor, store.Cursor) {
			return pagesBackwardsKeyPage(t, s, a.ID, c)
		}
		agentPage := func(c store.Cursor) ([]string, store.Cursor, store.Cursor) {
			return pagesBackwardsAgentPage(t, s, a.ID, c)
		}
		for name, read := range map[string]func(store.Cursor) ([]string, store.Cursor, store.Cursor){"keys": keyPage, "agents": agentPage} {
			forward, back := pagesBackwardsReadForwards(read)
			pagesBackwardsCheckBackwards(t, name, read, forward, back)
		}
	})
}

// pagesBackwardsSeed creates 23 keys and 23 agents of the account, three a
// millisecond.
func pagesBackwardsSeed(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	ctx := context.Background()
	for i := range 23 {
		// Three rows a millisecond: the cursor needs the id too.
		at := t0.Add(time.Duration(i/3) * time.Millisecond)
		k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, at), AccountID: accountID, Name: fmt.Sprintf("Key %02d", i),
			Prefix: fmt.Sprintf("b%011d", i), Env: domain.EnvLive, Hash: []byte{byte(i)},
			Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: at}
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: accountID, Name: fmt.Sprintf("Agent %02d", i),
			Enabled: true, CreatedAt: at, UpdatedAt: at}
		if err := s.CreateAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
	}
}

// pagesBackwardsKeyPage reads the page of keys at c: its ids, the cursor
// to the next, and a Back cursor at its first row.
func pagesBackwardsKeyPage(t *testing.T, s *store.Store, accountID string, c store.Cursor) ([]string, store.Cursor, store.Cursor) {
	t.Helper()
	ks, more, err := s.KeyPage(context.Background(), store.KeyPageQuery{AccountID: accountID, Now: t0, After: c, Limit: 5})
	if err != nil || len(ks) == 0 {
		t.Fatalf("key page after %v: %d, %v", c, len(ks), err)
	}
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	return ids, more, store.Cursor{CreatedAt: ks[0].CreatedAt, ID: ks[0].ID, Back: true}
}

// pagesBackwardsAgentPage reads the page of agents at c: its ids, the
// cursor to the next, and a Back cursor at its first row.
func pagesBackwardsAgentPage(t *testing.T, s *store.Store, accountID string, c store.Cursor) ([]string, store.Cursor, store.Cursor) {
	t.Helper()
	items, more, err := s.AgentPage(context.Background(), store.AgentPageQuery{AccountID: accountID, After: c, Limit: 5})
	if err != nil || len(items) == 0 {
		t.Fatalf("agent page after %v: %d, %v", c, len(items), err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids, more, store.Cursor{CreatedAt: items[0].CreatedAt, ID: items[0].ID, Back: true}
}

// pagesBackwardsReadForwards reads every page forwards: each page's ids,
// and the Back cursor at the last page's first row.
func pagesBackwardsReadForwards(read func(store.Cursor) ([]string, store.Cursor, store.Cursor)) (forward [][]string, back store.Cursor) {
	var c store.Cursor
	for {
		ids, more, first := read(c)
		forward, back = append(forward, ids), first
		if more.IsZero() {
			break
		}
		c = more
	}
	return forward, back
}

// pagesBackwardsCheckBackwards reads back from the last page and checks
// each page is the one read forwards, with a cursor on back until the
// first.
func pagesBackwardsCheckBackwards(t *testing.T, name string, read func(store.Cursor) ([]string, store.Cursor, store.Cursor), forward [][]string, back store.Cursor) {
	t.Helper()
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
