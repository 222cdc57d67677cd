package keys

import (
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

func TestKeyCacheEpochs(t *testing.T) {
	c := newKeyCache(10)
	e := func(id, acct string) cachedKey { return cachedKey{key: domain.APIKey{ID: id, AccountID: acct}} }
	c.synced = 1
	c.put(1, "a", e("a1", "acct_a"))
	c.put(1, "b", e("b1", "acct_b"))
	if got, ok := c.get(1, "a"); !ok || got.key.ID != "a1" {
		t.Fatalf("get after put: %v %v", got, ok)
	}
	// A sync to 2 that found acct_a changed drops its keys only.
	c.mu.Lock()
	c.dropAccount("acct_a")
	c.synced = 2
	c.mu.Unlock()
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a key of the changed account was kept")
	}
	if got, ok := c.get(2, "b"); !ok || got.key.ID != "b1" {
		t.Fatalf("b, of an account that did not change: %v %v", got, ok)
	}
	// Read under epoch 1, put after the cache synced to 2: a revocation may
	// have committed in between, so it must not be kept.
	c.put(1, "a", e("a1-late", "acct_a"))
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a late put of an older epoch was kept")
	}
	c.put(2, "a", e("a2", "acct_a"))
	if got, ok := c.get(2, "a"); !ok || got.key.ID != "a2" {
		t.Fatalf("a read at 2: %v %v", got, ok)
	}
}

func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache(3)
	c.synced = 1
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		c.put(1, p, cachedKey{key: domain.APIKey{ID: p}})
	}
	if n := len(c.entries); n != 3 {
		t.Fatalf("%d entries, want at most 3", n)
	}
	if _, ok := c.get(1, "e"); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// get is what lookupKey serves from c: the entry for prefix, if held
// under epoch.
func (c *keyCache) get(epoch int64, prefix string) (cachedKey, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[prefix]
	return e, ok && c.synced >= epoch
}

// TestKeyCacheForgetsWhatChanged: the tracker's Sync drops the keys of
// the accounts that changed only, or every key when told all (a change
// by a 1.2 writer during a rolling upgrade names no account).
func TestKeyCacheForgetsWhatChanged(t *testing.T) {
	c := newKeyCache(10)
	c.synced = 4
	c.put(4, "a", cachedKey{key: domain.APIKey{ID: "a", AccountID: "acct_a"}})
	c.put(4, "b", cachedKey{key: domain.APIKey{ID: "b", AccountID: "acct_b"}})
	c.Forget(store.KeyChanges{"acct_a": 5}, false, 5)
	if _, ok := c.entries["a"]; ok || len(c.entries) != 1 || c.synced != 5 {
		t.Fatalf("after acct_a changed: %d entries, synced %d", len(c.entries), c.synced)
	}
	c.Forget(nil, true, 6)
	if len(c.entries) != 0 || len(c.byAccount) != 0 || c.synced != 6 {
		t.Fatalf("after a legacy change: %d entries, %d accounts, synced %d", len(c.entries), len(c.byAccount), c.synced)
	}
}
