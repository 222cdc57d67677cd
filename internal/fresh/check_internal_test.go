package fresh

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// checkOnly is a tracker whose checks run f (no store).
func checkOnly(f func(context.Context) (int64, error)) *Tracker {
	t := &Tracker{}
	t.synced.Store(-1)
	t.checks.sem = make(chan struct{}, 1)
	t.read = func(ctx context.Context) (Mark, error) {
		e, err := f(ctx)
		return Mark{Epoch: e}, err
	}
	return t
}

// TestChecksShareOnlyLaterChecks: concurrent callers share checks, but
// each gets the result of a check that started after it arrived.
func TestChecksShareOnlyLaterChecks(t *testing.T) {
	var started atomic.Int64
	tr := checkOnly(func(context.Context) (int64, error) {
		n := started.Add(1)
		time.Sleep(2 * time.Millisecond)
		return n, nil // the epoch returned is the check's number
	})
	const callers = 64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				before := started.Load()
				m, err := tr.Check(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if m.Epoch <= before {
					t.Errorf("got the result of check %d, which started before this call (%d had started)", m.Epoch, before)
				}
			}
		}()
	}
	wg.Wait()
	if n := started.Load(); n >= callers*5/2 {
		t.Fatalf("%d checks for %d calls: concurrent callers did not share", n, callers*5)
	}
}

// TestFailedCheckIsNotShared: a failed check (say, its caller's
// context ended) is not handed to others; the next caller checks again.
func TestFailedCheckIsNotShared(t *testing.T) {
	boom := errors.New("boom")
	results := []func() (int64, error){func() (int64, error) { return 0, boom }, func() (int64, error) { return 7, nil }}
	var i atomic.Int64
	tr := checkOnly(func(context.Context) (int64, error) { return results[min(int(i.Add(1))-1, 1)]() })
	if _, err := tr.Check(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	got, err := tr.Check(context.Background())
	if err != nil || got.Epoch != 7 {
		t.Fatalf("after a failure: %d %v", got.Epoch, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr.checks.sem <- struct{}{} // a check in progress
	if _, err := tr.Check(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with an ended context: %v", err)
	}
	<-tr.checks.sem
}

// twoSQLiteStores opens two stores on one SQLite file, as two processes
// would, and a tracker of the first; all close when the test ends.
func twoSQLiteStores(t *testing.T) (*Tracker, *store.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.db")
	var out [2]*store.Store
	for i := range out {
		s, err := store.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	tr := New(out[0], Options{})
	t.Cleanup(tr.Close)
	return tr, out[1]
}

// epochOf runs one check of tr, not shared with other callers.
func epochOf(t *testing.T, tr *Tracker) int64 {
	t.Helper()
	m, err := tr.readEpoch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m.Epoch
}

// TestSQLiteWatchSeesOtherConnections: with nothing committed, epoch
// checks keep the epoch; a commit by another connection that does not touch
// the epoch keeps it too, and a deactivation by it moves it on the next
// check.
func TestSQLiteWatchSeesOtherConnections(t *testing.T) {
	ctx := context.Background()
	tr, other := twoSQLiteStores(t)
	e0 := epochOf(t, tr)
	for range 10 {
		if e := epochOf(t, tr); e != e0 {
			t.Fatalf("epoch moved from %d to %d with nothing committed", e0, e)
		}
	}
	a := domain.Account{ID: "acct_watch", Name: "x", Active: true, CreatedAt: time.Now()}
	if err := other.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e := epochOf(t, tr); e != e0 {
		t.Fatalf("an unrelated commit moved the epoch: %d → %d", e0, e)
	}
	if err := other.SetAccountActive(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	if e := epochOf(t, tr); e != e0+1 {
		t.Fatalf("after a deactivation by another connection: epoch %d, want %d", e, e0+1)
	}
}

// TestSQLiteWatchAcrossCheckpoints: a checkpoint that restarts the WAL
// rewrites the header too, and a revocation committed into the restarted
// WAL is seen by the next check (keys' cache then reads the key again).
func TestSQLiteWatchAcrossCheckpoints(t *testing.T) {
	ctx := context.Background()
	tr, other := twoSQLiteStores(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: "acct_ckpt", Name: "x", Active: true, CreatedAt: now}
	if err := other.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	ev := func(action domain.AuditAction) domain.AuditEvent {
		return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, now), AccountID: a.ID, Action: action, CreatedAt: now}
	}
	for round := range 3 {
		k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, now), AccountID: a.ID, Name: "k", Prefix: "ckpt" + string(rune('a'+round)) + "0000000",
			Env: domain.EnvLive, Hash: []byte{1}, Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 1, CreatedAt: now}
		if err := other.CreateKey(ctx, k, ev("created")); err != nil {
			t.Fatal(err)
		}
		e0 := epochOf(t, tr)
		for range 3 {
			if e := epochOf(t, tr); e != e0 {
				t.Fatalf("round %d: epoch moved from %d to %d with nothing committed", round, e0, e)
			}
		}
		if err := other.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		epochOf(t, tr)
		if err := other.RevokeKey(ctx, a.ID, k.ID, "usr_1", now, ev("revoked")); err != nil {
			t.Fatal(err)
		}
		if e := epochOf(t, tr); e != e0+1 {
			t.Fatalf("round %d: after a checkpoint and a revocation: epoch %d, want %d", round, e, e0+1)
		}
	}
}

// An account's agent write moves the count its own list pages are held
// under, and not the count of an account in another share: one busy writer
// must not make every account's held pages be read again.
func TestAgentWritesCountByShare(t *testing.T) {
	tr := &Tracker{}
	a := "acc_writer"
	var b string
	for i := 0; b == ""; i++ {
		if c := fmt.Sprintf("acc_other_%d", i); agentWriteShare(c) != agentWriteShare(a) {
			b = c
		}
	}
	wa, wb := tr.AgentWrites(a), tr.AgentWrites(b)
	tr.Committed(context.Background(), store.Commit{AgentAccounts: []string{a}})
	if n := tr.AgentWrites(a); n != wa+1 {
		t.Errorf("the writer's count is %d after one write, want %d", n, wa+1)
	}
	if n := tr.AgentWrites(b); n != wb {
		t.Errorf("another share's count moved from %d to %d on the writer's write", wb, n)
	}
}

// TestTwoTrackersOnOneSQLiteStore: each tracker holds a watch connection
// of its own; a second one (a second API handler on one store) checks
// without waiting for the first's.
func TestTwoTrackersOnOneSQLiteStore(t *testing.T) {
	tr, _ := twoSQLiteStores(t)
	second := New(tr.st, Options{})
	t.Cleanup(second.Close)
	epochOf(t, tr)
	done := make(chan error, 1)
	go func() { _, err := second.readEpoch(context.Background()); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second tracker's check waited for the first's connection")
	}
}
