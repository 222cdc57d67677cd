package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// TestIdemSweeper: each tick sweeps batch after batch until one is short,
// a failure waits for the next tick, and the loop ends with its context.
func TestIdemSweeper(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	calls := make(chan time.Time, 16)
	replies := []int{idemSweepBatch, idemSweepBatch, 3, -1, 0}
	sweep := func(_ context.Context, now time.Time, batch int) (int, error) {
		if batch != idemSweepBatch {
			t.Errorf("batch %d", batch)
		}
		calls <- now
		n := replies[0]
		replies = replies[1:]
		if n < 0 {
			return 0, errors.New("store down")
		}
		return n, nil
	}
	var logs bytes.Buffer
	ended := make(chan struct{})
	go func() {
		runIdemSweeper(ctx, ticks, sweep, slog.New(slog.NewTextHandler(&logs, nil)))
		close(ended)
	}()
	t1 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	ticks <- t1
	ticks <- t1.Add(time.Minute) // sent once the first tick's three batches ran
	ticks <- t1.Add(2 * time.Minute)
	var got []time.Time
	for range 5 {
		got = append(got, <-calls)
	}
	cancel()
	<-ended
	close(calls)
	for c := range calls {
		got = append(got, c)
	}
	want := []time.Time{t1, t1, t1, t1.Add(time.Minute), t1.Add(2 * time.Minute)}
	if len(got) != len(want) {
		t.Fatalf("sweeps at %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("sweeps at %v, want %v", got, want)
		}
	}
	if !strings.Contains(logs.String(), "idempotency keys not swept") || !strings.Contains(logs.String(), "store down") {
		t.Fatalf("log %q", logs.String())
	}
}

// TestIdemSweeperOnStore: the store's sweep, as serve wires it, deletes an
// expired key and keeps a live one.
func TestIdemSweeperOnStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "agentapi.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	acct := domain.Account{ID: "acc_00000000000000000000000001", Name: "A", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	reserve := func(key string, at time.Time) store.IdemOutcome {
		out, _, _, err := st.ReserveIdempotencyKey(ctx, store.IdemRequest{AccountID: acct.ID, Key: key, Hash: []byte{1},
			Now: at, Lease: 2 * time.Hour, Keep: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	reserve("old", now.Add(-25*time.Hour))
	reserve("new", now.Add(-time.Hour))
	var deleted int
	sweep := func(ctx context.Context, at time.Time, batch int) (int, error) {
		n, err := st.SweepIdempotencyKeys(ctx, at, batch)
		deleted += n
		return n, err
	}
	sweepCtx, cancel := context.WithCancel(ctx)
	ticks, ended := make(chan time.Time), make(chan struct{})
	go func() {
		runIdemSweeper(sweepCtx, ticks, sweep, slog.Default())
		close(ended)
	}()
	ticks <- now
	ticks <- now // received once the first tick's sweep is done
	cancel()
	<-ended
	if deleted != 1 {
		t.Fatalf("swept %d keys, want 1", deleted)
	}
	if reserve("new", now) != store.IdemInProgress {
		t.Fatal("the live key was swept")
	}
}
