package store

import (
	"testing"
	"time"
)

func TestVersionCacheServesOnlyTheSameVersionWithinTheBound(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newVersionCache(100)
	c.now = func() time.Time { return now }
	k := listKey{account: "acct", limit: 31}
	page := []AgentItem{{ID: "agt_1"}}
	c.put("acct", 7, k, page, now)

	if _, ok := c.get("acct", 7, k); !ok {
		t.Fatal("a page read under version 7 is not served under 7")
	}
	if _, ok := c.get("acct", 8, k); ok {
		t.Fatal("a page read under version 7 is served under 8")
	}
	if _, ok := c.get("acct", -1, k); ok {
		t.Fatal("a page read under version 7 is served with no version in Redis")
	}
	if _, ok := c.get("other", 7, listKey{account: "other", limit: 31}); ok {
		t.Fatal("another account's page is served")
	}
	if _, ok := c.get("acct", 7, listKey{account: "acct", limit: 11}); ok {
		t.Fatal("another query's page is served")
	}
	now = now.Add(ListStaleBound - time.Millisecond)
	if _, ok := c.get("acct", 7, k); !ok {
		t.Fatal("a page younger than the bound is not served")
	}
	now = now.Add(time.Millisecond)
	if _, ok := c.get("acct", 7, k); ok {
		t.Fatal("a page as old as the bound is served")
	}

	// A page put under another version replaces the account's pages.
	c.put("acct", 7, k, page, now)
	c.put("acct", 9, listKey{account: "acct", limit: 11}, page, now)
	if _, ok := c.get("acct", 7, k); ok {
		t.Fatal("a page of an older version survived a newer put")
	}
	// A local change drops the account's pages.
	c.drop("acct")
	if _, ok := c.get("acct", 9, listKey{account: "acct", limit: 11}); ok || c.items != 0 {
		t.Fatalf("after drop: served %v, %d items held", ok, c.items)
	}
}

func TestVersionCacheBoundsItsItems(t *testing.T) {
	c := newVersionCache(100)
	page := make([]AgentItem, 20)
	for i := range 50 {
		acct := string(rune('a' + i%26))
		c.put(acct, int64(i), listKey{account: acct, limit: i}, page, time.Now())
		if c.items > 100 {
			t.Fatalf("after %d puts %d items held, bound 100", i+1, c.items)
		}
	}
	// One account alone never holds more than the bound either.
	for i := range 20 {
		c.put("z", 1, listKey{account: "z", limit: i}, page, time.Now())
		if c.items > 100 {
			t.Fatalf("one account: %d items held, bound 100", c.items)
		}
	}
	// A page above a quarter of the bound is not held.
	c.put("big", 1, listKey{account: "big"}, make([]AgentItem, 26), time.Now())
	if _, ok := c.get("big", 1, listKey{account: "big"}); ok {
		t.Fatal("a page above a quarter of the bound is held")
	}
}
