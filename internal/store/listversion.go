package store

import (
	"context"
	"sync"
	"time"
)

// The versioned list cache keeps agent-list pages on a store whose
// writers announce every change to an account's agents (SetListNotifier:
// ratelimit.Versions, a random version per account in Redis). The caller
// passes the account's version as it read it before the page was asked
// for (AgentQuery.Version: the API reads it in the request's rate-limit
// decision, so it costs no round trip of its own); a page is answered from
// memory only when it was read under that same version, less than
// ListStaleBound ago.
//
// Why that is the page the database would return: a writer sets a new
// version after its commit and before it answers, and a version never
// comes back (it is random). A page read under version V was read after V
// was seen; any change committed after that read sets a version other than
// V before its writer answers, so from then on nobody is served the page.
// Only when a writer could not set the version (Redis away), or Redis went
// back to an older copy, can a page be served stale: for at most
// ListStaleBound after it was read, the bound docs/production.md states.
//
// This is what makes `GET /v1/ai-agents` on PostgreSQL cost no database
// round trip while an account's agents are unchanged: the bench's
// "PostgreSQL + Redis GET /v1/ai-agents?limit=30" scenario (bench/RESULTS.md)
// measures it, with PostgreSQL transactions per request. A list page of
// 100: serve CPU 70 vs 208 µs on SQLite, 104 vs 296 µs serve+PostgreSQL+Redis
// without the caches (bench/RESULTS.md).
//
// Every write that changes what an account's list shows notes the account
// on its Tx (changedAgents); inTx calls agentsChanged once it commits.
type versionCache struct {
	maxItems int
	now      func() time.Time

	mu       sync.Mutex
	accounts map[string]*accountPages
	items    int // held in every account's pages
}

// accountPages are one account's pages, all read under one version.
type accountPages struct {
	version int64
	pages   map[listKey]heldPage
	items   int
}

type heldPage struct {
	items  []AgentItem
	readAt time.Time // before the read began
}

// ListStaleBound is the age past which a page held in memory is read
// again whatever its version (the versioned list cache's bound when a
// version could not be set).
const ListStaleBound = time.Second

// ListVersion is an account's agent-list version as the caller read it
// before asking for the page; OK is false when none was read (the page is
// then read from the database, or from the SQLite list cache).
type ListVersion struct {
	Value int64 // -1: Redis holds none
	OK    bool
}

// ListNotifier is told, after every commit that changed an account's
// agents, which account it was (ratelimit.Versions sets a new version).
type ListNotifier interface {
	AgentsChanged(ctx context.Context, accountID string) error
}

// SetListNotifier makes every write of agents tell n the account after its
// commit, and lets pages asked for under a version (AgentQuery.Version)
// be answered from memory. Call it before the store is used.
func (s *Store) SetListNotifier(n ListNotifier) { s.listNotifier = n }

func newVersionCache(maxItems int) *versionCache {
	return &versionCache{maxItems: maxItems, now: time.Now, accounts: map[string]*accountPages{}}
}

func (c *versionCache) get(account string, version int64, k listKey) ([]AgentItem, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.accounts[account]
	if a == nil || a.version != version {
		return nil, false
	}
	p, ok := a.pages[k]
	if !ok || now.Sub(p.readAt) >= ListStaleBound {
		return nil, false
	}
	return p.items, true
}

// put holds a page read from readAt on under version. Pages of the account
// held under another version are dropped (versions have no order: the
// newest put wins, which at worst costs a read).
func (c *versionCache) put(account string, version int64, k listKey, items []AgentItem, readAt time.Time) {
	if len(items) > c.maxItems/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.accounts[account]
	if a != nil && a.version != version {
		c.dropLocked(account)
		a = nil
	}
	if a == nil {
		a = &accountPages{version: version, pages: map[listKey]heldPage{}}
		c.accounts[account] = a
	}
	if old, held := a.pages[k]; held {
		a.items -= len(old.items)
		c.items -= len(old.items)
	}
	for victim := range c.accounts { // map order is randomised
		if c.items+len(items) <= c.maxItems {
			break
		}
		if victim != account {
			c.dropLocked(victim)
		}
	}
	if c.items+len(items) > c.maxItems { // this account alone fills it
		c.items -= a.items
		a.items = 0
		clear(a.pages)
	}
	a.pages[k] = heldPage{items: items, readAt: readAt}
	a.items += len(items)
	c.items += len(items)
}

// drop forgets an account's pages (its agents changed here).
func (c *versionCache) drop(account string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(account)
}

func (c *versionCache) dropLocked(account string) {
	if a := c.accounts[account]; a != nil {
		c.items -= a.items
		delete(c.accounts, account)
	}
}

// versionedListAgentItems answers from the versioned cache or reads with
// read and keeps the result (q.Version.OK and a ListNotifier set).
func (s *Store) versionedListAgentItems(q AgentQuery, read func() ([]AgentItem, error)) ([]AgentItem, error) {
	c, k := s.versionCache, keyOf(q)
	if items, ok := c.get(q.AccountID, q.Version.Value, k); ok {
		s.listCache.hits.Add(1)
		return items, nil
	}
	s.listCache.misses.Add(1)
	readAt := c.now()
	items, err := read()
	if err != nil {
		return nil, err
	}
	items = items[:len(items):len(items)]
	c.put(q.AccountID, q.Version.Value, k, items, readAt)
	return items, nil
}

// agentsChanged forgets the account's pages held here and tells the
// ListNotifier, after a commit that changed the account's agents. The
// notifier's failure does not undo the commit; it logs it, and pages held
// elsewhere expire within ListStaleBound.
func (s *Store) agentsChanged(ctx context.Context, accountID string) {
	s.versionCache.drop(accountID)
	if s.listNotifier != nil {
		_ = s.listNotifier.AgentsChanged(ctx, accountID)
	}
}
