package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ t atomic.Int64 } // Unix milliseconds

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.t.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(d.Milliseconds()) }

func newFake(t *testing.T) (*Memory, *fakeClock) {
	c := &fakeClock{}
	c.t.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixMilli())
	m := NewMemory(c.now)
	t.Cleanup(m.Close)
	return m, c
}

func allow(t *testing.T, m *Memory, key string, limit int) Result {
	t.Helper()
	r, err := m.Allow(context.Background(), key, limit)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWindowArithmetic(t *testing.T) {
	m, c := newFake(t)
	start := c.now()
	// Three admissions, 10 s apart.
	for i := range 3 {
		r := allow(t, m, "k", 3)
		if !r.Allowed || r.Limit != 3 || r.Remaining != 2-i || !r.Reset.Equal(start.Add(Window)) || r.RetryAfter != 0 {
			t.Fatalf("admission %d: %+v", i, r)
		}
		c.advance(10 * time.Second)
	}
	// Full: refused, and refusals are not counted.
	for range 5 {
		r := allow(t, m, "k", 3)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter != 30*time.Second || !r.Reset.Equal(start.Add(Window)) {
			t.Fatalf("refusal: %+v", r)
		}
	}
	// At 59.999 s after the first admission it is still counted…
	c.advance(29*time.Second + 999*time.Millisecond)
	if r := allow(t, m, "k", 3); r.Allowed || r.RetryAfter != time.Second {
		t.Fatalf("at 59.999 s: %+v", r)
	}
	// …and at exactly 60 s it has left the window.
	c.advance(time.Millisecond)
	if r := allow(t, m, "k", 3); !r.Allowed || r.Remaining != 0 || !r.Reset.Equal(start.Add(Window+10*time.Second)) {
		t.Fatalf("at 60 s: %+v", r)
	}
}

func TestResetAndRetryRoundUp(t *testing.T) {
	m, c := newFake(t)
	c.advance(300 * time.Millisecond) // 12:00:00.300
	r := allow(t, m, "k", 1)
	// Oldest admission leaves at 12:01:00.300: reset is the next whole second.
	if want := time.Date(2026, 11, 22, 12, 1, 1, 0, time.UTC); !r.Reset.Equal(want) {
		t.Fatalf("reset %v, want %v", r.Reset, want)
	}
	c.advance(59*time.Second + 800*time.Millisecond) // 0.2 s before the slot frees
	if r := allow(t, m, "k", 1); r.Allowed || r.RetryAfter != time.Second {
		t.Fatalf("retry after %+v, want 1 s (rounded up, at least 1)", r)
	}
}

func TestCeilingChanges(t *testing.T) {
	m, c := newFake(t)
	for range 10 {
		allow(t, m, "k", 10)
		c.advance(time.Second)
	}
	// Lowered below the count: refused until enough leave. 10 admitted at
	// 0..9 s, now 10 s; with N=4, 7 must leave, the 7th at 6 s + 60 s.
	r := allow(t, m, "k", 4)
	if r.Allowed || r.Remaining != 0 || r.RetryAfter != 56*time.Second {
		t.Fatalf("lowered: %+v", r)
	}
	// Raised: admitted at once.
	if r := allow(t, m, "k", 20); !r.Allowed || r.Remaining != 9 {
		t.Fatalf("raised: %+v", r)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	m, _ := newFake(t)
	allow(t, m, "a", 1)
	if r := allow(t, m, "a", 1); r.Allowed {
		t.Fatal("a admitted twice")
	}
	if r := allow(t, m, "b", 1); !r.Allowed {
		t.Fatal("b refused because of a")
	}
}

func TestMemoryIsBoundedWhateverTheCeiling(t *testing.T) {
	m, c := newFake(t)
	// A huge ceiling with a few requests keeps a tiny buffer.
	for range 5 {
		allow(t, m, "big", 1_000_000)
	}
	w := m.window("big")
	if len(w.buf) > 4 || w.n != 1 || w.total != 5 {
		t.Fatalf("same-millisecond burst: buffer %d, entries %d, total %d", len(w.buf), w.n, w.total)
	}
	// One request per millisecond for 70 s: at most 60,000 entries held.
	for range 70_000 {
		allow(t, m, "stream", 1_000_000)
		c.advance(time.Millisecond)
		if w := m.window("stream"); w.n > 60_000 {
			t.Fatalf("%d entries", w.n)
		}
	}
	if w := m.window("stream"); w.total != 59_999 && w.total != 60_000 {
		t.Fatalf("total %d after 70 s at 1/ms", w.total)
	}
	// After an idle minute the sweeper forgets every key.
	c.advance(Window)
	m.sweep()
	for i := range m.shards {
		if n := len(m.shards[i].keys); n != 0 {
			t.Fatalf("%d keys in shard %d after sweep", n, i)
		}
	}
}

func TestConcurrentAllowIsExact(t *testing.T) {
	m := NewMemory(nil)
	defer m.Close()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if r, _ := m.Allow(context.Background(), "shared", 100); r.Allowed {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Fatalf("admitted %d of 500, want exactly 100", ok.Load())
	}
}

func (m *Memory) window(key string) *window {
	for i := range m.shards {
		if w, ok := m.shards[i].keys[key]; ok {
			return w
		}
	}
	return &window{}
}

func BenchmarkMemoryAllowParallel(b *testing.B) {
	m := NewMemory(nil)
	defer m.Close()
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key_%d", i)
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			_, _ = m.Allow(context.Background(), keys[i%len(keys)], 1_000_000)
			i++
		}
	})
}

func BenchmarkMemoryBytesPerKey(b *testing.B) {
	for b.Loop() {
		m := NewMemory(nil)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range 100_000 {
			for range 3 {
				_, _ = m.Allow(context.Background(), fmt.Sprintf("key_%d", i), 1_000_000)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/100_000, "B/key")
		m.Close()
	}
}
