package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// recordingObserver records the commits it is told of.
type recordingObserver struct {
	mu      sync.Mutex
	commits []store.Commit
}

func (o *recordingObserver) Committed(_ context.Context, c store.Commit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits = append(o.commits, c)
}

func (o *recordingObserver) told() []store.Commit {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]store.Commit(nil), o.commits...)
}

// TestObserverToldAfterEveryChange: each write that changes a key or an
// account's active flag tells the observer the account and the epoch it
// committed, once; a write that changes nothing tells nothing; a write of
// agents names the account whose list changed.
func TestObserverToldAfterEveryChange(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		o := &recordingObserver{}
		s.Observe(o)
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		ev := func() domain.AuditEvent {
			return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, k.CreatedAt), AccountID: acct.ID, KeyID: k.ID, Action: "rate_limit_changed", Actor: "test", CreatedAt: k.CreatedAt}
		}
		writes := []func() error{
			func() error { return s.SetKeyRateLimit(ctx, k.ID, 7, ev()) },
			func() error { return s.SetKeyRateLimit(ctx, k.ID, 7, ev()) }, // no change: nothing told
			func() error { return s.SetAccountActive(ctx, acct.ID, false) },
		}
		for i, w := range writes {
			if err := w(); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		got := o.told()
		if len(got) != 2 {
			t.Fatalf("told %+v, want two commits", got)
		}
		now, _, err := s.ReadKeyEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int64{now - 1, now} {
			if c := got[i]; c.KeyEpoch != want || len(c.KeyAccounts) != 1 || c.KeyAccounts[acct.ID] != want {
				t.Fatalf("commit %d told %+v, want account %s at %d", i, c, acct.ID, want)
			}
		}
		now2 := time.Now().UTC().Truncate(time.Millisecond)
		a := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now2), AccountID: acct.ID, Name: "Observed", Instructions: "x", Enabled: true, CreatedAt: now2, UpdatedAt: now2}
		if err := s.CreateAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
		got = o.told()
		if c := got[len(got)-1]; len(got) != 3 || c.KeyEpoch != 0 || len(c.AgentAccounts) != 1 || c.AgentAccounts[0] != acct.ID {
			t.Fatalf("after an agent's creation told %+v, want its account's list", got)
		}
	})
}
