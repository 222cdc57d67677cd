package ratelimit

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"
)

// TestDecideOnlyUnderItsGuard: a guarded decision is made, and recorded,
// only while the guard's key holds the value wanted; an absent guard
// reads as -1; an unguarded decision ignores it.
func TestDecideOnlyUnderItsGuard(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	g := "agentapi:guard:" + rand.Text()
	t.Cleanup(func() { c.Del(context.Background(), g) })
	key := uniqueKey()
	decide := func(want int64) (Result, Verdict) {
		t.Helper()
		res, v, err := l.Decide(ctx, Ask{Key: key, Limit: 2, Guard: Guard{Key: g, Want: want}})
		if err != nil {
			t.Fatal(err)
		}
		return res, v
	}
	if _, v := decide(0); !v.Shared || v.Held || v.Found != -1 {
		t.Fatalf("no guard key: %+v; want shared, not held, found -1", v)
	}
	if err := c.Set(ctx, g, 7, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{6, 8} { // behind and ahead of the guard
		if _, v := decide(want); v.Held || v.Found != 7 {
			t.Fatalf("want %d: %+v; want not held, found 7", want, v)
		}
	}
	for i, allowed := range []bool{true, true, false} { // the refused calls counted nothing
		if res, v := decide(7); !v.Held || res.Allowed != allowed {
			t.Fatalf("call %d under the guard: %+v %+v; want held, allowed %v", i, res, v, allowed)
		}
	}
	if _, v, err := l.Decide(ctx, Ask{Key: uniqueKey(), Limit: 1}); err != nil || !v.Held {
		t.Fatalf("no guard: %+v, %v", v, err)
	}
}

// TestDecideReadsWhatItIsAsked: the decision's script call reads
// Guard.Read when asked, and only then, and reads nothing when the guard
// does not hold; in one batch each decision reads what it asked for.
func TestDecideReadsWhatItIsAsked(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	g, r := "agentapi:guard:"+rand.Text(), "agentapi:read:"+rand.Text()
	t.Cleanup(func() { c.Del(context.Background(), g, r) })
	if err := c.Set(ctx, g, 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	read := func(want int64, key string) Verdict {
		t.Helper()
		_, v, err := l.Decide(ctx, Ask{Key: uniqueKey(), Limit: 100, Guard: Guard{Key: g, Want: want, Read: key}})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read(1, r).Read; v != (Read{Value: -1, OK: true}) {
		t.Fatalf("absent: %+v, want -1 and read", v)
	}
	if v := read(1, "").Read; v.OK {
		t.Fatalf("nothing asked: %+v", v)
	}
	if err := c.Set(ctx, r, 1234, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v := read(1, r).Read; v != (Read{Value: 1234, OK: true}) {
		t.Fatalf("set: %+v, want 1234", v)
	}
	if v := read(0, r); v.Held || v.Read.OK {
		t.Fatalf("under a guard that does not hold: %+v; want nothing decided nor read", v)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := ""
			if i%2 == 0 {
				key = r
			}
			_, v, err := l.Decide(ctx, Ask{Key: uniqueKey(), Limit: 100, Guard: Guard{Key: g, Want: 1, Read: key}})
			if err != nil || v.Read.OK != (key != "") || key != "" && v.Read.Value != 1234 {
				t.Errorf("decision %d: %+v, %v", i, v, err)
			}
		})
	}
	wg.Wait()
}

// TestLingerOnlyWhenBusy: a worker lingers for company only after a batch
// that had some, so requests one at a time are sent at once, whatever the
// linger; under concurrent load every decision is still answered within
// the linger and a round trip.
func TestLingerOnlyWhenBusy(t *testing.T) {
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	l.linger = 2 * time.Second
	start := time.Now()
	for range 20 {
		if _, err := l.Allow(context.Background(), uniqueKey(), 10); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 requests one at a time took %v: a lone request waited for company", d)
	}
	l.linger = 20 * time.Millisecond
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				t0 := time.Now()
				if _, err := l.Allow(context.Background(), uniqueKey(), 10); err != nil {
					t.Error(err)
				}
				if d := time.Since(t0); d > l.linger+l.timeout {
					t.Errorf("a decision under load took %v, past the linger and a round trip", d)
				}
			}
		})
	}
	wg.Wait()
}
