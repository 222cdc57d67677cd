package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{1 * mib, 32 * mib, 3200},  // goal 1 + 32 MiB
		{4 * mib, 32 * mib, 800},   // goal 4 + 32 MiB
		{32 * mib, 32 * mib, 100},  // the default from here on
		{100 * mib, 32 * mib, 100}, // goal 2 × live, as without the tuner
		{0, 32 * mib, 100_000},     // capped
		{3 * mib, 32 * mib, 1067},  // rounded up: never less headroom than asked
	} {
		if got := gcPercentFor(c.live, c.headroom); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGOGC collects until GOGC satisfies ok: the tuner runs after each
// collection, on the cleanup goroutine.
func waitGOGC(t *testing.T, what string, ok func(uint64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %s", gogc(), what)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGCHeadroomFollowsTheLiveHeap(t *testing.T) {
	before := gogc()
	stop := startGCHeadroom(256 << 20)
	// A test binary's live heap is a few MiB: far under the headroom.
	waitGOGC(t, "well above 100 with a small live heap", func(p uint64) bool { return p >= 1000 })

	// A live heap larger than the headroom: back to GOGC=100.
	big := make([]*[1 << 20]byte, 300)
	for i := range big {
		big[i] = new([1 << 20]byte)
	}
	waitGOGC(t, "100 with a live heap over the headroom", func(p uint64) bool { return p == 100 })
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, "high again once the heap is freed", func(p uint64) bool { return p >= 1000 })

	// A second user shares the tuner; only the last stop restores GOGC.
	stop2 := startGCHeadroom(256 << 20)
	stop()
	stop() // twice is once
	if p := gogc(); p == before {
		t.Fatalf("GOGC restored to %d while a user remains", p)
	}
	stop2()
	if p := gogc(); p != before {
		t.Fatalf("GOGC is %d after the last stop, want %d as before", p, before)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if p := gogc(); p != before {
		t.Fatalf("GOGC changed to %d after the stop", p)
	}
}
