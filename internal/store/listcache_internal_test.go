package store

import (
	"fmt"
	"testing"
)

func items(n int) []AgentItem {
	out := make([]AgentItem, n)
	for i := range out {
		out[i].ID = fmt.Sprint("agt_", i)
	}
	return out
}

func TestListCacheTokensAndBounds(t *testing.T) {
	c := newListCache(100)
	k1, k2 := listKey{account: "a", limit: 10}, listKey{account: "b", limit: 10}
	t1, t2 := changeToken{conn: 1, dataVersion: 5}, changeToken{conn: 1, dataVersion: 6}

	c.put(t1, k1, items(10))
	if _, ok := c.get(t1, k1); !ok {
		t.Fatal("a page held under t1 is not served under t1")
	}
	if _, ok := c.get(t2, k1); ok {
		t.Fatal("a page held under t1 is served under another token")
	}
	if _, ok := c.get(t1, k2); ok {
		t.Fatal("another query's page is served")
	}
	c.put(t2, k2, items(3))
	if _, ok := c.get(t1, k1); ok || c.items != 3 {
		t.Fatalf("a newer token did not empty the cache (held %d)", c.items)
	}
	c.put(t1, k1, items(3)) // read under an older token: dropped
	if _, ok := c.get(t1, k1); ok {
		t.Fatal("a page read under an older token was kept")
	}
	if !(changeToken{conn: 1, dataVersion: 9}).older(changeToken{conn: 2, dataVersion: 1}) {
		t.Fatal("a later connection's token is not newer")
	}

	// Bounds: never more than maxItems, a page over a quarter is not held,
	// replacing a page counts its items once.
	for i := range 50 {
		c.put(t2, listKey{account: fmt.Sprint(i)}, items(7))
		if c.items > 100 {
			t.Fatalf("%d items held, bound 100", c.items)
		}
	}
	n := 0
	for _, v := range c.entries {
		n += len(v)
	}
	if n != c.items {
		t.Fatalf("count %d, entries hold %d", c.items, n)
	}
	c.put(t2, listKey{account: "big"}, items(26))
	if _, ok := c.get(t2, listKey{account: "big"}); ok {
		t.Fatal("a page over a quarter of the bound was held")
	}
	c = newListCache(100)
	c.put(t1, k1, items(10))
	c.put(t1, k1, items(4))
	if c.items != 4 {
		t.Fatalf("replaced page counted as %d items, want 4", c.items)
	}
}
