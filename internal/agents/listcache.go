package agents

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// ListCache keeps pages of GET /v1/ai-agents in memory, keyed by their
// query, each with the token it was read under, and serves a page only
// under that same token. The token is what says that nothing the page
// shows can have changed since it was read:
//
//   - With a list version (PostgreSQL or SQLite, with Redis): the account's
//     version as the request read it before asking for the page (the API
//     reads it in the rate-limit decision, so it costs no round trip), and
//     the count of agent writes committed through this store to the
//     account's share of accounts (store.AgentWrites). A writer sets a new,
//     random version after its commit and before it answers, so a change
//     committed after the page's read, by any instance, moves the token
//     before its writer answers.
//     Only when a writer could not set the version (Redis away), or Redis
//     went back to an older copy, can a page be served stale: for at most
//     ListStaleBound after it was read, the bound docs/production.md states.
//   - On SQLite without one: the store's change token (store.Check), a
//     data_version that moves with every commit by any connection of any
//     process. No write path has to remember to invalidate anything.
//
// PostgreSQL without Redis has no token short of a round trip, which costs
// what the page does: there pages are read every time.
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

// ListStaleBound is the age past which a page read under a list version is
// read again whatever its version (the bound on a stale page when a
// version could not be set).
const ListStaleBound = time.Second

// ListVersion is an account's agent-list version as the caller read it
// before asking for the page; OK is false when none was read.
type ListVersion struct {
	Value int64 // -1: Redis holds none
	OK    bool
}

// listToken is what a page was read under (see ListCache).
type listToken struct {
	change    store.ChangeToken // SQLite without a version
	version   int64
	writes    uint64
	versioned bool // version and writes; the page expires after ListStaleBound
}

// listKey is a store.AgentQuery as a comparable value.
type listKey struct {
	account, onlyKey, afterID string
	afterCreated, since       int64 // milliseconds
	hasSince                  bool
	limit                     int
}

type heldPage struct {
	items  []store.AgentItem
	tok    listToken
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

func (c *ListCache) get(tok listToken, k listKey, now time.Time) ([]store.AgentItem, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.pages[k]
	if !ok || p.tok != tok || (tok.versioned && now.Sub(p.readAt) >= ListStaleBound) {
		return nil, false
	}
	return p.items, true
}

// put holds items, read from readAt on under tok, in place of the query's
// page held before (a page read under an older token at worst costs a
// read: it is served under no other token).
func (c *ListCache) put(tok listToken, k listKey, items []store.AgentItem, readAt time.Time) {
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

// token is what a page asked for with v would be read under; ok is false
// where there is none (the page is then read from the store).
func (s *Service) token(ctx context.Context, accountID string, v ListVersion) (listToken, bool) {
	if writes, announced := s.store.AgentWrites(accountID); v.OK && announced {
		return listToken{version: v.Value, writes: writes, versioned: true}, true
	}
	if s.store.Engine() != store.EngineSQLite {
		return listToken{}, false
	}
	m, err := s.store.Check(ctx)
	if err != nil || !m.ChangeOK {
		// The check failing says nothing about the page: read it.
		return listToken{}, false
	}
	return listToken{change: m.Change}, true
}

// listItems answers from the list cache or reads the page and keeps it.
// The items returned are shared: callers must not modify them (the
// slice's capacity is its length, so append copies).
func (s *Service) listItems(ctx context.Context, q store.AgentQuery, v ListVersion) ([]store.AgentItem, error) {
	c := s.lists
	if c == nil {
		return s.store.ListAgentItems(ctx, q)
	}
	tok, ok := s.token(ctx, q.AccountID, v)
	if !ok {
		return s.store.ListAgentItems(ctx, q)
	}
	var now time.Time
	if tok.versioned {
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
