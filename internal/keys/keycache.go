package keys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
)

// The key cache keeps keys the Authenticator read in memory, so that the
// authentication hot path does not read the key on every request, while a
// lookup keeps the promise of a read: what it returns is the key as it
// stands at some moment after the call began. Revocation, a rate-limit
// change and an account's (de)activation therefore still apply on the very
// next request, whichever process or instance made them.
//
// How: every write that can make a held key wrong raises the store's key
// epoch in its own transaction and records it against the key's account.
// Each lookup first learns the current epoch through a check that started
// after the call began (fresh.Tracker.Check, shared by concurrent
// callers); when it moved since the cache last looked, the tracker reads
// which accounts changed and the cache drops their keys only (Forget): a
// change in one account costs the others nothing. Every key held is thus
// the key as it stood when the epoch was synced.
type keyCache struct {
	max int

	mu sync.RWMutex
	// synced is the key epoch up to which every change is applied: each
	// entry is current as of it (-1: nothing read yet).
	synced    int64
	entries   map[string]cachedKey
	byAccount map[string]map[string]struct{} // account → prefixes held

	hits, misses, reads atomic.Uint64
}

type cachedKey struct {
	key           domain.APIKey
	accountActive bool
	accountEpoch  int64
}

// keyCacheMax bounds the memory the cache holds (about 520 bytes a key,
// twice that in RSS with the garbage collector's headroom); past it an
// arbitrary entry makes room, which costs its key one store read when it
// comes back. An instance with more keys in use than this is served as
// before the cache for the rest: a read per request.
const keyCacheMax = 20_000

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, synced: -1, entries: map[string]cachedKey{}, byAccount: map[string]map[string]struct{}{}}
}

// put holds e, read after a check saw epoch and the cache was synced to
// it. An entry read under an older epoch than the cache's is not kept (a
// change to its account may have committed since it was read, and the
// sync that dropped the account's keys has passed).
func (c *keyCache) put(epoch int64, prefix string, e cachedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch < c.synced {
		return
	}
	if _, held := c.entries[prefix]; !held && len(c.entries) >= c.max {
		for p := range c.entries { // map order is randomised: an arbitrary victim
			c.drop(p)
			break
		}
	}
	c.drop(prefix)
	c.entries[prefix] = e
	acct := e.key.AccountID
	if c.byAccount[acct] == nil {
		c.byAccount[acct] = map[string]struct{}{}
	}
	c.byAccount[acct][prefix] = struct{}{}
}

// drop removes the entry for prefix; c.mu is held.
func (c *keyCache) drop(prefix string) {
	e, ok := c.entries[prefix]
	if !ok {
		return
	}
	delete(c.entries, prefix)
	acct := e.key.AccountID
	delete(c.byAccount[acct], prefix)
	if len(c.byAccount[acct]) == 0 {
		delete(c.byAccount, acct)
	}
}

// dropAccount removes every entry of acct; c.mu is held.
func (c *keyCache) dropAccount(acct string) {
	for p := range c.byAccount[acct] {
		delete(c.entries, p)
	}
	delete(c.byAccount, acct)
}

// Forget drops the keys of the accounts in changed, or every key when
// all; the cache is synced to synced from then on (fresh.Holder).
func (c *keyCache) Forget(changed store.KeyChanges, all bool, synced int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all {
		clear(c.entries)
		clear(c.byAccount)
	}
	for acct := range changed {
		c.dropAccount(acct)
	}
	c.synced = synced
}

// CacheStats counts the key cache's work since the Authenticator was made.
type CacheStats struct {
	Hits   uint64 // lookups answered from memory
	Misses uint64 // lookups that read the key from the database
	Checks uint64 // the store's epoch checks (shared by concurrent callers)
	Reads  uint64 // keys read from the database, by lookups or equaliseRefusal
}

// CacheStats reports the key cache's counters (for metrics and for tests
// that must fail if the cache is bypassed).
func (a *Authenticator) CacheStats() CacheStats {
	c := a.cache
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Checks: a.fresh.Checks(), Reads: c.reads.Load()}
}

// keyLookup is what lookupKey found: the key and whether its account is
// active, whether it came from memory, the key epoch as of which it is
// current (the cache's synced epoch, or the check it was read after), and
// its account's key epoch when it was read.
type keyLookup struct {
	Key           domain.APIKey
	AccountActive bool
	fromMemory    bool
	epoch         int64
	accountEpoch  int64
}

// held is what the key was read under, for the tracker.
func (l keyLookup) held() fresh.Held { return fresh.Held{Synced: l.epoch, Account: l.accountEpoch} }

// lookupKey is the key with that prefix and whether its account is active,
// as they stand at some moment after the call began; a key it returns that
// is then refused goes through equaliseRefusal. ErrNotFound when no key
// has the prefix.
func (a *Authenticator) lookupKey(ctx context.Context, prefix string) (keyLookup, error) {
	c := a.cache
	m, err := a.fresh.Check(ctx)
	if err != nil {
		return keyLookup{}, err
	}
	if err := a.fresh.Sync(ctx, m); err != nil {
		return keyLookup{}, err
	}
	epoch := m.Epoch
	if l, ok := a.heldKey(prefix); ok && l.epoch >= epoch {
		c.hits.Add(1)
		return l, nil
	}
	c.misses.Add(1)
	h, err := a.readKey(ctx, prefix)
	if err != nil {
		return keyLookup{}, err
	}
	// Keyed by the stored prefix, not the caller's string, which may be a
	// slice of a whole request header.
	c.put(epoch, h.Key.Prefix, cachedKey{key: h.Key, accountActive: h.AccountActive, accountEpoch: h.AccountEpoch})
	return keyLookup{Key: h.Key, AccountActive: h.AccountActive, epoch: epoch, accountEpoch: h.AccountEpoch}, nil
}

func (a *Authenticator) readKey(ctx context.Context, prefix string) (store.HeldKey, error) {
	a.cache.reads.Add(1)
	return a.store.ReadHeldKey(ctx, prefix)
}

// heldKey returns the key with that prefix if it is held in memory, with
// the epoch it is held under, without asking the store: only a caller that
// finds that epoch current (lookupKey), or current in the mirror
// (fresh.Tracker.Mirrored), may use it; the caller counts the hit.
func (a *Authenticator) heldKey(prefix string) (keyLookup, bool) {
	c := a.cache
	c.mu.RLock()
	e, ok := c.entries[prefix]
	epoch := c.synced
	c.mu.RUnlock()
	if !ok {
		return keyLookup{}, false
	}
	return keyLookup{Key: e.key, AccountActive: e.accountActive, fromMemory: true, epoch: epoch, accountEpoch: e.accountEpoch}, true
}

// equaliseRefusal gives the refusal of a key found by lookupKey the cost of
// a lookup of an unknown prefix, which always reads the database and finds
// nothing: a key answered from memory is followed by that same read, for
// absentPrefix. Reading the refused key's own row instead costs more
// (scanning and decoding it), enough for a median to tell a known prefix
// from an unknown one: BenchmarkAuthRefusalTiming in internal/api prints
// the medians of both.
func (a *Authenticator) equaliseRefusal(ctx context.Context, l keyLookup) error {
	if !l.fromMemory {
		return nil // it read the database already
	}
	if _, err := a.readKey(ctx, absentPrefix); err != nil && !errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("read absent key: %w", err)
	}
	return nil
}

// absentPrefix has a prefix's length and a character no prefix has
// (credential.Parse accepts only 0-9 and a-z), so no key is ever found by
// it: reading it costs what reading an unknown prefix costs.
const absentPrefix = "------------"
