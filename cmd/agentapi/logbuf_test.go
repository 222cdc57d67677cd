package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// callLog records every Write the buffer makes to the layer below.
type callLog struct {
	mu    sync.Mutex
	calls [][]byte
}

func (c *callLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, bytes.Clone(p))
	return len(p), nil
}

func (c *callLog) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(bytes.Join(c.calls, nil))
}

func (c *callLog) n() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.calls) }

func TestLineBufferBatchesWholeWrites(t *testing.T) {
	var out callLog
	b := newLineBuffer(&out, 100, time.Hour) // no periodic flush in this test
	line := strings.Repeat("a", 39) + "\n"   // 40 bytes
	for range 2 {
		b.Write([]byte(line))
	}
	if out.n() != 0 {
		t.Fatalf("%d writes below before the buffer filled, want 0", out.n())
	}
	b.Write([]byte(line)) // 120 > 100: the first two go out, this one waits
	if out.n() != 1 || out.all() != line+line {
		t.Fatalf("after filling: %d writes, %q", out.n(), out.all())
	}
	big := strings.Repeat("b", 150) + "\n"
	b.Write([]byte(big)) // larger than the buffer: after what was held, in order
	if got := out.all(); got != line+line+line+big {
		t.Fatalf("big write out of order: %q", got)
	}
	b.Write([]byte(line))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.all(); got != line+line+line+big+line {
		t.Fatalf("close did not flush: %q", got)
	}
	b.Write([]byte("late\n")) // after Close: straight through, never held
	if !strings.HasSuffix(out.all(), "late\n") {
		t.Fatalf("write after close held back: %q", out.all())
	}
}

func TestLineBufferFlushesWithinTheInterval(t *testing.T) {
	var out callLog
	b := newLineBuffer(&out, logBufferSize, logFlushEvery)
	defer b.Close()
	start := time.Now()
	b.Write([]byte("one\n"))
	for out.all() != "one\n" {
		// The interval plus scheduling slack on a loaded machine.
		if time.Since(start) > logFlushEvery+5*time.Second {
			t.Fatalf("line not flushed after %v", time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("flushed after %v (interval %v)", time.Since(start), logFlushEvery)
}

// Many goroutines logging while the flusher and a small buffer force
// flushes at every moment: every line arrives once, whole, and every write
// below ends at a line's end.
func TestLineBufferConcurrentLinesStayWhole(t *testing.T) {
	var out callLog
	b := newLineBuffer(&out, 256, time.Millisecond)
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				// Lengths vary, some longer than the buffer.
				fmt.Fprintf(b, "w%d i%d %s end\n", w, i, strings.Repeat("x", (i*37)%300))
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	for _, c := range out.calls {
		if len(c) == 0 || c[len(c)-1] != '\n' {
			t.Fatalf("a write below ends mid-line: %q", c)
		}
	}
	out.mu.Unlock()
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out.all(), "\n"), "\n") {
		var w, i int
		var x string
		if n, _ := fmt.Sscanf(l, "w%d i%d %s end", &w, &i, &x); n < 2 || !strings.HasSuffix(l, " end") || seen[l] {
			t.Fatalf("broken or repeated line %q", l)
		}
		seen[l] = true
	}
	if len(seen) != writers*lines {
		t.Fatalf("%d lines, want %d", len(seen), writers*lines)
	}
}

// serve's request lines reach stderr within the interval while it runs,
// and a graceful stop flushes every one of them.
func TestServeLogIsBufferedAndFlushedOnStop(t *testing.T) {
	db := filepath.Join(t.TempDir(), "logbuf.db")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--db", db}, func(string) string { return "" },
			strings.NewReader(""), &out, &errb)
	}()
	base := "http://" + addr
	waitReady(t, base, errb.String)
	requestID := func() string {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		if id == "" {
			t.Fatal("no X-Request-Id")
		}
		return id
	}
	id := requestID()
	start := time.Now()
	for !strings.Contains(errb.String(), id) {
		if time.Since(start) > logFlushEvery+5*time.Second {
			t.Fatalf("request line %s not on stderr after %v", id, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The last requests before the stop: no interval passes before it.
	var ids []string
	for range 20 {
		ids = append(ids, requestID())
	}
	cancel()
	waitExit(t, done, errb.String)
	log := errb.String()
	for _, id := range ids {
		if !strings.Contains(log, id) {
			t.Fatalf("request %s lost at the graceful stop", id)
		}
	}
	if !strings.HasSuffix(log, "\"msg\":\"stopped\"}\n") {
		t.Fatalf("log does not end with the stop line: %q", log[max(0, len(log)-200):])
	}
}

// BenchmarkLogLineWrite: one request-sized log line into a pipe drained by
// another goroutine (serve's stderr under a log collector), from parallel
// writers: a write(2) per line against the buffer.
func BenchmarkLogLineWrite(b *testing.B) {
	line := []byte(`{"time":"2026-11-22T21:00:00.123456789Z","level":"INFO","msg":"request","request_id":"req_0123456789abcdef01234567","method":"GET","path":"/v1/me","route":"GET /v1/me","status":200,"bytes":212,"duration_ms":0.123,"key_prefix":"abcdef012345","remote":"127.0.0.1"}` + "\n")
	for _, buffered := range []bool{false, true} {
		name := "direct"
		if buffered {
			name = "buffered"
		}
		b.Run(name, func(b *testing.B) {
			logLineWriteInto(b, line, buffered)
		})
	}
}

// logLineWriteInto writes line from parallel writers into a drained pipe,
// through a lineBuffer if buffered, else directly.
func logLineWriteInto(b *testing.B, line []byte, buffered bool) {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, r); close(drained) }()
	var dst io.Writer = w
	var lb *lineBuffer
	if buffered {
		lb = newLineBuffer(w, logBufferSize, logFlushEvery)
		dst = lb
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := dst.Write(line); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if lb != nil {
		lb.Close()
	}
	w.Close()
	<-drained
	r.Close()
}
