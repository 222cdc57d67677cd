package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lineWrites records serve's stderr write by write.
type lineWrites struct {
	mu     sync.Mutex
	writes []string
}

func (w *lineWrites) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestServeLogsEachLineAsItHappens: serve writes each log line to stderr
// by itself, when it is logged, not batched behind a buffer (issue 30: the
// line buffer did not pay for itself end to end).
func TestServeLogsEachLineAsItHappens(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lineWrites{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "log.db")}, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
	}()
	waitReady(t, "http://"+addr, func() string { return "" })
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := http.Get("http://" + addr + "/v1/me"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	stderr.mu.Lock()
	defer stderr.mu.Unlock()
	for _, w := range stderr.writes {
		if strings.Count(w, "\n") != 1 || !strings.HasSuffix(w, "\n") {
			t.Fatalf("a write of %d lines: %q", strings.Count(w, "\n"), w)
		}
	}
}
