package ratelimit

import (
	"context"
	"net"
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

// freezer forwards to a real Redis until freeze: from then on it stops
// passing bytes either way, and connects new connections to nothing,
// while keeping every connection open; thaw passes bytes again. It plays
// a Redis that stops mid-stream, on connections already in the pool.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	f.thawed = sync.NewCond(&f.mu)
	t.Cleanup(func() {
		ln.Close()
		f.thaw()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

func (f *freezer) serve(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	f.wait()
	u, err := net.Dial("tcp", f.target)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, u)
	f.mu.Unlock()
	go f.pipe(u, c)
	go f.pipe(c, u)
}

// pipe copies src to dst, holding what it read while frozen.
func (f *freezer) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) wait() {
	f.mu.Lock()
	for f.frozen {
		f.thawed.Wait()
	}
	f.mu.Unlock()
}

func (f *freezer) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }
func (f *freezer) thaw()   { f.mu.Lock(); f.frozen = false; f.thawed.Broadcast(); f.mu.Unlock() }

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
	f := newFreezer(t, real.Options().Addr)
	l := newRedis(t, clientFor(t, "redis://"+f.addr()+"/"+strconv.Itoa(real.Options().DB)), NewMemory(nil), nil)
	l.pause = 50 * time.Millisecond
	key := uniqueKey()
	// Connections open and in use.
	if _, admitted := timedAllows(t, l, key, 100, 8); admitted != 16 || l.Fallbacks() != 0 {
		t.Fatalf("with Redis up: admitted %d of 16, fallbacks %d", admitted, l.Fallbacks())
	}
	f.freeze()
	slowest, _ := timedAllows(t, l, key, 100, 8)
	t.Logf("slowest decision after Redis stopped mid-stream: %v", slowest)
	if slowest > hangBound {
		t.Fatalf("a decision took %v after Redis stopped answering, want about 250 ms", slowest)
	}
	if l.Fallbacks() == 0 {
		t.Fatal("no fallback while Redis was not answering")
	}
	f.thaw()
	for deadline := time.Now().Add(5 * time.Second); l.skipRedis(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("did not return to Redis after it answered again")
		}
	}
	before := l.Fallbacks()
	if _, err := l.Allow(context.Background(), key, 100); err != nil || l.Fallbacks() != before {
		t.Fatalf("after the return: %v, fallbacks %d → %d", err, before, l.Fallbacks())
	}
}
