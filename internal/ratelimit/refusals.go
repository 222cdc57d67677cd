package ratelimit

import (
	"sync"
	"time"
)

// refusals remembers the keys Redis refused for their limit, until the
// moment Redis said a slot frees (docs/production.md, "Floods stay
// local"): until then each instance refuses such a key on its own, so a
// stolen or looping key's flood costs Redis nothing. The window stays
// exact: refused requests are not counted, nothing but time frees a slot,
// and the moment is placed on the local clock from when the request was
// sent, before Redis read its clock, so the local refusal ends no later
// than Redis's would.
//
// A refusal holds only for the ceiling and guard it was given under (Ask):
// a decision under another guard (the caller read the key again: revoked,
// expired, its account deactivated, its ceiling changed) is asked of Redis
// again.
type refusals struct {
	mu   sync.Mutex
	keys map[string]refusal
}

// refusal is one key's: Redis refused it under limit and guard, and a
// slot frees at until (the local clock); reset is the refusal's
// X-RateLimit-Reset.
type refusal struct {
	limit int
	guard Guard
	until time.Time
	reset time.Time
}

// maxRefusals bounds the keys remembered at once; past it refusals whose
// moment passed are dropped, and a new one is not remembered while the
// map is still full (that key is asked of Redis, as before).
const maxRefusals = 100_000

// refused returns the local refusal of key under limit and guard at now,
// if one holds.
func (f *refusals) refused(key string, limit int, guard Guard, now time.Time) (Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.keys[key]
	if !ok {
		return Result{}, false
	}
	if !now.Before(x.until) {
		delete(f.keys, key)
		return Result{}, false
	}
	if x.limit != limit || x.guard.Key != guard.Key || x.guard.Want != guard.Want {
		return Result{}, false
	}
	wait := x.until.Sub(now)
	return Result{Limit: limit, Reset: x.reset, RetryAfter: time.Duration(ceilDiv(int64(wait), int64(time.Second))) * time.Second}, true
}

// note remembers Redis's refusal of key (res) under limit and guard: a
// slot frees wait after sent, when the request left for Redis.
func (f *refusals) note(key string, limit int, guard Guard, res Result, sent time.Time, wait time.Duration) {
	if res.Allowed || wait <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = make(map[string]refusal)
	}
	if len(f.keys) >= maxRefusals {
		for k, x := range f.keys {
			if !sent.Before(x.until) {
				delete(f.keys, k)
			}
		}
		if len(f.keys) >= maxRefusals {
			return
		}
	}
	f.keys[key] = refusal{limit: limit, guard: guard, until: sent.Add(wait), reset: res.Reset}
}
