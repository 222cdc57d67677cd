package usage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

type fakeStore struct {
	mu     sync.Mutex
	fail   bool
	logs   []requestlog.Log
	counts map[string]int64 // key/class/minute
	sweeps int
}

func (f *fakeStore) WritePackedUsage(_ context.Context, packed *requestlog.Buffer, counts []store.UsageCount) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("store away")
	}
	if f.counts == nil {
		f.counts = map[string]int64{}
	}
	for _, b := range packed.Batches() {
		f.logs, _ = requestlog.Unpack(f.logs, b.Blob, b.Sec, b.AccountID, b.KeyID)
	}
	for _, c := range counts {
		f.counts[c.KeyID+"/"+c.Class+"/"+c.Minute.Format("15:04")] += c.Count
	}
	return nil
}

func (f *fakeStore) SweepUsage(context.Context, time.Time) error {
	f.mu.Lock()
	f.sweeps++
	f.mu.Unlock()
	return nil
}

var t0 = time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)

func entry(id string, status int, at time.Time) requestlog.Log {
	return requestlog.Log{ID: id, AccountID: "acc", KeyID: "key", At: at, Status: status}
}

// Record buffers; Flush writes logs and per-minute, per-class counts; a
// failed flush keeps everything for the next one, which then counts each
// request once.
func TestFlushAndRetry(t *testing.T) {
	st := &fakeStore{}
	r := New(st, nil, Options{})
	for i, s := range []int{200, 201, 404, 429, 503} {
		r.Record(entry(string(rune('a'+i)), s, t0))
	}
	r.Record(entry("f", 200, t0.Add(time.Minute)))
	st.fail = true
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	r.Record(entry("g", 429, t0))
	st.fail = false
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"key/2xx/12:00": 2, "key/4xx/12:00": 1, "key/429/12:00": 2, "key/5xx/12:00": 1, "key/2xx/12:01": 1}
	if len(st.counts) != len(want) {
		t.Errorf("counts %v, want %v", st.counts, want)
	}
	for k, n := range want {
		if st.counts[k] != n {
			t.Errorf("%s = %d, want %d", k, st.counts[k], n)
		}
	}
	if len(st.logs) != 7 || st.logs[0].ID != "a" || st.logs[6].ID != "g" || pending(r) != 0 {
		t.Errorf("logs %v, pending %d", st.logs, pending(r))
	}
}

// While the store is away the buffer stays within its bounds and counts
// what it dropped: the oldest logs, new counts beyond the cap.
func TestBounded(t *testing.T) {
	st := &fakeStore{fail: true}
	r := New(st, nil, Options{MaxLogs: 3, MaxCounts: 2})
	for i := range 5 {
		r.Record(entry(string(rune('a'+i)), 200, t0.Add(time.Duration(i)*time.Minute)))
		_ = r.Flush(context.Background())
	}
	if pending(r) != 3 {
		t.Errorf("pending %d, want 3", pending(r))
	}
	// 2 logs and 3 counts (minutes 2, 3, 4) did not fit.
	if r.Dropped() != 5 {
		t.Errorf("dropped %d, want 5", r.Dropped())
	}
	st.fail = false
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(st.logs) != 3 || st.logs[0].ID != "c" || len(st.counts) != 2 {
		t.Errorf("logs %v counts %v", st.logs, st.counts)
	}
}

// Run flushes on its own, and stops with its context.
func TestRunFlushes(t *testing.T) {
	st := &fakeStore{}
	r := New(st, nil, Options{Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Record(entry("a", 200, t0))
	for pending(r) != 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.logs) != 1 {
		t.Errorf("logs %v", st.logs)
	}
}

// A key's refused requests (401, 403, 429) are logged at most
// RefusedLogsPerMinute a minute, and so are those of a client address that
// identified no key (IPv6 per /64); the counts still hold every request,
// and a new minute, another key or a success is logged as ever.
func TestRefusedLogBudget(t *testing.T) {
	st := &fakeStore{}
	r := New(st, nil, Options{})
	logged := map[string]int{}
	record := func(key, client string, status int, at time.Time, n int) {
		for i := range n {
			l := entry(fmt.Sprintf("%s-%d-%d", key, status, i), status, at)
			l.KeyID, l.Client = key, client
			r.Record(l)
		}
	}
	record("flood", "192.0.2.1", 429, t0, 500)
	record("flood", "192.0.2.1", 401, t0, 100)
	record("flood", "192.0.2.1", 200, t0, 10)
	record("other", "192.0.2.1", 403, t0, 70)
	record("", "2001:db8::1", 401, t0, 50)
	record("", "2001:db8::2", 401, t0, 50) // the same /64
	record("", "2001:db8:1::1", 401, t0, 5)
	record("flood", "192.0.2.1", 429, t0.Add(time.Minute), 100)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range st.logs {
		logged[l.KeyID+" "+l.At.Format("15:04")]++
	}
	want := map[string]int{"flood 12:00": 60 + 10, "other 12:00": 60, " 12:00": 60 + 5, "flood 12:01": 60}
	if fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("logged %v, want %v", logged, want)
	}
	wantCounts := map[string]int64{"flood/429/12:00": 500, "flood/4xx/12:00": 100, "flood/2xx/12:00": 10,
		"other/4xx/12:00": 70, "/4xx/12:00": 105, "flood/429/12:01": 100}
	if fmt.Sprint(st.counts) != fmt.Sprint(wantCounts) {
		t.Errorf("counts %v, want %v", st.counts, wantCounts)
	}
}

// pending is how many logs wait to be written.
func pending(r *Recorder) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.Len()
}
