package store_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

func itemIDs(t *testing.T, s *store.Store, q store.AgentQuery) []string {
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
	forEachEngineName(t, func(t *testing.T, engine string) {
		a, b := twoStores(t, engine)
		acct := newAccount(t, a)
		first := newAgent(t, a, acct.ID, "first", t0)
		q := store.AgentQuery{AccountID: acct.ID, Limit: 31}
		wantRepeatsFromMemory(t, engine, a, q)

		// Each write, by either store, must show on a's very next read.
		for i, w := range listWrites(t, acct.ID, first.ID) {
			for _, by := range []*store.Store{a, b} {
				if i > 0 && by == a {
					continue
				}
				who := map[*store.Store]string{a: "the same store", b: "another store"}[by]
				before := itemIDs(t, a, q)
				itemIDs(t, a, q) // held now, on SQLite
				if i == 0 && by == b {
					newAgent(t, b, acct.ID, "third", t0.Add(1500*time.Millisecond))
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
func wantRepeatsFromMemory(t *testing.T, engine string, s *store.Store, q store.AgentQuery) {
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
	write func(s *store.Store)
}

// listWrites are the writes that change what an account's agent list
// shows: a create, a rename, a disable and an import.
func listWrites(t *testing.T, accountID, agentID string) []listWrite {
	ctx := context.Background()
	update := func(s *store.Store, fn func(*domain.Agent)) {
		if _, err := s.UpdateAgent(ctx, accountID, agentID, func(ag *domain.Agent) (bool, error) {
			fn(ag)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return []listWrite{
		{"create", func(s *store.Store) { newAgent(t, s, accountID, "second", t0.Add(time.Second)) }},
		{"rename", func(s *store.Store) {
			update(s, func(ag *domain.Agent) { ag.Name, ag.UpdatedAt = "renamed", t0.Add(2*time.Second) })
		}},
		{"disable", func(s *store.Store) {
			update(s, func(ag *domain.Agent) { ag.Enabled, ag.UpdatedAt = false, t0.Add(3*time.Second) })
		}},
		{"import", func(s *store.Store) {
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
func wantDatabasePage(t *testing.T, a, b *store.Store, q store.AgentQuery, before []string, step string) {
	t.Helper()
	after := itemIDs(t, a, q)
	uncached, err := b.ListAgents(context.Background(), q)
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
	forEachEngineName(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		a, b := twoStores(t, engine)
		acct := newAccount(t, b)
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
			newAgent(t, b, acct.ID, "agent-"+string(rune('a'+i%26))+string(rune('a'+i/26)), t0.Add(time.Duration(i)*time.Millisecond))
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
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		acct := newAccount(t, s)
		other := newAccount(t, s)
		var ags []domain.Agent
		for i := range 5 {
			ags = append(ags, newAgent(t, s, acct.ID, "a"+string(rune('0'+i)), t0.Add(time.Duration(i)*time.Second)))
		}
		newAgent(t, s, other.ID, "elsewhere", t0)
		k := newKey(t, s, acct.ID, ags[1].ID, ags[3].ID)
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

// wantListed: the page of q has ListAgents' agents, in its order.
func wantListed(t *testing.T, s *store.Store, q store.AgentQuery, step string) {
	t.Helper()
	got := itemIDs(t, s, q)
	want, err := s.ListAgents(context.Background(), q)
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

// TestCheckpointEmptiesTheWAL: after Checkpoint the SQLite write-ahead log
// is empty and the data is all there; on PostgreSQL it does nothing.
func TestCheckpointEmptiesTheWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acct := newAccount(t, s)
	for i := range 50 {
		newAgent(t, s, acct.ID, "agent "+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL to checkpoint: %v", err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("WAL after the checkpoint: %d bytes", fi.Size())
	}
	if got := itemIDs(t, s, store.AgentQuery{AccountID: acct.ID, Limit: 100}); len(got) != 50 {
		t.Fatalf("%d agents after the checkpoint, want 50", len(got))
	}
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		if err := s.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
