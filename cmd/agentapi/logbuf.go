package main

import (
	"io"
	"sync"
	"time"
)

// Log buffering: serve's log used to cost one write(2) to stderr per
// request line. With stderr going to a file, removing this buffer raised
// GET /v1/me's CPU per request by 8-10 % on SQLite (two alternated A/B runs,
// 2026-11-27; the bench had measured it with stderr to /dev/null, where a
// write costs next to nothing, and seen nothing).
// Lines now collect in memory and reach stderr at least every
// logFlushEvery, when the buffer fills, and when serve returns (after the
// HTTP server has drained), so a graceful stop loses no line and a crash
// (SIGKILL) loses at most the last logFlushEvery of them.
const (
	logFlushEvery = 100 * time.Millisecond
	logBufferSize = 64 << 10
)

// lineBuffer is an io.Writer that batches whole writes. slog's handlers
// write each record, newline included, in one Write call, so flushing only
// whole writes never splits a line, and the mutex held across the
// underlying write keeps lines from interleaving. Safe for concurrent use.
type lineBuffer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	size   int
	closed bool // after Close, writes go straight through

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// newLineBuffer starts the flusher; Close stops it and flushes.
func newLineBuffer(w io.Writer, size int, every time.Duration) *lineBuffer {
	b := &lineBuffer{w: w, buf: make([]byte, 0, size), size: size, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run(every)
	return b
}

func (b *lineBuffer) run(every time.Duration) {
	defer close(b.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			_ = b.Flush()
		}
	}
}

// Write keeps p whole: if it does not fit behind what is buffered, the
// buffer goes out first; a write larger than the buffer goes straight
// through, after what was buffered before it.
func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	if len(b.buf)+len(p) > b.size {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > b.size {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *lineBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *lineBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	// What failed to reach stderr is dropped, not retried forever: a log
	// that cannot be written must not grow without bound.
	b.buf = b.buf[:0]
	return err
}

// Close stops the periodic flush and flushes; a goroutine still logging
// after it writes straight through, so no line is left behind.
func (b *lineBuffer) Close() error {
	b.once.Do(func() {
		close(b.stop)
		<-b.done
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.flushLocked()
}
