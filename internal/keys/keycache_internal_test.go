package keys

import (
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

func TestKeyCacheEpochs(t *testing.T) {
	c := newKeyCache(10)
	e := func(id string) cachedKey { return cachedKey{key: domain.APIKey{ID: id}} }
	c.put(1, "a", e("a1"))
	if got, ok := c.get(1, "a"); !ok || got.key.ID != "a1" {
		t.Fatalf("get after put: %v %v", got, ok)
	}
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("an entry of epoch 1 served under epoch 2")
	}
	c.put(2, "b", e("b2"))
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a newer epoch kept an older entry")
	}
	// Read under epoch 1, put after the cache moved to 2: a revocation may
	// have committed in between, so it must not be kept.
	c.put(1, "a", e("a1-late"))
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a late put of an older epoch was kept")
	}
	if got, ok := c.get(2, "b"); !ok || got.key.ID != "b2" {
		t.Fatalf("b: %v %v", got, ok)
	}
}

func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache(3)
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
	return e, ok && c.epoch == epoch
}
