package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestChecksShareOnlyLaterChecks: concurrent callers share checks, but
// each gets the result of a check that started after it arrived.
func TestChecksShareOnlyLaterChecks(t *testing.T) {
	c := &checker{sem: make(chan struct{}, 1)}
	var started atomic.Int64
	check := epochCheck(func(context.Context) (int64, error) {
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
				m, err := c.current(context.Background(), check)
				got := m.Epoch
				if err != nil {
					t.Error(err)
					return
				}
				if got <= before {
					t.Errorf("got the result of check %d, which started before this call (%d had started)", got, before)
				}
			}
		}()
	}
	wg.Wait()
	if n := started.Load(); n >= callers*5/2 {
		t.Fatalf("%d checks for %d calls: concurrent callers did not share", n, callers*5)
	}
}

// epochCheck makes a check of one returning only an epoch.
func epochCheck(f func(context.Context) (int64, error)) func(context.Context) (Mark, error) {
	return func(ctx context.Context) (Mark, error) {
		e, err := f(ctx)
		return Mark{Epoch: e}, err
	}
}

// TestFailedCheckIsNotShared: a failed check (say, its caller's
// context ended) is not handed to others; the next caller checks again.
func TestFailedCheckIsNotShared(t *testing.T) {
	c := &checker{sem: make(chan struct{}, 1)}
	boom := errors.New("boom")
	if _, err := c.current(context.Background(), epochCheck(func(context.Context) (int64, error) { return 0, boom })); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	got, err := c.current(context.Background(), epochCheck(func(context.Context) (int64, error) { return 7, nil }))
	if err != nil || got.Epoch != 7 {
		t.Fatalf("after a failure: %d %v", got.Epoch, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.sem <- struct{}{} // a check in progress
	if _, err := c.current(ctx, epochCheck(func(context.Context) (int64, error) { return 8, nil })); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with an ended context: %v", err)
	}
	<-c.sem
}

// twoSQLiteStores opens two stores on one SQLite file, as two processes
// would; both close when the test ends.
func twoSQLiteStores(t *testing.T) (*Store, *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.db")
	var out [2]*Store
	for i := range out {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out[0], out[1]
}

// TestSQLiteWatchSeesOtherConnections: with nothing committed, epoch
// checks keep the epoch; a commit by another connection that does not touch
// the epoch keeps it too, and a deactivation by it moves it on the next
// check.
func TestSQLiteWatchSeesOtherConnections(t *testing.T) {
	ctx := context.Background()
	s, other := twoSQLiteStores(t)
	check := func() int64 {
		t.Helper()
		e, err := s.keyEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e0 := check()
	for range 10 {
		if e := check(); e != e0 {
			t.Fatalf("epoch moved from %d to %d with nothing committed", e0, e)
		}
	}
	a := domain.Account{ID: "acct_watch", Name: "x", Active: true, CreatedAt: time.Now()}
	if err := other.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e := check(); e != e0 {
		t.Fatalf("an unrelated commit moved the epoch: %d → %d", e0, e)
	}
	if err := other.SetAccountActive(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	if e := check(); e != e0+1 {
		t.Fatalf("after a deactivation by another connection: epoch %d, want %d", e, e0+1)
	}
}

// TestSQLiteWatchAcrossCheckpoints: a checkpoint that restarts the WAL
// rewrites the header too, and a revocation committed into the restarted
// WAL is seen by the next check (keys' cache then reads the key again).
func TestSQLiteWatchAcrossCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, other := twoSQLiteStores(t)
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
		epoch := func() int64 {
			t.Helper()
			e, err := s.keyEpoch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		e0 := epoch()
		for range 3 {
			if e := epoch(); e != e0 {
				t.Fatalf("round %d: epoch moved from %d to %d with nothing committed", round, e0, e)
			}
		}
		var busy, logged, done int
		if err := other.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
			t.Fatal(err)
		}
		epoch()
		if err := other.RevokeKey(ctx, a.ID, k.ID, "usr_1", now, ev("revoked")); err != nil {
			t.Fatal(err)
		}
		if e := epoch(); e != e0+1 {
			t.Fatalf("round %d: after a checkpoint and a revocation: epoch %d, want %d", round, e, e0+1)
		}
	}
}
