package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// A graceful stop writes out what the usage recorder buffered: requests
// sent right before SIGTERM (the last ones within the recorder's 1 s
// between batches) are all in the store after serve exits 0, as logs and
// as exact counts per class.
func TestServeStopFlushesUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "usage.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Usage")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "u@example.com", "--role", "owner")
	const ok, notFound, invalid, limited = 40, 25, 15, 10
	out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "u@example.com", "--name", "k",
		"--preset", "full-access", "--rate-limit", fmt.Sprint(ok+notFound+invalid), "--json")
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, "--db", db)
	send := func(n, status int, path string) {
		t.Helper()
		stopFlushesUsageSend(t, s.base, k.Credential, n, status, path)
	}
	start := time.Now()
	send(ok, 200, "/v1/me")
	send(notFound, 404, "/v1/nothing-here")
	send(invalid, 400, "/v1/me?note=x")
	send(limited, 429, "/v1/me")
	// No idle connection for the stop to wait on (drainGrace): it goes
	// straight to the flush, well within the recorder's second.
	http.DefaultClient.CloseIdleConnections()
	stopFlushesUsageStop(t, s)
	t.Logf("requests and stop in %v", time.Since(start))

	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	perStatus := stopFlushesUsageLogsPerStatus(ctx, t, st, acct, k.ID)
	if want := map[int]int{200: ok, 404: notFound, 400: invalid, 429: limited}; fmt.Sprint(perStatus) != fmt.Sprint(want) {
		t.Errorf("logs per status %v, want %v", perStatus, want)
	}
	buckets, err := st.KeyUsage(ctx, k.ID, start.Add(-time.Hour), time.Now().Add(time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	perClass := map[string]int64{}
	for _, b := range buckets {
		perClass[b.Class] += b.Count
	}
	if want := map[string]int64{requestlog.Class2xx: ok, requestlog.Class4xx: notFound + invalid, requestlog.Class429: limited}; fmt.Sprint(perClass) != fmt.Sprint(want) {
		t.Errorf("counts per class %v, want %v", perClass, want)
	}
}

// stopFlushesUsageSend sends n GET path with cred; each must answer status.
func stopFlushesUsageSend(t *testing.T, base, cred string, n, status int, path string) {
	t.Helper()
	for range n {
		if code, body, _ := call(t, "GET", base+path, cred, ""); code != status {
			t.Fatalf("GET %s: %d %v, want %d", path, code, body, status)
		}
	}
}

// stopFlushesUsageStop sends serve SIGTERM and waits up to 30 s for exit 0.
func stopFlushesUsageStop(t *testing.T, s *server) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

// stopFlushesUsageLogsPerStatus reads every page of the account's request
// log, counting the lines per status; every line must be keyID's.
func stopFlushesUsageLogsPerStatus(ctx context.Context, t *testing.T, st *store.Store, acct, keyID string) map[int]int {
	t.Helper()
	perStatus := map[int]int{}
	var after store.Cursor
	for {
		logs, next, err := st.RequestLogPage(ctx, store.RequestLogQuery{AccountID: acct, After: after, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			perStatus[l.Status]++
			if l.KeyID != keyID {
				t.Errorf("log of key %s", l.KeyID)
			}
		}
		if next.IsZero() {
			break
		}
		after = next
	}
	return perStatus
}
