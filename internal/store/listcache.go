package store

import (
	"context"
	"sync"
	"sync/atomic"
)

// The list cache keeps pages read by ListAgentItems on SQLite, keyed by
// their query, and serves one only while nothing at all has been committed
// to the database since it was read: each call first takes a change token
// through the key cache's check (keycache.go), which on SQLite is the
// data_version of a connection that never writes, so it moves with every
// commit by any connection of any process. No write path has to remember
// to invalidate anything, and a page answered from memory is the page the
// query would return at some moment after the call began — the promise an
// uncached read makes.
//
// The token costs the check's one PRAGMA data_version (no table read when
// nothing was committed); a commit empties the cache. A service taking writes
// therefore reads from the database as before; one serving the same pages
// between writes (clients polling a list) answers them from memory.
//
// PostgreSQL has no such token short of a round trip, which costs what the
// page does: there this cache is not used, and pages are held by version
// instead when Redis carries one (listversion.go).
//
// Both caches pass the yardstick by far: a list page of 100 costs serve
// CPU 70 vs 208 µs on SQLite, 104 vs 296 µs serve+PostgreSQL+Redis without
// them (bench/RESULTS.md).
type listCache struct {
	maxItems int

	mu      sync.RWMutex
	change  changeToken // every entry was read under it
	valid   bool
	entries map[listKey][]AgentItem
	items   int // held in entries

	hits, misses atomic.Uint64
}

// listCacheMaxItems bounds the items held (about 130 bytes each): a few
// pages of the largest size, or hundreds of small ones.
const listCacheMaxItems = 20_000

// listKey is an AgentQuery as a comparable value.
type listKey struct {
	account, onlyKey, afterID string
	afterCreated, since       int64 // milliseconds
	hasSince                  bool
	limit                     int
}

func keyOf(q AgentQuery) listKey {
	k := listKey{account: q.AccountID, onlyKey: q.OnlyKeyID, afterID: q.AfterID, limit: q.Limit}
	if q.AfterID != "" {
		k.afterCreated = toMS(q.AfterCreatedAt)
	}
	if q.UpdatedSince != nil {
		k.since, k.hasSince = toMS(*q.UpdatedSince), true
	}
	return k
}

func newListCache(maxItems int) *listCache {
	return &listCache{maxItems: maxItems, entries: map[listKey][]AgentItem{}}
}

// older reports whether token a was read before b. data_version only
// grows on a connection, and the watch numbers its connections in order.
func (a changeToken) older(b changeToken) bool {
	return a.conn < b.conn || (a.conn == b.conn && a.dataVersion < b.dataVersion)
}

func (c *listCache) get(tok changeToken, k listKey) ([]AgentItem, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.valid || c.change != tok {
		return nil, false
	}
	items, ok := c.entries[k]
	return items, ok
}

// put holds items, read after a check returned tok. A newer token empties
// the cache; a page read under an older token than the cache's is dropped.
func (c *listCache) put(tok changeToken, k listKey, items []AgentItem) {
	if len(items) > c.maxItems/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.valid && tok.older(c.change):
		return
	case !c.valid || c.change != tok:
		clear(c.entries)
		c.items, c.change, c.valid = 0, tok, true
	}
	if old, held := c.entries[k]; held {
		c.items -= len(old)
		delete(c.entries, k)
	}
	for victim, v := range c.entries { // map order is randomised
		if c.items+len(items) <= c.maxItems {
			break
		}
		c.items -= len(v)
		delete(c.entries, victim)
	}
	c.entries[k] = items
	c.items += len(items)
}

// ListCacheStats counts the list cache's work since the store opened.
type ListCacheStats struct {
	Hits   uint64 // pages answered from memory
	Misses uint64 // pages read from the database by a cache (SQLite's, or the versioned one)
}

// ListCacheStats reports the list cache's counters (for tests that must
// fail if a page is served from memory when it must not be, or never is).
func (s *Store) ListCacheStats() ListCacheStats {
	return ListCacheStats{Hits: s.listCache.hits.Load(), Misses: s.listCache.misses.Load()}
}

// cachedListAgentItems answers from the list cache or reads with read and
// keeps the result. The items returned are shared: callers must not
// modify them (the slice's capacity is its length, so append copies).
func (s *Store) cachedListAgentItems(ctx context.Context, q AgentQuery, read func() ([]AgentItem, error)) ([]AgentItem, error) {
	if q.Version.OK && s.listNotifier != nil {
		return s.versionedListAgentItems(q, read)
	}
	if s.watch == nil {
		return read()
	}
	m, err := s.keyCache.currentMark(ctx, s.check)
	if err != nil || !m.changeOK {
		// The check failing says nothing about the page: read it.
		return read()
	}
	c, k := s.listCache, keyOf(q)
	if items, ok := c.get(m.change, k); ok {
		c.hits.Add(1)
		return items, nil
	}
	c.misses.Add(1)
	items, err := read()
	if err != nil {
		return nil, err
	}
	items = items[:len(items):len(items)]
	c.put(m.change, k, items)
	return items, nil
}
