package agents_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// listStore is a store whose agent lists are read through a Service with
// a list cache, under version (zero: none): what one serve instance (or
// the CLI's process) lists agents through.
type listStore struct {
	*store.Store
	svc     *agents.Service
	lists   *agents.ListCache
	version agents.ListVersion
}

func newListStore(s *store.Store) *listStore {
	c := agents.NewListCache()
	return &listStore{Store: s, svc: agents.New(s, nil).WithListCache(c, fresh.New(s, fresh.Options{})), lists: c}
}

// versioned makes s read pages under list versions kept in Redis, as an
// instance with --redis does.
func (s *listStore) versioned(t *testing.T) {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	tr := fresh.New(s.Store, fresh.Options{Redis: rc, StoreID: []byte(rand.Text())})
	s.svc = agents.New(s.Store, nil).WithListCache(s.lists, tr)
}

func (s *listStore) ListAgentItems(ctx context.Context, q store.AgentQuery) ([]store.AgentItem, error) {
	return s.svc.ListItems(ctx, q, s.version)
}

func (s *listStore) ListCacheStats() agents.ListCacheStats { return s.lists.Stats() }

// t0 is the tests' clock, the fixtures' (storetest.T0): nothing here reads the real time.
var t0 = storetest.T0

// twoStores opens two stores on one fresh database: two processes (or two
// instances) sharing it, as far as each store can tell.
func twoStores(t *testing.T, engine string) (*listStore, *listStore) {
	a, b := storetest.OpenTwo(t, engine)
	return newListStore(a), newListStore(b)
}

func forEachEngine(t *testing.T, fn func(t *testing.T, s *listStore)) {
	t.Helper()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { fn(t, newListStore(storetest.Open(t, e))) })
	}
}

func itemIDs(t *testing.T, s *listStore, q store.AgentQuery) []string {
	t.Helper()
	items, err := s.ListAgentItems(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(items))
	for i, a := range items {
		ids[i] = a.ID + "/" + a.Name + "/" + map[bool]string{true: "on", false: "off"}[a.Enabled]
	}
	return ids
}

// TestListCacheServesRepeatsUntilAnyCommit: on SQLite, a repeated page
// comes from memory (the test fails if the cache is bypassed), and every
// kind of write by this store or by another on the same database (another
// process or instance) shows on the next page read. On PostgreSQL every
// page is read.
func TestListCacheServesRepeatsUntilAnyCommit(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := twoStores(t, engine)
		acct := storetest.Account(t, a)
		first := storetest.Agent(t, a, acct.ID, "first", t0)
		q := store.AgentQuery{AccountID: acct.ID, Limit: 31}
		wantRepeatsFromMemory(t, engine, a, q)

		// Each write, by either store, must show on a's very next read.
		for i, w := range listWrites(t, acct.ID, first.ID) {
			for _, by := range []*listStore{a, b} {
				if i > 0 && by == a {
					continue
				}
				who := map[*listStore]string{a: "the same store", b: "another store"}[by]
				before := itemIDs(t, a, q)
				itemIDs(t, a, q) // held now, on SQLite
				if i == 0 && by == b {
					storetest.Agent(t, b, acct.ID, "third", t0.Add(1500*time.Millisecond))
				} else {
					w.write(by)
				}
				wantDatabasePage(t, a, b, q, before, w.name+" by "+who)
			}
		}
	})
}

// wantRepeatsFromMemory reads q 21 times from s: on SQLite all but the
// first come from memory; on PostgreSQL the list cache is not used.
func wantRepeatsFromMemory(t *testing.T, engine string, s *listStore, q store.AgentQuery) {
	t.Helper()
	before := s.ListCacheStats()
	want := itemIDs(t, s, q)
	for range 20 {
		if got := itemIDs(t, s, q); !slices.Equal(got, want) {
			t.Fatalf("repeat: %v, want %v", got, want)
		}
	}
	d := s.ListCacheStats()
	hits, misses := d.Hits-before.Hits, d.Misses-before.Misses
	if engine == store.EngineSQLite && (hits != 20 || misses != 1) {
		t.Fatalf("SQLite: %d hits, %d misses for 21 reads of one page; want 20 and 1", hits, misses)
	}
	if engine == store.EnginePostgres && (hits != 0 || misses != 0) {
		t.Fatalf("PostgreSQL: the list cache was used (%d hits, %d misses)", hits, misses)
	}
}

type listWrite struct {
	name  string
	write func(s *listStore)
}

// listWrites are the writes that change what an account's agent list
// shows: a create, a rename, a disable and an import.
func listWrites(t *testing.T, accountID, agentID string) []listWrite {
	ctx := context.Background()
	update := func(s *listStore, fn func(*domain.Agent)) {
		if _, err := s.UpdateAgent(ctx, accountID, agentID, func(ag *domain.Agent) (bool, error) {
			fn(ag)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return []listWrite{
		{"create", func(s *listStore) { storetest.Agent(t, s, accountID, "second", t0.Add(time.Second)) }},
		{"rename", func(s *listStore) {
			update(s, func(ag *domain.Agent) { ag.Name, ag.UpdatedAt = "renamed", t0.Add(2*time.Second) })
		}},
		{"disable", func(s *listStore) {
			update(s, func(ag *domain.Agent) { ag.Enabled, ag.UpdatedAt = false, t0.Add(3*time.Second) })
		}},
		{"import", func(s *listStore) {
			at := t0.Add(4 * time.Second)
			if err := s.ImportAgents(ctx, []domain.Agent{{ID: domain.NewID(domain.PrefixAgent, at), AccountID: accountID,
				Name: "imported", Enabled: true, CreatedAt: at, UpdatedAt: at}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
}

// wantDatabasePage: a's page of q differs from before and is the page b
// reads from the database, item by item.
func wantDatabasePage(t *testing.T, a, b *listStore, q store.AgentQuery, before []string, step string) {
	t.Helper()
	after := itemIDs(t, a, q)
	uncached, err := b.Store.ListAgentItems(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(after, before) || len(after) != len(uncached) {
		t.Fatalf("%s: the next page is %v, as before the write", step, after)
	}
	for j, ag := range uncached {
		if after[j] != ag.ID+"/"+ag.Name+"/"+map[bool]string{true: "on", false: "off"}[ag.Enabled] {
			t.Fatalf("%s: item %d is %s, the database has %s %q %v", step, j, after[j], ag.ID, ag.Name, ag.Enabled)
		}
	}
}

// TestListCacheUnderConcurrentWrites: readers list while another store
// creates agents; every read begun after a create committed includes it.
func TestListCacheUnderConcurrentWrites(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		a, b := twoStores(t, engine)
		acct := storetest.Account(t, b)
		q := store.AgentQuery{AccountID: acct.ID, Limit: 1000}
		var (
			created atomic.Int64 // agents known committed
			stop    atomic.Bool
			stale   atomic.Int64
			wg      sync.WaitGroup
		)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					n := created.Load()
					items, err := a.ListAgentItems(ctx, q)
					if err != nil {
						t.Error(err)
						return
					}
					if int64(len(items)) < n {
						stale.Add(1)
					}
				}
			}()
		}
		for i := range 40 {
			storetest.Agent(t, b, acct.ID, "agent-"+string(rune('a'+i%26))+string(rune('a'+i/26)), t0.Add(time.Duration(i)*time.Millisecond))
			created.Add(1)
			time.Sleep(time.Millisecond)
		}
		stop.Store(true)
		wg.Wait()
		if n := stale.Load(); n != 0 {
			t.Fatalf("%d reads begun after a create missed it", n)
		}
	})
}

// TestListCacheKeysEveryQueryField: pages of different queries are not
// confused with one another.
func TestListCacheKeysEveryQueryField(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *listStore) {
		acct := storetest.Account(t, s)
		other := storetest.Account(t, s)
		var ags []domain.Agent
		for i := range 5 {
			ags = append(ags, storetest.Agent(t, s, acct.ID, "a"+string(rune('0'+i)), t0.Add(time.Duration(i)*time.Second)))
		}
		storetest.Agent(t, s, other.ID, "elsewhere", t0)
		k := storetest.Key(t, s, acct.ID, ags[1].ID, ags[3].ID)
		since := t0.Add(2 * time.Second)
		queries := []store.AgentQuery{
			{AccountID: acct.ID, Limit: 10},
			{AccountID: acct.ID, Limit: 2},
			{AccountID: other.ID, Limit: 10},
			{AccountID: acct.ID, Limit: 10, OnlyKeyID: k.ID},
			{AccountID: acct.ID, Limit: 10, UpdatedSince: &since},
			{AccountID: acct.ID, Limit: 10, AfterCreatedAt: ags[2].CreatedAt, AfterID: ags[2].ID},
			{AccountID: acct.ID, Limit: 10, AfterCreatedAt: ags[0].CreatedAt, AfterID: ags[0].ID},
		}
		for round := range 3 { // the first reads, the others may hit
			for i, q := range queries {
				wantListed(t, s, q, "round "+strconv.Itoa(round)+", query "+strconv.Itoa(i))
			}
		}
	})
}

// wantListed: the page of q has the database's agents, in its order.
func wantListed(t *testing.T, s *listStore, q store.AgentQuery, step string) {
	t.Helper()
	got := itemIDs(t, s, q)
	want, err := s.Store.ListAgentItems(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d items, want %d", step, len(got), len(want))
	}
	for j := range want {
		if got[j][:len(want[j].ID)] != want[j].ID {
			t.Fatalf("%s: item %d is %s, want %s", step, j, got[j], want[j].ID)
		}
	}
}

type listRecorder struct {
	mu       sync.Mutex
	accounts []string
}

func (n *listRecorder) Committed(_ context.Context, c store.Commit) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.accounts = append(n.accounts, c.AgentAccounts...)
}

func (n *listRecorder) took() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.accounts
	n.accounts = nil
	return out
}

// TestListNotifierHearsEveryChangeOfAgents: every write that changes an
// account's agents tells the notifier that account after its commit, and
// a write that changes nothing (or fails) tells it nothing; a page asked
// for under a version is served from memory until this store changes the
// account's agents, whatever the version says.
func TestListNotifierHearsEveryChangeOfAgents(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		st, _ := twoStores(t, engine)
		n := &listRecorder{}
		st.Observe(n)
		st.versioned(t)
		acct, other := storetest.Account(t, st), storetest.Account(t, st)
		want := func(step string, accounts ...string) {
			t.Helper()
			if got := n.took(); !slices.Equal(got, accounts) {
				t.Fatalf("%s: notified %v, want %v", step, got, accounts)
			}
		}
		first := storetest.Agent(t, st, acct.ID, "first", t0)
		want("create", acct.ID)
		if err := st.CreateAgent(ctx, first); err == nil {
			t.Fatal("a second create of one agent succeeded")
		}
		want("failed create")
		update := func(changed bool) {
			if _, err := st.UpdateAgent(ctx, acct.ID, first.ID, func(ag *domain.Agent) (bool, error) {
				ag.Name = "renamed"
				return changed, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		update(false)
		want("update that changed nothing")
		update(true)
		want("rename", acct.ID)
		now := t0.Add(time.Minute)
		if err := st.ImportAgents(ctx, []domain.Agent{
			{ID: domain.NewID(domain.PrefixAgent, now), AccountID: acct.ID, Name: "i1", Enabled: true, CreatedAt: now, UpdatedAt: now},
			{ID: domain.NewID(domain.PrefixAgent, now.Add(time.Millisecond)), AccountID: other.ID, Name: "i2", Enabled: true, CreatedAt: now, UpdatedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
		want("import", acct.ID, other.ID)

		// Served from memory under one version, until a change here.
		q := store.AgentQuery{AccountID: acct.ID, Limit: 31}
		st.version = agents.ListVersion{Value: 42, OK: true}
		before := st.ListCacheStats()
		page := itemIDs(t, st, q)
		for range 5 {
			if got := itemIDs(t, st, q); !slices.Equal(got, page) {
				t.Fatalf("repeat: %v, want %v", got, page)
			}
		}
		after := st.ListCacheStats()
		if hits := after.Hits - before.Hits; hits < 5 {
			t.Fatalf("%d of 6 reads under one version served from memory, want at least 5", hits)
		}
		storetest.Agent(t, st, acct.ID, "second", t0.Add(2*time.Minute))
		if got := itemIDs(t, st, q); len(got) != len(page)+1 {
			t.Fatalf("after a create here, under the same version: %v", got)
		}
	})
}

// TestKeyAccessEditChangesTheRestrictedList: a restricted key's agent list
// is its restriction, so editing the key's access tells the notifier its
// account and drops the pages held here, whatever the version says.
func TestKeyAccessEditChangesTheRestrictedList(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		st, _ := twoStores(t, engine)
		n := &listRecorder{}
		st.Observe(n)
		st.versioned(t)
		acct := storetest.Account(t, st)
		first := storetest.Agent(t, st, acct.ID, "first", t0)
		second := storetest.Agent(t, st, acct.ID, "second", t0.Add(time.Second))
		k := storetest.Key(t, st, acct.ID, first.ID)
		q := store.AgentQuery{AccountID: acct.ID, Limit: 10, OnlyKeyID: k.ID}
		st.version = agents.ListVersion{Value: 42, OK: true}
		if got := itemIDs(t, st, q); len(got) != 1 || got[0] != first.ID+"/first/on" {
			t.Fatalf("before the edit: %v", got)
		}
		n.took()
		if err := st.UpdateKeyAccess(ctx, acct.ID, k.ID, k.Scopes, []string{second.ID}, nil,
			storetest.Event(acct.ID, k.ID, domain.AuditAccessChanged, t0)); err != nil {
			t.Fatal(err)
		}
		if got := n.took(); !slices.Equal(got, []string{acct.ID}) {
			t.Fatalf("the edit notified %v, want %v", got, []string{acct.ID})
		}
		if got := itemIDs(t, st, q); len(got) != 1 || got[0] != second.ID+"/second/on" {
			t.Fatalf("after the edit, under the same version: %v", got)
		}
	})
}
