package ratelimit

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// TestAllowAtReadsTheWatchedVersion: the decision's script call reads the
// watched key (an account's agent-list version) when asked, and only then;
// every change sets a version never seen before; a stale epoch reads nothing.
func TestAllowAtReadsTheWatchedVersion(t *testing.T) {
	ctx := context.Background()
	l, m := newMirrored(t)
	if err := m.RaiseEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v := NewVersions(l.Client(), []byte(rand.Text()), nil)
	acct := "acct_" + rand.Text()
	t.Cleanup(func() { l.Client().Del(context.Background(), v.Key(acct)) })

	watched := func(epoch int64, watch string) Verdict {
		t.Helper()
		_, verdict, err := l.AllowAt(ctx, uniqueKey(), 100, epoch, watch)
		if err != nil {
			t.Fatal(err)
		}
		return verdict
	}
	if w := watched(1, v.Key(acct)).Watched; w != (Watched{Value: -1, OK: true}) {
		t.Fatalf("no version yet: %+v, want absent (-1) and read", w)
	}
	if w := watched(1, "").Watched; w.OK {
		t.Fatalf("nothing watched: %+v", w)
	}
	seen := map[int64]bool{-1: true}
	for range 50 {
		if err := v.AgentsChanged(ctx, acct); err != nil {
			t.Fatal(err)
		}
		w := watched(1, v.Key(acct)).Watched
		if !w.OK || seen[w.Value] || w.Value < 0 || w.Value >= 1<<48 {
			t.Fatalf("after a change: %+v (seen before: %v)", w, seen[w.Value])
		}
		seen[w.Value] = true
		if again := watched(-1, v.Key(acct)).Watched; again != w {
			t.Fatalf("unchanged: %+v, then %+v", w, again)
		}
	}
	if verdict := watched(0, v.Key(acct)); verdict.Current || verdict.Watched.OK {
		t.Fatalf("under a stale epoch: %+v; want nothing decided nor read", verdict)
	}
	wantBatchReadsEachWatch(t, l, v.Key(acct))
}

// wantBatchReadsEachWatch: many decisions under epoch 1 in one batch, each
// with the watch key or none, each read what it asked for.
func wantBatchReadsEachWatch(t *testing.T, l *Redis, key string) {
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			watch := ""
			if i%2 == 0 {
				watch = key
			}
			_, verdict, err := l.AllowAt(context.Background(), uniqueKey(), 100, 1, watch)
			if err != nil || verdict.Watched.OK != (watch != "") {
				t.Errorf("decision %d: %+v, %v", i, verdict, err)
			}
		})
	}
	wg.Wait()
}

// TestVersionsFailWithinTheBoundWhenRedisHangs: a version that cannot be
// set is given up within the timeout, reported and counted.
func TestVersionsFailWithinTheBoundWhenRedisHangs(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opts.Addr)
	proxy.Cut()
	opts.Addr, opts.MaxRetries = proxy.Addr(), 0
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	v := NewVersions(c, []byte("store"), nil)
	v.timeout = 200 * time.Millisecond
	start := time.Now()
	if err := v.AgentsChanged(context.Background(), "acct"); err == nil {
		t.Fatal("a version set through a cut connection succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the failed set took %v", d)
	}
	if v.Failures() != 1 {
		t.Fatalf("%d failures counted", v.Failures())
	}
}
