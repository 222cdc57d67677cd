package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// TestRevokedKeyFloodKeepsOtherLogs: a revoked key flooding the built
// binary for a few seconds logs at most its budget of refusals a minute,
// every one of its requests is still counted, and the sweep that follows
// leaves the other key's logs all there (issue 28: before, the flood
// stored tens of thousands of 401s and the sweep kept only those).
func TestRevokedKeyFloodKeepsOtherLogs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "flood.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Flooded")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "owner@example.com", "--role", "owner")
	kept, flooder := floodKey(t, db, acct, "kept"), floodKey(t, db, acct, "flooder")
	mustCLI(t, db, "", "key", "revoke", "--account", acct, "--as", "owner@example.com", flooder.ID)
	s := startServer(t, nil, "--db", db)

	const keptRequests = 20
	for range keptRequests {
		if code, body, _ := call(t, "GET", s.base+"/v1/me", kept.Credential, ""); code != 200 {
			t.Fatalf("kept key: %d %v", code, body)
		}
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			floodRevokedUntil(t, s.base, flooder.Credential, stop, &sent)
		}()
	}
	wg.Wait()
	// A graceful stop flushes what the recorder holds.
	floodStopGracefully(t, s)

	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SweepUsage(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	logged := floodLoggedPerKey(ctx, t, st, acct)
	// The flood spans at most two minutes of the clock: 60 logs each.
	if logged[kept.ID] != keptRequests || logged[flooder.ID] > 120 || logged[flooder.ID] == 0 {
		t.Errorf("logs kept: %d of the kept key's %d, %d of the flooder's %d", logged[kept.ID], keptRequests, logged[flooder.ID], sent.Load())
	}
	counts, err := st.AccountKeyRequests(ctx, acct, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if counts[flooder.ID] != sent.Load() || counts[kept.ID] != keptRequests {
		t.Errorf("counted %v; sent %d by the flooder, %d by the kept key", counts, sent.Load(), keptRequests)
	}
	t.Logf("flooder: %d requests, %d logged", sent.Load(), logged[flooder.ID])
}

// floodKey creates an aiagent-read key named name for owner@example.com.
func floodKey(t *testing.T, db, acct, name string) (k struct{ ID, Credential string }) {
	t.Helper()
	out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "owner@example.com", "--name", name, "--preset", "aiagent-read", "--json")
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// floodRevokedUntil reads /v1/me with the revoked credential until stop,
// counting each request refused with 401 or 429 in sent; any other answer
// fails the test and ends the loop.
func floodRevokedUntil(t *testing.T, base, cred string, stop time.Time, sent *atomic.Int64) {
	t.Helper()
	for time.Now().Before(stop) {
		req, _ := http.NewRequest("GET", base+"/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("revoked key: %d", resp.StatusCode)
			return
		}
		sent.Add(1)
	}
}

// floodStopGracefully sends serve SIGTERM and waits up to 30 s for it to
// exit cleanly.
func floodStopGracefully(t *testing.T, s *server) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		s.done <- err // for the cleanup's wait
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

// floodLoggedPerKey reads every page of the account's request log and
// counts the lines per key id.
func floodLoggedPerKey(ctx context.Context, t *testing.T, st *store.Store, acct string) map[string]int {
	t.Helper()
	logged := map[string]int{}
	q := store.RequestLogQuery{AccountID: acct, Limit: 100}
	for {
		page, next, err := st.RequestLogPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page {
			logged[l.KeyID]++
		}
		if next.IsZero() {
			break
		}
		q.After = next
	}
	return logged
}
