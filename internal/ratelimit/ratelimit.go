// Package ratelimit decides whether a key may make one more request: an
// exact rolling 60-second window of admitted requests (refused requests do
// not count), in process or shared between instances through Redis.
package ratelimit

import (
	"context"
	"time"
)

// Window is the contract's rolling window.
const Window = 60 * time.Second

// Result is one decision and what the response headers say about it.
type Result struct {
	Allowed   bool
	Limit     int
	Remaining int
	// Reset is when the oldest counted request leaves the window, rounded up
	// to a whole second (now + Window when nothing is counted).
	Reset time.Time
	// RetryAfter is 0 when allowed; otherwise the whole seconds (≥ 1) until
	// enough admissions leave the window for one more.
	RetryAfter time.Duration
}

// Limiter admits or refuses one request for key under ceiling limit.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int) (Result, error)
}

// entry is a run of admissions in one millisecond: the window keeps exact
// timestamps at millisecond resolution, compressed by run length, so a key
// holds at most 60,000 entries however high its ceiling.
type entry struct {
	ms    int64
	count uint32
}

const windowMS = int64(Window / time.Millisecond)

// result computes the headers' figures from a decision. oldestMS is the
// oldest counted admission (after this request), or -1 when none; freeAtMS is
// when a slot frees for a refused request.
func result(allowed bool, limit int, total int64, nowMS, oldestMS, freeAtMS int64) Result {
	r := Result{Allowed: allowed, Limit: limit, Remaining: int(max(int64(limit)-total, 0))}
	resetMS := nowMS + windowMS
	if oldestMS >= 0 {
		resetMS = oldestMS + windowMS
	}
	r.Reset = time.Unix(ceilDiv(resetMS, 1000), 0)
	if !allowed {
		wait := max(freeAtMS-nowMS, 1)
		r.RetryAfter = time.Duration(ceilDiv(wait, 1000)) * time.Second
	}
	return r
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}
