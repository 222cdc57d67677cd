package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// startInProcess runs serve through run() with args after "serve --addr
// ADDR", waits until it answers, and stops it when the test ends. It
// returns the base URL and serve's log.
func startInProcess(t *testing.T, args ...string) (string, *syncBuf) {
	t.Helper()
	base, log, _ := startStoppable(t, args...)
	return base, log
}

// startStoppable is startInProcess that also returns stop, which stops
// serve and waits for it to exit 0; serve's log is then complete (it is
// buffered, and written out every logFlushEvery and when serve returns).
// The test's end calls stop if the test did not.
func startStoppable(t *testing.T, args ...string) (string, *syncBuf, func()) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", addr}, args...), func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			waitExit(t, done, errb.String)
		})
	}
	t.Cleanup(stop)
	base := "http://" + addr
	waitReady(t, base, errb.String)
	return base, &errb, stop
}

// logMessages is serve's JSON log as (level, msg) lines.
func logMessages(t *testing.T, log string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue // nothing logged at all (a quiet start)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, fmt.Sprint(m["level"], " ", m["msg"]))
	}
	return out
}

// TestServePerInstanceLimitsWarning: serve on PostgreSQL without --redis
// warns at start that rate limits are then per instance; on SQLite (one
// instance) it does not. The log is buffered (logbuf.go) and may still be
// empty when /readyz first answers, so both read the whole log, once serve
// has stopped.
func TestServePerInstanceLimitsWarning(t *testing.T) {
	warnings := func(log string) []string {
		var found []string
		for _, m := range logMessages(t, log) {
			if strings.Contains(m, "per instance") {
				found = append(found, m)
			}
		}
		return found
	}
	t.Run("postgres", func(t *testing.T) {
		_, log, stop := startStoppable(t, "--db", storetest.PostgresURL(t))
		stop()
		found := warnings(log.String())
		if len(found) == 0 {
			t.Fatalf("no per-instance warning in serve's log:\n%s", log.String())
		}
		for _, m := range found {
			if !strings.HasPrefix(m, "WARN ") || !strings.Contains(m, "--redis") {
				t.Errorf("warning %q: want a WARN naming --redis", m)
			}
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		_, log, stop := startStoppable(t, "--db", filepath.Join(t.TempDir(), "one.db"))
		stop()
		messages := logMessages(t, log.String())
		if !slices.Contains(messages, "INFO listening") || !slices.Contains(messages, "INFO stopped") {
			t.Fatalf("the log of a whole run has no listening and stopped lines:\n%s", log.String())
		}
		if found := warnings(log.String()); len(found) > 0 {
			t.Fatalf("warned on SQLite: %q", found)
		}
	})
}

// TestServeWithSilentRedis: serve starts while its Redis accepts
// connections and never answers, and each request is answered within a
// bound well under go-redis's 5 s read time-out (the limiter gives a
// round trip 250 ms), concurrent and one after another, while the
// limiter's probe keeps trying.
func TestServeWithSilentRedis(t *testing.T) {
	db := filepath.Join(t.TempDir(), "silent.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	cred := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "aiagent-read")
	start := time.Now()
	base, log := startInProcess(t, "--db", db, "--redis", "redis://"+testenv.SilentListener(t)+"/0")
	t.Logf("started in %v", time.Since(start))
	var mu sync.Mutex
	var slowest time.Duration
	one := func() {
		start := time.Now()
		code, _, h := call(t, "GET", base+"/v1/me", cred, "")
		d := time.Since(start)
		if code != 200 || h.Get("X-RateLimit-Limit") == "" {
			t.Errorf("/v1/me with a silent Redis: %d %v", code, h)
		}
		mu.Lock()
		slowest = max(slowest, d)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); one() }()
	}
	wg.Wait()
	// Long enough for the probe to try (and give up on) Redis again.
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		one()
	}
	t.Logf("slowest /v1/me with a silent Redis: %v", slowest)
	if slowest > 2*time.Second {
		t.Fatalf("a request took %v with a silent Redis, want about 250 ms at most:\n%s", slowest, log.String())
	}
}
