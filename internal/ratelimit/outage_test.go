package ratelimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// maxInWindow is the most admissions any rolling window holds, given
// their times in ms.
func maxInWindow(times []int64) int {
	times = slices.Sorted(slices.Values(times))
	most, lo := 0, 0
	for hi, t := range times {
		for times[lo] <= t-windowMS {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// TestRedisReturnAddsFallbackAdmissions: three instances share a key's
// ceiling of 50 through Redis; Redis restarts empty, and each instance
// admits up to the ceiling in process meanwhile. On Redis's return each
// instance adds its in-process admissions to the shared window before
// deciding there again, so no rolling 60 s holds more than the ceiling plus
// one ceiling per instance (200): without that, the emptied Redis would
// admit a further 50. Admissions are pushed once: a second outage does not
// count them twice. The instances and the script share a test clock.
func TestRedisReturnAddsFallbackAdmissions(t *testing.T) {
	ctx := context.Background()
	real := redisClient(t)
	proxy := testenv.NewProxy(t, real.Options().Addr)
	clock := testenv.NewClock(time.Now())
	const ceiling, instances = 50, 3
	ls := redisReturnInstances(t, real, proxy, clock, instances)
	key := uniqueKey()
	runsKey, metaKey := (&Redis{}).windowKeys(key, "")
	rg := &redisReturnRig{t: t, ctx: ctx, real: real, clock: clock, ls: ls, key: key, metaKey: metaKey, ceiling: ceiling}

	// Exactly the ceiling, so that no instance holds a refusal from Redis
	// (refusals): the outage below is decided by the fallbacks.
	if n := rg.round(ceiling); n != ceiling || rg.fallbacks() != 0 {
		t.Fatalf("with Redis up: %d admitted (want %d), %d fallbacks", n, ceiling, rg.fallbacks())
	}

	// Redis restarts empty; meanwhile each instance decides in process.
	clock.Advance(time.Second)
	proxy.Cut()
	if err := real.Del(ctx, runsKey, metaKey).Err(); err != nil {
		t.Fatal(err)
	}
	if n := rg.round(instances * 2 * ceiling); n != instances*ceiling {
		t.Fatalf("during the outage: %d admitted, want one ceiling per instance (%d)", n, instances*ceiling)
	}

	// Redis returns: what the instances admitted is in the shared window.
	clock.Advance(time.Second)
	proxy.Restore()
	rg.backInRedis()
	if n := rg.round(3 * ceiling); n != 0 {
		t.Fatalf("after Redis returned empty: %d more admitted within the window, want 0", n)
	}
	if got := rg.sharedTotal(); got != "150" {
		t.Fatalf("shared window counts %s admissions, want the instances' 150", got)
	}

	// A second outage, Redis keeping its data: the instances' windows
	// still hold their admissions (nothing more in process), and the
	// return does not add them again.
	proxy.Cut()
	if n := rg.round(instances * ceiling); n != 0 {
		t.Fatalf("second outage: %d admitted in process, want 0", n)
	}
	proxy.Restore()
	rg.backInRedis()
	if got := rg.sharedTotal(); got != "150" {
		t.Fatalf("after a second return the shared window counts %s admissions, want 150: pushed twice", got)
	}

	// The first 50 have left the window, the instances' 150 not yet.
	clock.Advance(58*time.Second + 500*time.Millisecond)
	if n := rg.round(3 * ceiling); n != 0 {
		t.Fatalf("at 60.5 s: %d admitted, want 0 (the in-process admissions of 1 s are still in the window)", n)
	}
	// Then they leave too: the ceiling again, in Redis.
	clock.Advance(time.Second)
	before := rg.fallbacks()
	if n := rg.round(3 * ceiling); n != ceiling || rg.fallbacks() != before {
		t.Fatalf("at 61.5 s: %d admitted (want %d), %d fallbacks", n, ceiling, rg.fallbacks()-before)
	}
	most := maxInWindow(rg.admitted)
	t.Logf("%d admitted in all; at most %d in any 60 s", len(rg.admitted), most)
	if bound := ceiling + instances*ceiling; most > bound {
		t.Fatalf("%d admitted within 60 s, over the ceiling plus one per instance (%d)", most, bound)
	}
}

// redisReturnInstances starts n limiters that reach Redis through proxy
// and read clock, in process and in the script alike.
func redisReturnInstances(t *testing.T, real *redis.Client, proxy *testenv.Proxy, clock *testenv.Clock, n int) []*Redis {
	t.Helper()
	var ls []*Redis
	for range n {
		c := clientFor(t, "redis://"+proxy.Addr()+"/"+strconv.Itoa(real.Options().DB))
		l := newRedis(t, c, NewMemory(clock.Now), nil)
		l.pause = 20 * time.Millisecond
		l.testNowMS = func() int64 { return clock.Now().UnixMilli() }
		ls = append(ls, l)
	}
	return ls
}

// redisReturnRig is TestRedisReturnAddsFallbackAdmissions's instances ls
// sharing key's ceiling, with every admission's time.
type redisReturnRig struct {
	t        *testing.T
	ctx      context.Context
	real     *redis.Client
	clock    *testenv.Clock
	ls       []*Redis
	key      string
	metaKey  string
	ceiling  int
	admitted []int64
}

// round makes tries calls, in turn on each instance, and returns how many
// were admitted.
func (rg *redisReturnRig) round(tries int) (n int) {
	rg.t.Helper()
	for i := range tries {
		r, err := rg.ls[i%len(rg.ls)].Allow(rg.ctx, rg.key, rg.ceiling)
		if err != nil {
			rg.t.Fatal(err)
		}
		if r.Allowed {
			rg.admitted = append(rg.admitted, rg.clock.Now().UnixMilli())
			n++
		}
	}
	return n
}

// fallbacks is the instances' decisions in process, in all.
func (rg *redisReturnRig) fallbacks() (n int64) {
	for _, l := range rg.ls {
		n += l.Fallbacks()
	}
	return n
}

// backInRedis waits, up to 5 s, for every instance to decide in Redis
// again.
func (rg *redisReturnRig) backInRedis() {
	rg.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range rg.ls {
		for l.Down() {
			if time.Now().After(deadline) {
				rg.t.Fatal("an instance did not return to Redis")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// sharedTotal is the admission count of the key's window in Redis.
func (rg *redisReturnRig) sharedTotal() string {
	rg.t.Helper()
	v, err := rg.real.Get(rg.ctx, rg.metaKey).Result()
	if err != nil {
		rg.t.Fatalf("the key's window in Redis: %v", err)
	}
	return strings.SplitN(v, ":", 2)[0]
}

// TestMergeMatchesMemory: admissions made in process, added to a window
// Redis kept (runs older, newer and in the same millisecond as its own),
// leave Redis deciding exactly as one in-process window that saw every
// admission: same decisions and figures, as the runs leave the window.
func TestMergeMatchesMemory(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(time.UnixMilli(1_700_000_000_000))
	fallback, ref := NewMemory(clock.Now), NewMemory(clock.Now)
	defer fallback.Close()
	defer ref.Close()
	l := newRedis(t, redisClient(t), fallback, nil)
	l.testNowMS = func() int64 { return clock.Now().UnixMilli() }
	key := uniqueKey()
	admit := func(inRedis bool, n int) {
		t.Helper()
		for range n {
			mergeMatchesAdmitOne(t, ctx, l, fallback, ref, key, inRedis)
		}
	}
	// In process only, and gone from the window by the time of the merge.
	admit(false, 2)
	clock.Advance(61 * time.Second)
	for _, step := range []struct {
		after   time.Duration
		inRedis bool
		n       int
	}{
		{0, true, 3}, {5 * time.Millisecond, false, 2}, {0, true, 1}, {10 * time.Second, false, 1},
		{10 * time.Second, true, 2}, {10 * time.Second, false, 4}, {time.Millisecond, true, 1}, {0, false, 3},
	} {
		clock.Advance(step.after)
		admit(step.inRedis, step.n)
	}
	if err := l.syncFallback(); err != nil {
		t.Fatal(err)
	}
	if _, pending := fallback.takeUnsynced(); len(pending) != 0 {
		t.Fatalf("after the merge %d keys are still unsynced", len(pending))
	}
	// 17 counted; decide at the edges of each run's departure.
	for _, step := range []struct {
		after time.Duration
		limit int
	}{
		{5 * time.Second, 17}, {0, 18}, {0, 18}, {25*time.Second - 1, 16}, {time.Millisecond, 16},
		{4 * time.Millisecond, 16}, {time.Millisecond, 16}, {10 * time.Second, 12}, {10 * time.Second, 10},
		{time.Millisecond, 4}, {10 * time.Second, 5}, {70 * time.Second, 1},
	} {
		clock.Advance(step.after)
		mergeMatchesDecide(t, ctx, clock, l, ref, key, step.limit)
	}
	if l.Fallbacks() != 0 {
		t.Fatalf("%d fallbacks with Redis up", l.Fallbacks())
	}
}

// mergeMatchesAdmitOne admits one call on key, in Redis (l) or in process
// (fallback), and the same call in the reference window ref.
func mergeMatchesAdmitOne(t *testing.T, ctx context.Context, l *Redis, fallback, ref *Memory, key string, inRedis bool) {
	t.Helper()
	var r Result
	var err error
	if inRedis {
		r, err = l.Allow(ctx, key, 1000)
	} else {
		r, err = fallback.Allow(ctx, key, 1000)
	}
	if err != nil || !r.Allowed {
		t.Fatalf("admit: %+v %v", r, err)
	}
	if r, _ := ref.Allow(ctx, key, 1000); !r.Allowed {
		t.Fatal("reference refused")
	}
}

// mergeMatchesDecide decides one call on key at limit in Redis and in ref,
// and wants the same result from both.
func mergeMatchesDecide(t *testing.T, ctx context.Context, clock *testenv.Clock, l *Redis, ref *Memory, key string, limit int) {
	t.Helper()
	got, err := l.Allow(ctx, key, limit)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.Allow(ctx, key, limit)
	if !sameResult(got, want) {
		t.Fatalf("at %v, limit %d: Redis %+v, in process %+v", clock.Now().Sub(time.UnixMilli(1_700_000_000_000)), limit, got, want)
	}
}
