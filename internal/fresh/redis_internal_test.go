package fresh

import (
	"context"
	"crypto/rand"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/testenv"
)

// withRedis is a tracker of a new SQLite store whose mirror lives on
// client, named by a StoreID of its own.
func withRedis(t *testing.T, client redis.UniversalClient) (*Tracker, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tr := New(st, Options{Redis: client, StoreID: []byte(rand.Text())})
	t.Cleanup(tr.Close)
	return tr, st
}

func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMirrorOnlyMovesForwards(t *testing.T) {
	ctx := context.Background()
	tr, _ := withRedis(t, testRedis(t))
	key := tr.mirror.epochKey("acct_x")
	t.Cleanup(func() { tr.mirror.client.Del(context.Background(), key) })
	for _, e := range []int64{3, 9, 5} {
		if err := tr.mirror.raiseTo(ctx, key, e); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := tr.mirror.client.Get(ctx, key).Int64(); err != nil || got != 9 {
		t.Fatalf("mirror %d %v, want 9", got, err)
	}
}

// TestCommitRaisesTheMirror: a change to a key raises the mirror to the
// epoch it committed before the write returns, and a change to an
// account's agents sets a version never seen before.
func TestCommitRaisesTheMirror(t *testing.T) {
	ctx := context.Background()
	tr, st := withRedis(t, testRedis(t))
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: "acct_raise", Name: "x", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := st.SetAccountActive(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	epoch, _, err := st.ReadKeyEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tr.mirror.client.Get(ctx, tr.mirror.epochKey(a.ID)).Int64(); err != nil || got != epoch {
		t.Fatalf("mirror %d %v after the change, want %d", got, err, epoch)
	}
	seen := map[string]bool{}
	for range 20 {
		ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.ID, Name: "A " + rand.Text(), Instructions: "x", Enabled: true, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
		v, err := tr.mirror.client.Get(ctx, tr.ListKey(a.ID)).Result()
		if err != nil || seen[v] {
			t.Fatalf("version %q %v (seen before: %v)", v, err, seen[v])
		}
		seen[v] = true
	}
}

// TestRaiseFailureIsBoundedAndCounted: a raise on a Redis that does not
// answer is given up within its bound, counted, and reported to the
// writer; the change stays committed.
func TestRaiseFailureIsBoundedAndCounted(t *testing.T) {
	opts, err := ratelimit.ClientOptions("redis://" + testenv.SilentListener(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	tr, st := withRedis(t, c)
	tr.mirror.timeout = 300 * time.Millisecond
	ctx := context.Background()
	a := domain.Account{ID: "acct_fail", Name: "x", Active: true, CreatedAt: time.Now()}
	if err := st.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	rctx, report := WithReport(ctx)
	start := time.Now()
	if err := st.SetAccountActive(rctx, a.ID, false); err != nil {
		t.Fatalf("the write failed with its raise: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the write took %v, want its raise's bound", d)
	}
	if report.Err() == nil || tr.RaiseFailures() != 1 {
		t.Fatalf("report %v, failures %d; want the failure reported and counted", report.Err(), tr.RaiseFailures())
	}
	if got, err := st.GetAccount(ctx, a.ID); err != nil || got.Active {
		t.Fatalf("account after the write: active %v, %v", got.Active, err)
	}
}

// TestListVersionFailsWithinTheBoundWhenRedisHangs: a version that
// cannot be set is given up within the timeout and counted.
func TestListVersionFailsWithinTheBoundWhenRedisHangs(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opts.Addr)
	proxy.Cut()
	opts.Addr, opts.MaxRetries = proxy.Addr(), 0
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	m := newMirror(c, []byte("store"), testLog())
	m.timeout = 200 * time.Millisecond
	start := time.Now()
	if err := m.newVersion(context.Background(), "acct"); err == nil {
		t.Fatal("a version set through a cut connection succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the failed set took %v", d)
	}
	if m.listFailed.Load() != 1 {
		t.Fatalf("%d failures counted", m.listFailed.Load())
	}
}

// TestRepairRaisesToTheStore: a mirror left behind the store (a raise
// that failed, a Redis that went back) is raised by the repair within
// StaleBound.
func TestRepairRaisesToTheStore(t *testing.T) {
	tr, st := withRedis(t, testRedis(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := domain.Account{ID: "acct_repair", Name: "x", Active: true, CreatedAt: time.Now()}
	if err := st.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := st.SetAccountActive(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	key := tr.mirror.epochKey(a.ID)
	if err := tr.mirror.client.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	epoch, _, err := st.ReadKeyEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go tr.Repair(ctx)
	deadline := time.Now().Add(5 * StaleBound)
	for time.Now().Before(deadline) {
		if got, err := tr.mirror.client.Get(ctx, key).Int64(); err == nil && got == epoch {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("repair did not raise the mirror")
}

// TestClusterKeysShareTheAccountsSlot: on a cluster the mirror and the
// list version of an account carry its hash tag, as its windows do
// (ratelimit.Ask.Group), so one script call on one node decides.
func TestClusterKeysShareTheAccountsSlot(t *testing.T) {
	m := &mirror{cluster: true, tag: "00ff"}
	for _, k := range []string{m.epochKey("acct_1"), m.listKey("acct_1")} {
		if !strings.Contains(k, "{acct_1}") || strings.Count(k, "{") != 1 {
			t.Fatalf("%q: want the account's hash tag, alone", k)
		}
	}
	one := newMirror(nil, []byte{0, 0xff}, nil)
	if one.epochKey("acct_1") != one.epochKey("acct_2") || one.epochKey("") != "agentapi:key-epoch:00ff" {
		t.Fatalf("one Redis keeps one mirror per database, as 1.2 did: %q", one.epochKey("acct_1"))
	}
}

func testLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
