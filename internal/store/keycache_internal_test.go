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

func TestKeyCacheEpochs(t *testing.T) {
	c := newKeyCache(10)
	e := func(id string) cachedKey { return cachedKey{key: domain.APIKey{ID: id}} }
	c.put(1, "a", e("a1"))
	if got, ok := c.get(1, "a"); !ok || got.key.ID != "a1" {
		t.Fatalf("get after put: %v %v", got, ok)
	}
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("an entry of epoch 1 served under epoch 2")
	}
	c.put(2, "b", e("b2"))
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a newer epoch kept an older entry")
	}
	// Read under epoch 1, put after the cache moved to 2: a revocation may
	// have committed in between, so it must not be kept.
	c.put(1, "a", e("a1-late"))
	if _, ok := c.get(2, "a"); ok {
		t.Fatal("a late put of an older epoch was kept")
	}
	if got, ok := c.get(2, "b"); !ok || got.key.ID != "b2" {
		t.Fatalf("b: %v %v", got, ok)
	}
}

func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache(3)
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		c.put(1, p, cachedKey{key: domain.APIKey{ID: p}})
	}
	if n := len(c.entries); n != 3 {
		t.Fatalf("%d entries, want at most 3", n)
	}
	if _, ok := c.get(1, "e"); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// TestKeyCacheSharesOnlyLaterChecks: concurrent callers share checks, but
// each gets the result of a check that started after it arrived.
func TestKeyCacheSharesOnlyLaterChecks(t *testing.T) {
	c := newKeyCache(10)
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
				m, err := c.currentMark(context.Background(), check)
				got := m.epoch
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
func epochCheck(f func(context.Context) (int64, error)) func(context.Context) (mark, error) {
	return func(ctx context.Context) (mark, error) {
		e, err := f(ctx)
		return mark{epoch: e}, err
	}
}

// TestKeyCacheFailedCheckIsNotShared: a failed check (say, its caller's
// context ended) is not handed to others; the next caller checks again.
func TestKeyCacheFailedCheckIsNotShared(t *testing.T) {
	c := newKeyCache(10)
	boom := errors.New("boom")
	if _, err := c.currentMark(context.Background(), epochCheck(func(context.Context) (int64, error) { return 0, boom })); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	got, err := c.currentMark(context.Background(), epochCheck(func(context.Context) (int64, error) { return 7, nil }))
	if err != nil || got.epoch != 7 {
		t.Fatalf("after a failure: %d %v", got.epoch, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.sem <- struct{}{} // a check in progress
	if _, err := c.currentMark(ctx, epochCheck(func(context.Context) (int64, error) { return 8, nil })); !errors.Is(err, context.Canceled) {
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
// WAL is seen by the next lookup.
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
		for range 3 {
			if got, _, err := s.KeyByPrefix(ctx, k.Prefix); err != nil || got.RevokedAt != nil {
				t.Fatalf("round %d: %v %v", round, got.RevokedAt, err)
			}
		}
		var busy, logged, done int
		if err := other.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.KeyByPrefix(ctx, k.Prefix); err != nil {
			t.Fatal(err)
		}
		if err := other.RevokeKey(ctx, a.ID, k.ID, "usr_1", now, ev("revoked")); err != nil {
			t.Fatal(err)
		}
		if got, _, err := s.KeyByPrefix(ctx, k.Prefix); err != nil || got.RevokedAt == nil {
			t.Fatalf("round %d: after a checkpoint and a revocation: revoked_at %v, err %v", round, got.RevokedAt, err)
		}
	}
}
