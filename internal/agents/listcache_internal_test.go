package agents

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
)

func items(n int) []store.AgentItem {
	out := make([]store.AgentItem, n)
	for i := range out {
		out[i].ID = fmt.Sprint("agt_", i)
	}
	return out
}

// change is a token of SQLite's data_version dv.
func change(dv int64) fresh.ListToken {
	return fresh.ListToken{Change: fresh.ChangeToken{Conn: 1, DataVersion: dv}}
}

// version is a token of the account's list version v.
func version(v int64) fresh.ListToken { return fresh.ListToken{Version: v, Expires: true} }

func TestListCacheTokensAndBounds(t *testing.T) {
	c := newListCache(100)
	k1, k2 := listKey{account: "a", limit: 10}, listKey{account: "b", limit: 10}
	t1, t2 := change(5), change(6)
	var never time.Time

	c.put(t1, k1, items(10), never)
	if _, ok := c.get(t1, k1, never); !ok {
		t.Fatal("a page held under t1 is not served under t1")
	}
	if _, ok := c.get(t2, k1, never); ok {
		t.Fatal("a page held under t1 is served under another token")
	}
	if _, ok := c.get(t1, k2, never); ok {
		t.Fatal("another query's page is served")
	}
	c.put(t2, k1, items(3), never)
	c.put(t1, k1, items(3), never) // read under an older token, put late
	if _, ok := c.get(t2, k1, never); ok {
		t.Fatal("a page read under an older token is served under the newer one")
	}

	// Bounds: never more than maxItems, a page over a quarter is not held,
	// replacing a page counts its items once.
	for i := range 50 {
		c.put(t2, listKey{account: fmt.Sprint(i)}, items(7), never)
		if c.items > 100 {
			t.Fatalf("%d items held, bound 100", c.items)
		}
	}
	n := 0
	for _, p := range c.pages {
		n += len(p.items)
	}
	if n != c.items {
		t.Fatalf("count %d, pages hold %d", c.items, n)
	}
	c.put(t2, listKey{account: "big"}, items(26), never)
	if _, ok := c.get(t2, listKey{account: "big"}, never); ok {
		t.Fatal("a page over a quarter of the bound was held")
	}
	c = newListCache(100)
	c.put(t1, k1, items(10), never)
	c.put(t1, k1, items(4), never)
	if c.items != 4 {
		t.Fatalf("replaced page counted as %d items, want 4", c.items)
	}
}

func TestListCacheServesAVersionOnlyWithinTheBound(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newListCache(100)
	k := listKey{account: "acct", limit: 31}
	page := []store.AgentItem{{ID: "agt_1"}}
	c.put(version(7), k, page, now)

	if _, ok := c.get(version(7), k, now); !ok {
		t.Fatal("a page read under version 7 is not served under 7")
	}
	if _, ok := c.get(version(8), k, now); ok {
		t.Fatal("a page read under version 7 is served under 8")
	}
	if _, ok := c.get(version(-1), k, now); ok {
		t.Fatal("a page read under version 7 is served with no version in Redis")
	}
	if _, ok := c.get(fresh.ListToken{Version: 7, Writes: 1, Expires: true}, k, now); ok {
		t.Fatal("a page read before an agent write here is served after it")
	}
	if _, ok := c.get(version(7), listKey{account: "other", limit: 31}, now); ok {
		t.Fatal("another account's page is served")
	}
	if _, ok := c.get(version(7), listKey{account: "acct", limit: 11}, now); ok {
		t.Fatal("another query's page is served")
	}
	if _, ok := c.get(version(7), k, now.Add(fresh.ListStaleBound-time.Millisecond)); !ok {
		t.Fatal("a page younger than the bound is not served")
	}
	if _, ok := c.get(version(7), k, now.Add(fresh.ListStaleBound)); ok {
		t.Fatal("a page as old as the bound is served")
	}
	// A page put under another version replaces the query's page.
	c.put(version(9), k, page, now)
	if _, ok := c.get(version(7), k, now); ok {
		t.Fatal("a page of an older version survived a newer put")
	}
}

func TestListCacheBoundsItsItems(t *testing.T) {
	c := newListCache(100)
	page := make([]store.AgentItem, 20)
	for i := range 50 {
		acct := string(rune('a' + i%26))
		c.put(version(int64(i)), listKey{account: acct, limit: i}, page, time.Now())
		if c.items > 100 {
			t.Fatalf("after %d puts %d items held, bound 100", i+1, c.items)
		}
	}
	// One account alone never holds more than the bound either.
	for i := range 20 {
		c.put(version(1), listKey{account: "z", limit: i}, page, time.Now())
		if c.items > 100 {
			t.Fatalf("one account: %d items held, bound 100", c.items)
		}
	}
	// A page above a quarter of the bound is not held.
	c.put(version(1), listKey{account: "big"}, make([]store.AgentItem, 26), time.Now())
	if _, ok := c.get(version(1), listKey{account: "big"}, time.Now()); ok {
		t.Fatal("a page above a quarter of the bound is held")
	}
}
