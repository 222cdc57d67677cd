package store_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

type listRecorder struct {
	mu       sync.Mutex
	accounts []string
}

func (n *listRecorder) AgentsChanged(_ context.Context, account string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.accounts = append(n.accounts, account)
	return nil
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
	forEachEngineName(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		st, _ := twoStores(t, engine)
		n := &listRecorder{}
		st.SetListNotifier(n)
		acct, other := newAccount(t, st), newAccount(t, st)
		want := func(step string, accounts ...string) {
			t.Helper()
			if got := n.took(); !slices.Equal(got, accounts) {
				t.Fatalf("%s: notified %v, want %v", step, got, accounts)
			}
		}
		first := newAgent(t, st, acct.ID, "first", t0)
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
		q := store.AgentQuery{AccountID: acct.ID, Limit: 31, Version: store.ListVersion{Value: 42, OK: true}}
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
		newAgent(t, st, acct.ID, "second", t0.Add(2*time.Minute))
		if got := itemIDs(t, st, q); len(got) != len(page)+1 {
			t.Fatalf("after a create here, under the same version: %v", got)
		}
	})
}

// TestKeyAccessEditChangesTheRestrictedList: a restricted key's agent list
// is its restriction, so editing the key's access tells the notifier its
// account and drops the pages held here, whatever the version says.
func TestKeyAccessEditChangesTheRestrictedList(t *testing.T) {
	forEachEngineName(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		st, _ := twoStores(t, engine)
		n := &listRecorder{}
		st.SetListNotifier(n)
		acct := newAccount(t, st)
		first := newAgent(t, st, acct.ID, "first", t0)
		second := newAgent(t, st, acct.ID, "second", t0.Add(time.Second))
		k := newKey(t, st, acct.ID, first.ID)
		q := store.AgentQuery{AccountID: acct.ID, Limit: 10, OnlyKeyID: k.ID, Version: store.ListVersion{Value: 42, OK: true}}
		if got := itemIDs(t, st, q); len(got) != 1 || got[0] != first.ID+"/first/on" {
			t.Fatalf("before the edit: %v", got)
		}
		n.took()
		if err := st.UpdateKeyAccess(ctx, acct.ID, k.ID, k.Scopes, []string{second.ID}, nil,
			event(acct.ID, k.ID, domain.AuditAccessChanged, t0)); err != nil {
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
