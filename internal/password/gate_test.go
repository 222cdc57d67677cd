package password

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGateCapsConcurrency: with n slots, n run at once and no more; the
// rest wait the whole wait, then get ErrBusy without running.
func TestGateCapsConcurrency(t *testing.T) {
	const n, callers, wait = 3, 20, 50 * time.Millisecond
	g := NewGate(n, wait)
	release := make(chan struct{})
	var running, peak, ran atomic.Int64
	type outcome struct {
		err     error
		elapsed time.Duration
	}
	out := make(chan outcome, callers)
	for range callers {
		go func() {
			start := time.Now()
			err := g.Do(context.Background(), func() {
				now := running.Add(1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				ran.Add(1)
				<-release
				running.Add(-1)
			})
			out <- outcome{err, time.Since(start)}
		}()
	}
	// The n admitted hold their slots until every other caller has given up.
	for range callers - n {
		o := <-out
		if !errors.Is(o.err, ErrBusy) {
			t.Fatalf("a caller beyond the cap: %v, want ErrBusy", o.err)
		}
		if o.elapsed < wait {
			t.Fatalf("refused after %v, before the wait of %v", o.elapsed, wait)
		}
	}
	close(release)
	for range n {
		if o := <-out; o.err != nil {
			t.Fatalf("an admitted caller: %v", o.err)
		}
	}
	if peak.Load() != n || ran.Load() != n {
		t.Fatalf("peak %d running, %d ran; want %d and %d", peak.Load(), ran.Load(), n, n)
	}
	// Slots are given back: the gate admits again.
	if err := g.Do(context.Background(), func() {}); err != nil {
		t.Fatal(err)
	}
}

// TestGateWaitsForASlot: a caller beyond the cap gets a slot freed within
// its wait, and one whose context ends stops waiting.
func TestGateWaitsForASlot(t *testing.T) {
	g := NewGate(1, time.Minute)
	held, release := make(chan struct{}), make(chan struct{})
	go func() { _ = g.Do(context.Background(), func() { close(held); <-release }) }()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, func() { t.Error("ran without a slot") }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	done := make(chan error)
	go func() { done <- g.Do(context.Background(), func() {}) }()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("a slot freed during the wait: %v", err)
	}
}

// TestGateGuardsEveryHash: Hash, Verify and DummyVerify all take a slot.
func TestGateGuardsEveryHash(t *testing.T) {
	g := NewGate(1, 10*time.Millisecond)
	h, err := g.Hash(context.Background(), "correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := g.Verify(context.Background(), h, "correct horse battery staple"); !ok || err != nil {
		t.Fatalf("Verify: %v %v", ok, err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(context.Background(), func() { close(held); <-release }) })
	<-held
	defer wg.Wait()
	defer close(release)
	if _, err := g.Hash(context.Background(), "x"); !errors.Is(err, ErrBusy) {
		t.Errorf("Hash with no slot: %v", err)
	}
	if _, err := g.Verify(context.Background(), h, "x"); !errors.Is(err, ErrBusy) {
		t.Errorf("Verify with no slot: %v", err)
	}
	if err := g.DummyVerify(context.Background(), "x"); !errors.Is(err, ErrBusy) {
		t.Errorf("DummyVerify with no slot: %v", err)
	}
}

// TestGateBoundsMemory: many concurrent verifications through a gate of
// two reserve heap for a few of them, not for each (19 MiB apiece; 24
// unbounded reserved about 450 MiB).
func TestGateBoundsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 24 times")
	}
	const callers = 24
	g := NewGate(2, time.Hour)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { _, _ = g.Verify(context.Background(), dummy, "wrong") })
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	// HeapSys never shrinks (released memory stays counted), so it is the
	// high-water mark of the heap during the test.
	grew := int64(after.HeapSys) - int64(before.HeapSys)
	const limit = 10 * memoryKiB << 10
	t.Logf("heap reserved grew by %d MiB for %d verifications", grew>>20, callers)
	if grew > limit {
		t.Fatalf("heap reserved grew by %d MiB, want at most %d MiB", grew>>20, limit>>20)
	}
}
