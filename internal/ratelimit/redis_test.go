package ratelimit

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func uniqueKey() string { return "test-" + rand.Text() }

func TestRedisExactAcrossInstances(t *testing.T) {
	a := NewRedis(redisClient(t), NewMemory(nil), nil)
	b := NewRedis(redisClient(t), NewMemory(nil), nil)
	key := uniqueKey()
	const n = 25
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 80 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			r, err := l.Allow(context.Background(), key, n)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Allowed {
				ok.Add(1)
			} else {
				refused.Add(1)
				if r.RetryAfter < time.Second || r.Remaining != 0 {
					t.Errorf("refusal %+v", r)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != n || refused.Load() != 80-n {
		t.Fatalf("admitted %d, refused %d; want exactly %d", ok.Load(), refused.Load(), n)
	}
	if a.Fallbacks()+b.Fallbacks() != 0 {
		t.Fatal("fell back with Redis up")
	}
}

func TestRedisResultFigures(t *testing.T) {
	c := redisClient(t)
	l := NewRedis(c, NewMemory(nil), nil)
	key := uniqueKey()
	first, err := l.Allow(context.Background(), key, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Allowed || first.Remaining != 2 || first.Limit != 3 {
		t.Fatalf("first %+v", first)
	}
	if d := time.Until(first.Reset); d < 58*time.Second || d > 62*time.Second {
		t.Fatalf("reset in %v", d)
	}
	for range 2 {
		_, _ = l.Allow(context.Background(), key, 3)
	}
	for range 3 { // refused requests are not counted
		r, _ := l.Allow(context.Background(), key, 3)
		if r.Allowed || r.RetryAfter < 58*time.Second || r.RetryAfter > 61*time.Second {
			t.Fatalf("refusal %+v", r)
		}
	}
	tag := "{agentapi:rl:" + key + "}"
	if n, _ := c.LLen(context.Background(), tag+":log").Result(); n > 3 {
		t.Fatalf("log holds %d entries for 3 admissions", n)
	}
	if v, _ := c.Get(context.Background(), tag+":total").Int(); v != 3 {
		t.Fatalf("total %d", v)
	}
	for _, k := range []string{tag + ":log", tag + ":total"} {
		if ttl, _ := c.PTTL(context.Background(), k).Result(); ttl <= 0 || ttl > 61*time.Second {
			t.Fatalf("%s ttl %v: idle keys must expire", k, ttl)
		}
	}
	// A huge ceiling does not grow Redis memory with the ceiling.
	big := uniqueKey()
	for range 200 {
		_, _ = l.Allow(context.Background(), big, 100_000_000)
	}
	if n, _ := c.LLen(context.Background(), "{agentapi:rl:"+big+"}:log").Result(); n > 200 {
		t.Fatalf("log %d entries", n)
	}
}

func TestRedisFallbackAndRecovery(t *testing.T) {
	real := redisClient(t)
	proxy := testenv.NewProxy(t, real.Options().Addr)
	opts := *real.Options()
	opts.Addr = proxy.Addr()
	opts.MaxRetries = 0
	opts.DialTimeout = 200 * time.Millisecond
	c := redis.NewClient(&opts)
	defer c.Close()
	l := NewRedis(c, NewMemory(nil), nil)
	l.pause = 100 * time.Millisecond
	key := uniqueKey()
	if r, err := l.Allow(context.Background(), key, 5); err != nil || !r.Allowed {
		t.Fatalf("with Redis: %+v %v", r, err)
	}
	proxy.Cut()
	start := time.Now()
	admitted := 0
	for range 8 {
		r, err := l.Allow(context.Background(), key, 5)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 5 || l.Fallbacks() < 8 {
		t.Fatalf("fallback admitted %d (want the full ceiling, 5, never unlimited); fallbacks %d", admitted, l.Fallbacks())
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("fallback took %v", time.Since(start))
	}
	// Redis returns: the limiter goes back to it by itself.
	proxy.Restore()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		before := l.Fallbacks()
		if _, err := l.Allow(context.Background(), uniqueKey(), 5); err != nil {
			t.Fatal(err)
		}
		if l.Fallbacks() == before {
			return // decided in Redis again
		}
	}
	t.Fatal("did not return to Redis")
}

func TestRedisUnreachableFromTheStart(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 0, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	l := NewRedis(c, NewMemory(nil), nil)
	for i := range 3 {
		r, err := l.Allow(context.Background(), "k", 2)
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("request %d: %+v %v", i, r, err)
		}
	}
	if l.Fallbacks() != 3 {
		t.Fatalf("fallbacks %d", l.Fallbacks())
	}
}
