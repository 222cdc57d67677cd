package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// hangBound is what a test allows one decision against a Redis that has
// stopped answering: well above the limiter's 250 ms (a loaded machine,
// the race detector) and well below go-redis's own 5 s read time-out.
const hangBound = 2 * time.Second

// clientFor is the client serve builds for url (ClientOptions), closed
// when the test ends.
func clientFor(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := ClientOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// timedAllows makes n concurrent decisions on key, then n one after
// another, and returns the slowest; each must be admitted or refused
// without an error.
func timedAllows(t *testing.T, l *Redis, key string, limit, n int) (slowest time.Duration, admitted int64) {
	t.Helper()
	var mu sync.Mutex
	var ok atomic.Int64
	one := func() {
		start := time.Now()
		r, err := l.Allow(context.Background(), key, limit)
		d := time.Since(start)
		if err != nil {
			t.Error(err)
			return
		}
		if r.Allowed {
			ok.Add(1)
		}
		mu.Lock()
		slowest = max(slowest, d)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); one() }()
	}
	wg.Wait()
	for range n {
		one()
	}
	return slowest, ok.Load()
}

// TestHangingRedisFromTheStart: a Redis that accepts connections and never
// answers costs a decision the limiter's time-out (250 ms), not go-redis's
// read time-out (5 s), with the client serve builds; the decisions fall
// back at the full ceiling.
func TestHangingRedisFromTheStart(t *testing.T) {
	l := newRedis(t, clientFor(t, "redis://"+testenv.SilentListener(t)+"/0"), NewMemory(nil), nil)
	slowest, admitted := timedAllows(t, l, uniqueKey(), 10, 8)
	t.Logf("slowest decision against a silent Redis: %v", slowest)
	if slowest > hangBound {
		t.Fatalf("a decision took %v against a silent Redis, want about 250 ms", slowest)
	}
	if admitted != 10 || l.Fallbacks() != 16 {
		t.Fatalf("admitted %d of 16 (want the ceiling, 10), fallbacks %d", admitted, l.Fallbacks())
	}
}

// TestRedisThatStopsMidStream: Redis stops answering on connections
// already open and in use (SIGSTOP): the decisions waiting on it are given
// up after the limiter's time-out, the rest go to the fallback at once,
// and the limiter returns to Redis when it answers again.
func TestRedisThatStopsMidStream(t *testing.T) {
	real := redisClient(t)
	// A proxy that stalls plays a Redis that stops mid-stream, on the
	// connections already in the pool.
	f := testenv.NewProxy(t, real.Options().Addr)
	l := newRedis(t, clientFor(t, "redis://"+f.Addr()+"/"+strconv.Itoa(real.Options().DB)), NewMemory(nil), nil)
	l.pause = 50 * time.Millisecond
	key := uniqueKey()
	// Connections open and in use.
	if _, admitted := timedAllows(t, l, key, 100, 8); admitted != 16 || l.Fallbacks() != 0 {
		t.Fatalf("with Redis up: admitted %d of 16, fallbacks %d", admitted, l.Fallbacks())
	}
	f.Stall()
	slowest, _ := timedAllows(t, l, key, 100, 8)
	t.Logf("slowest decision after Redis stopped mid-stream: %v", slowest)
	if slowest > hangBound {
		t.Fatalf("a decision took %v after Redis stopped answering, want about 250 ms", slowest)
	}
	if l.Fallbacks() == 0 {
		t.Fatal("no fallback while Redis was not answering")
	}
	f.Restore()
	for deadline := time.Now().Add(5 * time.Second); l.Down(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("did not return to Redis after it answered again")
		}
	}
	before := l.Fallbacks()
	if _, err := l.Allow(context.Background(), key, 100); err != nil || l.Fallbacks() != before {
		t.Fatalf("after the return: %v, fallbacks %d → %d", err, before, l.Fallbacks())
	}
}
