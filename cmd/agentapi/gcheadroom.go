package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The service's live heap is small (a few MiB: the key cache, pools,
// templates) while every request allocates a few KiB. With the runtime's
// default GOGC=100 the heap goal is then its 4 MiB minimum, and the
// collector runs every few hundred requests. BenchmarkGCHeadroom in
// gcheadroom_test.go shows what the tuner saves on such a load: about an
// eighth of the collection cycles and half the collector's CPU per request.
// End to end, without it GET /v1/me cost 22 % more CPU a request on SQLite
// and 10 % more on PostgreSQL + Redis (bench/RESULTS.md, 2026-11-26).
//
// gcHeadroom keeps the heap goal at least headroom bytes above the live
// heap: after every collection it sets GOGC so that
//
//	goal = live + max(live, headroom)
//
// which is GOGC=100 once the live heap reaches headroom (a large key
// cache, say), so memory then grows exactly as it would by default, and a
// higher GOGC below that. The extra memory is bounded by headroom.
//
// An operator's GOGC environment variable wins: the tuner is not started.
// defaultGCHeadroomMiB is serve's --gc-headroom-mib.
const defaultGCHeadroomMiB = 32

type gcHeadroom struct {
	headroom uint64
	samples  []metrics.Sample

	mu      sync.Mutex
	stopped bool
	percent int // last set
	initial int // GOGC before start, restored by stop
}

// gcPercentFor is the GOGC that makes the goal live+max(live, headroom),
// never below 100 and never so high that one collection cycle could grow
// the heap by much more than headroom.
func gcPercentFor(live, headroom uint64) int {
	if live == 0 {
		live = 1
	}
	if live >= headroom {
		return 100
	}
	p := math.Ceil(float64(headroom) * 100 / float64(live))
	return int(min(p, 100_000))
}

// GOGC is process-wide, so the tuner is too: this is the one piece of
// global state, confined to serve's process. Tests run several servers in
// one process: the first start makes the tuner, the last stop ends it.
var gcTuner struct {
	sync.Mutex
	users int
	stop  func()
}

// startGCHeadroom starts the tuner (or counts one more user of the running
// one); the last stop restores the GOGC from before the first start.
func startGCHeadroom(headroom uint64) (stop func()) {
	gcTuner.Lock()
	defer gcTuner.Unlock()
	if gcTuner.users == 0 {
		gcTuner.stop = newGCHeadroom(headroom)
	}
	gcTuner.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcTuner.Lock()
			defer gcTuner.Unlock()
			if gcTuner.users--; gcTuner.users == 0 {
				gcTuner.stop()
			}
		})
	}
}

func newGCHeadroom(headroom uint64) (stop func()) {
	cur := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(cur)
	t := &gcHeadroom{
		headroom: headroom,
		samples:  []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
		initial:  int(cur[0].Value.Uint64()),
	}
	t.percent = t.initial
	t.tune()
	t.arm()
	return t.stop
}

// sentinel is allocated for each cycle; its cleanup runs after the
// collection that found it unreachable. It holds a pointer so that the
// tiny allocator never packs it with other objects (whose lifetime would
// then be its own).
type sentinel struct {
	_ *byte
	_ [16]byte
}

func (t *gcHeadroom) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *gcHeadroom) {
		t.mu.Lock()
		stopped := t.stopped
		t.mu.Unlock()
		if stopped {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune reads the live heap the last collection measured and sets GOGC.
func (t *gcHeadroom) tune() {
	metrics.Read(t.samples)
	if t.samples[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := gcPercentFor(t.samples[0].Value.Uint64(), t.headroom)
	t.mu.Lock()
	defer t.mu.Unlock()
	// Setting GOGC takes the heap lock; skip changes of under an eighth.
	if t.stopped || (p == t.percent) || (p != 100 && math.Abs(float64(p-t.percent)) < float64(t.percent)/8) {
		return
	}
	t.percent = p
	debug.SetGCPercent(p)
}

func (t *gcHeadroom) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(t.initial)
}
