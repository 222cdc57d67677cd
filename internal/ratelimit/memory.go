package ratelimit

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

const shardCount = 128

// Memory is the in-process limiter: exact for one instance, and the
// fallback of the Redis limiter.
type Memory struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [shardCount]shard
	stop   chan struct{}
	once   sync.Once
}

// shard is one lock and its keys. Not padded to a cache line:
// BenchmarkMemoryAllowParallel showed no gain from padding (bench/RESULTS.md,
// 2026-11-24): four shards share a line of 64 bytes, so two callers on
// random keys meet on one about once in 32.
type shard struct {
	mu   sync.Mutex
	keys map[string]*window
}

// window is one key's admissions, a ring buffer oldest to newest.
type window struct {
	buf   []entry
	head  int // index of the oldest entry
	n     int // entries in use
	total int64
	// unsynced is how many of the newest admissions Redis has not been
	// told of (Memory as the Redis limiter's fallback: takeUnsynced).
	unsynced int64
}

// NewMemory returns a limiter reading time from now (time.Now when nil).
// Its sweeper frees idle keys until Close.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	m := &Memory{now: now, seed: maphash.MakeSeed(), stop: make(chan struct{})}
	for i := range m.shards {
		m.shards[i].keys = map[string]*window{}
	}
	go m.sweepLoop()
	return m
}

// Close stops the idle sweeper.
func (m *Memory) Close() { m.once.Do(func() { close(m.stop) }) }

// Allow never fails.
func (m *Memory) Allow(_ context.Context, key string, limit int) (Result, error) {
	nowMS := m.now().UnixMilli()
	s := &m.shards[maphash.String(m.seed, key)%shardCount]
	s.mu.Lock()
	w := s.keys[key]
	if w == nil {
		w = &window{}
		s.keys[key] = w
	}
	r := w.allow(nowMS, limit)
	s.mu.Unlock()
	return r, nil
}

func (w *window) at(i int) *entry { return &w.buf[(w.head+i)%len(w.buf)] }

// evict drops admissions that have left the window at nowMS.
func (w *window) evict(nowMS int64) {
	for w.n > 0 {
		e := w.at(0)
		if e.ms > nowMS-windowMS {
			break
		}
		w.total -= int64(e.count)
		w.head = (w.head + 1) % len(w.buf)
		w.n--
	}
	if w.n == 0 {
		w.head, w.total = 0, 0
	}
	w.unsynced = min(w.unsynced, w.total)
	// Give memory back when a burst is over.
	if len(w.buf) > 64 && w.n < len(w.buf)/4 {
		w.resize(len(w.buf) / 2)
	}
}

func (w *window) resize(size int) {
	buf := make([]entry, size)
	for i := 0; i < w.n; i++ {
		buf[i] = *w.at(i)
	}
	w.buf, w.head = buf, 0
}

func (w *window) allow(nowMS int64, limit int) Result {
	w.evict(nowMS)
	if w.total >= int64(limit) {
		// Walk from the oldest until enough admissions leave for one more.
		need := w.total - int64(limit) + 1
		var freed int64
		freeAt := nowMS
		for i := 0; i < w.n; i++ {
			e := w.at(i)
			freed += int64(e.count)
			if freed >= need {
				freeAt = e.ms + windowMS
				break
			}
		}
		return result(false, limit, w.total, nowMS, w.at(0).ms, freeAt)
	}
	if w.n > 0 && w.at(w.n-1).ms >= nowMS {
		// Same millisecond (or a clock that stepped back): one run.
		w.at(w.n-1).count++
	} else {
		if w.n == len(w.buf) {
			w.resize(max(2*len(w.buf), 2))
		}
		*w.at(w.n) = entry{ms: nowMS, count: 1}
		w.n++
	}
	w.total++
	w.unsynced++
	return result(true, limit, w.total, nowMS, w.at(0).ms, 0)
}

type unsynced struct {
	key  string
	runs []entry
}

// takeUnsynced returns, per key, the admissions still in the window that
// no earlier call returned, oldest first, with the time they were read at
// (ms); from then on they count as told. restoreUnsynced takes back the
// ones that could not be told.
func (m *Memory) takeUnsynced() (nowMS int64, out []unsynced) {
	nowMS = m.now().UnixMilli()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for k, w := range s.keys {
			if w.unsynced == 0 {
				continue
			}
			w.evict(nowMS)
			var runs []entry
			for j, need := w.n-1, w.unsynced; j >= 0 && need > 0; j-- {
				e := *w.at(j)
				e.count = uint32(min(int64(e.count), need))
				need -= int64(e.count)
				runs = append(runs, e)
			}
			w.unsynced = 0
			if len(runs) > 0 {
				slices.Reverse(runs)
				out = append(out, unsynced{key: k, runs: runs})
			}
		}
		s.mu.Unlock()
	}
	return nowMS, out
}

// hasUnsynced reports that some admission has not been taken by
// takeUnsynced.
func (m *Memory) hasUnsynced() bool {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, w := range s.keys {
			if w.unsynced > 0 {
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
	}
	return false
}

// restoreUnsynced counts n admissions of key, taken by takeUnsynced, as
// not told again. Those made since are newer, so the newest unsynced
// admissions are still the ones not told.
func (m *Memory) restoreUnsynced(key string, n int64) {
	s := &m.shards[maphash.String(m.seed, key)%shardCount]
	s.mu.Lock()
	if w := s.keys[key]; w != nil {
		w.unsynced = min(w.unsynced+n, w.total)
	}
	s.mu.Unlock()
}

func (m *Memory) sweepLoop() {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// sweep forgets keys with nothing left in the window.
func (m *Memory) sweep() {
	nowMS := m.now().UnixMilli()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for k, w := range s.keys {
			w.evict(nowMS)
			if w.n == 0 {
				delete(s.keys, k)
			}
		}
		s.mu.Unlock()
	}
}

// Decide is Allow for an Ask: in process, with no guard to compare (the
// verdict is not Shared) and nothing read.
func (m *Memory) Decide(ctx context.Context, a Ask) (Result, Verdict, error) {
	res, err := m.Allow(ctx, a.Key, a.Limit)
	return res, Verdict{}, err
}

// Shared is false: a Memory limiter's decisions are this process's own.
func (m *Memory) Shared() bool { return false }
