package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// floodRig is TestFloodStaysLocal's two instances a and b, sharing one
// Redis and a mirror under the test's clock.
type floodRig struct {
	t     *testing.T
	ctx   context.Context
	nowMS *atomic.Int64
	c     redis.UniversalClient
	guard string // the Redis key the decisions are guarded by
	a, b  *Redis
}

func newFloodRig(t *testing.T) *floodRig {
	ctx := context.Background()
	f := &floodRig{t: t, ctx: ctx, nowMS: &atomic.Int64{}}
	f.nowMS.Store(1_800_000_000_000)
	c := redisClient(t)
	f.c = c
	f.guard = "agentapi:guard:" + uniqueKey()
	if err := c.Set(ctx, f.guard, 7, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	f.a, f.b = newRedis(t, c, NewMemory(nil), nil), newRedis(t, c, NewMemory(nil), nil)
	for _, l := range []*Redis{f.a, f.b} {
		l.testNowMS = f.nowMS.Load
	}
	return f
}

// allowAt decides in l, failing the test unless the decision stood.
func (f *floodRig) allowAt(l *Redis, key string, limit int, epoch int64) Result {
	f.t.Helper()
	r, v, err := l.Decide(f.ctx, Ask{Key: key, Limit: limit, Guard: Guard{Key: f.guard, Want: epoch}})
	if err != nil || !v.Held {
		f.t.Fatalf("%s: %+v %v", key, v, err)
	}
	return r
}

// flood sends 200 requests of key over its limit (Retry-After wantRetry),
// alternating instances, with a request of other every 50.
func (f *floodRig) flood(key, other string, limit int, wantRetry time.Duration) {
	f.t.Helper()
	for i := range 200 {
		if r := f.allowAt([]*Redis{f.a, f.b}[i%2], key, limit, 7); r.Allowed || r.RetryAfter != wantRetry {
			f.t.Fatalf("flood request %d: %+v, want a refusal with Retry-After %v", i, r, wantRetry)
		}
		if i%50 == 0 {
			if r := f.allowAt(f.a, other, 1000, 7); !r.Allowed || r.Remaining != 1000-1-i/50 {
				f.t.Fatalf("other key beside the flood: %+v", r)
			}
		}
	}
}

// TestFloodStaysLocal: once Redis refused a key for its limit, each
// instance refuses it on its own until the moment Redis said a slot
// frees, and not a moment longer; a changed ceiling or guard asks
// Redis again; other keys are decided in Redis as before.
func TestFloodStaysLocal(t *testing.T) {
	f := newFloodRig(t)
	key, other := uniqueKey(), uniqueKey()
	const limit = 5
	for i := range limit {
		f.nowMS.Add(1000)
		if r := f.allowAt([]*Redis{f.a, f.b}[i%2], key, limit, 7); !r.Allowed {
			t.Fatalf("admission %d refused: %+v", i+1, r)
		}
	}
	// The first admission leaves the window at +61 s; a flood at +15 s.
	f.nowMS.Add(10_000)
	f.flood(key, other, limit, 46*time.Second)
	if got := f.a.LocalRefusals() + f.b.LocalRefusals(); got != 198 {
		t.Fatalf("%d flood requests refused in process, want 198 (one refusal from Redis per instance)", got)
	}
	// A new ceiling, or the key read again under a new guard: Redis decides.
	if r := f.allowAt(f.a, key, limit+1, 7); !r.Allowed {
		t.Fatalf("raised ceiling: %+v", r)
	}
	if err := f.c.Set(f.ctx, f.guard, 8, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	before := f.b.LocalRefusals()
	if r := f.allowAt(f.b, key, limit, 8); r.Allowed || f.b.LocalRefusals() != before {
		t.Fatalf("read again under a new epoch: %+v, %d local refusals (want Redis's refusal)", r, f.b.LocalRefusals()-before)
	}
	// Exact: a millisecond before the first admission leaves, refused on
	// both instances; at that moment, admitted.
	f.nowMS.Store(1_800_000_000_000 + 1000 + 60_000 - 1)
	for _, l := range []*Redis{f.a, f.b} {
		if r := f.allowAt(l, key, limit+1, 8); r.Allowed {
			t.Fatalf("a millisecond early: %+v", r)
		}
	}
	f.nowMS.Add(1)
	if r := f.allowAt(f.b, key, limit+1, 8); !r.Allowed {
		t.Fatalf("when the slot frees: %+v", r)
	}
}
