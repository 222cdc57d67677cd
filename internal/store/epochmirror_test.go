package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// recordingNotifier records the epochs it is told, failing when err is set.
type recordingNotifier struct {
	mu     sync.Mutex
	epochs []int64
	err    error
}

func (n *recordingNotifier) RaiseEpoch(_ context.Context, epoch int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epochs = append(n.epochs, epoch)
	return n.err
}

func (n *recordingNotifier) told() []int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]int64(nil), n.epochs...)
}

// TestEpochNotifierToldAfterEveryBump: each write that bumps the key epoch
// tells the notifier the epoch it committed, once; a write that changes
// nothing tells nothing.
func TestEpochNotifierToldAfterEveryBump(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		n := &recordingNotifier{}
		s.SetEpochNotifier(n)
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		ev := func() domain.AuditEvent {
			return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, k.CreatedAt), AccountID: acct.ID, KeyID: k.ID, Action: "rate_limit_changed", Actor: "test", CreatedAt: k.CreatedAt}
		}
		writes := []func() error{
			func() error { return s.SetKeyRateLimit(ctx, k.ID, 7, ev()) },
			func() error { return s.SetKeyRateLimit(ctx, k.ID, 7, ev()) }, // no change: no bump
			func() error { return s.SetAccountActive(ctx, acct.ID, false) },
		}
		for i, w := range writes {
			if err := w(); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		got := n.told()
		if len(got) != 2 {
			t.Fatalf("told %v, want two epochs", got)
		}
		now, err := s.KeyEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got[1] != now || got[0] != now-1 {
			t.Fatalf("told %v, the store's epoch is %d", got, now)
		}
	})
}

// TestEpochNotifierFailureKeepsTheChange: the change stays committed and
// the writer's report holds the failure.
func TestEpochNotifierFailureKeepsTheChange(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		n := &recordingNotifier{err: errors.New("redis away")}
		s.SetEpochNotifier(n)
		acct := storetest.Account(t, s)
		ctx, report := store.WithEpochReport(context.Background())
		if err := s.SetAccountActive(ctx, acct.ID, false); err != nil {
			t.Fatalf("the write failed with its raise: %v", err)
		}
		if report.Err() == nil {
			t.Fatal("report holds no failure")
		}
		got, err := s.GetAccount(context.Background(), acct.ID)
		if err != nil || got.Active {
			t.Fatalf("account after the write: active %v, %v", got.Active, err)
		}
	})
}
