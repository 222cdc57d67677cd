package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// TestServeStartsIdemSweeper runs serve through run() with the sweep
// interval shortened: an Idempotency-Key record that expired an hour ago
// is deleted while serve runs, and a live one is kept. It fails if serve
// stops starting the sweeper (TestIdemSweeper covers the loop itself).
func TestServeStartsIdemSweeper(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "sweep.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	acct := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "A", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	for key, at := range map[string]time.Time{"expired": now.Add(-25 * time.Hour), "live": now} {
		if _, _, _, err := st.ReserveIdempotencyKey(ctx, store.IdemRequest{AccountID: acct.ID, Key: key, Hash: []byte{1},
			Now: at, Lease: 5 * time.Minute, Keep: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	count := func(key string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow("SELECT count(*) FROM idempotency_keys WHERE idem_key = $1", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count("expired") != 1 || count("live") != 1 {
		t.Fatal("records not stored")
	}

	defer func(d time.Duration) { idemSweepEvery = d }(idemSweepEvery)
	idemSweepEvery = 20 * time.Millisecond
	addr := freeAddr(t)
	runCtx, cancel := context.WithCancel(ctx)
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--addr", addr, "--db", db}, func(string) string { return "" },
			strings.NewReader(""), &out, &errb)
	}()
	waitReady(t, "http://"+addr, errb.String)
	// Serve runs until the check ends, whatever its outcome, so that the
	// interval is restored only once serve no longer reads it.
	deadline := time.Now().Add(10 * time.Second)
	for count("expired") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	expired, live := count("expired"), count("live")
	cancel()
	waitExit(t, done, errb.String)
	if expired != 0 {
		t.Errorf("the expired record is still there after serve ran 10 s with a %v sweep interval", idemSweepEvery)
	}
	if live != 1 {
		t.Errorf("the live record was swept")
	}
}
