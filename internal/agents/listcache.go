package agents

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
)

// ListCache keeps pages of GET /v1/ai-agents in memory, keyed by their
// query, each with the token it was read under (fresh.ListToken), and
// serves a page only under that same token: the token is what says that
// nothing the page shows can have changed since it was read. No write path
// has to remember to invalidate anything: the store tells the tracker of
// every commit that changed an account's agents.
//
// A list page of 100 costs serve CPU 70 vs 208 µs on SQLite, 104 vs 296 µs
// serve+PostgreSQL+Redis without the cache (bench/RESULTS.md).
type ListCache struct {
	maxItems int
	now      func() time.Time

	mu    sync.RWMutex
	pages map[listKey]heldPage
	items int // held in pages

	hits, misses atomic.Uint64
}

// listCacheMaxItems bounds the items held (about 130 bytes each): a few
// pages of the largest size, or hundreds of small ones.
const listCacheMaxItems = 20_000

// ListVersion is an account's agent-list version as the request read it.
type ListVersion = fresh.ListVersion

// listKey is a store.AgentQuery as a comparable value.
type listKey struct {
	account, onlyKey, afterID string
	afterCreated, since       int64 // milliseconds
	hasSince                  bool
	limit                     int
}

type heldPage struct {
	items  []store.AgentItem
	tok    fresh.ListToken
	readAt time.Time // before the read began; set only when versioned
}

// NewListCache returns an empty cache, for Service.WithListCache.
func NewListCache() *ListCache { return newListCache(listCacheMaxItems) }

func newListCache(maxItems int) *ListCache {
	return &ListCache{maxItems: maxItems, now: time.Now, pages: map[listKey]heldPage{}}
}

func keyOf(q store.AgentQuery) listKey {
	k := listKey{account: q.AccountID, onlyKey: q.OnlyKeyID, afterID: q.AfterID, limit: q.Limit}
	if q.AfterID != "" {
		k.afterCreated = q.AfterCreatedAt.UnixMilli()
	}
	if q.UpdatedSince != nil {
		k.since, k.hasSince = q.UpdatedSince.UnixMilli(), true
	}
	return k
}

func (c *ListCache) get(tok fresh.ListToken, k listKey, now time.Time) ([]store.AgentItem, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.pages[k]
	if !ok || p.tok != tok || (tok.Expires && now.Sub(p.readAt) >= fresh.ListStaleBound) {
		return nil, false
	}
	return p.items, true
}

// put holds items, read from readAt on under tok, in place of the query's
// page held before (a page read under an older token at worst costs a
// read: it is served under no other token).
func (c *ListCache) put(tok fresh.ListToken, k listKey, items []store.AgentItem, readAt time.Time) {
	if len(items) > c.maxItems/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, held := c.pages[k]; held {
		c.items -= len(old.items)
		delete(c.pages, k)
	}
	for victim, p := range c.pages { // map order is randomised
		if c.items+len(items) <= c.maxItems {
			break
		}
		c.items -= len(p.items)
		delete(c.pages, victim)
	}
	c.pages[k] = heldPage{items: items, tok: tok, readAt: readAt}
	c.items += len(items)
}

// ListCacheStats counts the list cache's work since it was made.
type ListCacheStats struct {
	Hits   uint64 // pages answered from memory
	Misses uint64 // pages read from the database by the cache
}

// Stats reports the cache's counters (for metrics, and for tests that must
// fail if a page is served from memory when it must not be, or never is).
func (c *ListCache) Stats() ListCacheStats {
	return ListCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
}

// listItems answers from the list cache or reads the page and keeps it.
// The items returned are shared: callers must not modify them (the
// slice's capacity is its length, so append copies).
func (s *Service) listItems(ctx context.Context, q store.AgentQuery, v ListVersion) ([]store.AgentItem, error) {
	c := s.lists
	if c == nil {
		return s.store.ListAgentItems(ctx, q)
	}
	tok, ok := s.fresh.ListToken(ctx, q.AccountID, v)
	if !ok {
		return s.store.ListAgentItems(ctx, q)
	}
	var now time.Time
	if tok.Expires {
		now = c.now()
	}
	k := keyOf(q)
	if items, ok := c.get(tok, k, now); ok {
		c.hits.Add(1)
		return items, nil
	}
	c.misses.Add(1)
	items, err := s.store.ListAgentItems(ctx, q)
	if err != nil {
		return nil, err
	}
	items = items[:len(items):len(items)]
	c.put(tok, k, items, now)
	return items, nil
}
