package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

func idemReq(acct, key, body string, now time.Time) store.IdemRequest {
	h := sha256.Sum256([]byte("POST /v1/ai-agents\n" + body))
	return store.IdemRequest{AccountID: acct, Key: key, Hash: h[:], Now: now, Lease: time.Minute, Keep: 24 * time.Hour}
}

func reserve(t *testing.T, s *store.Store, req store.IdemRequest, want store.IdemOutcome) (store.IdemResponse, store.IdemReservation) {
	t.Helper()
	got, saved, res, err := s.ReserveIdempotencyKey(context.Background(), req)
	if err != nil {
		t.Fatalf("reserve %q: %v", req.Key, err)
	}
	if got != want {
		t.Fatalf("reserve %q at %s: outcome %d, want %d", req.Key, req.Now, got, want)
	}
	return saved, res
}

func TestIdempotencyKeyLifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		_, res := reserve(t, s, idemReq(acct.ID, "k1", "a", t0), store.IdemRun)
		reserve(t, s, idemReq(acct.ID, "k1", "a", t0.Add(time.Second)), store.IdemInProgress)
		reserve(t, s, idemReq(acct.ID, "k1", "b", t0.Add(time.Second)), store.IdemMismatch)
		// Keys are per account.
		reserve(t, s, idemReq(other.ID, "k1", "a", t0), store.IdemRun)

		want := store.IdemResponse{Status: 201, Location: "/v1/ai-agents/agt_1", Body: []byte(`{"data":{}}`), Streamed: true}
		if err := s.SaveIdempotentResponse(ctx, res, want); err != nil {
			t.Fatal(err)
		}
		saved, _ := reserve(t, s, idemReq(acct.ID, "k1", "a", t0.Add(time.Hour)), store.IdemReplay)
		if saved.Status != want.Status || saved.Location != want.Location || !bytes.Equal(saved.Body, want.Body) || !saved.Streamed {
			t.Fatalf("replay %+v, want %+v", saved, want)
		}
		reserve(t, s, idemReq(acct.ID, "k1", "b", t0.Add(time.Hour)), store.IdemMismatch)
		// After 24 hours the key is new again, whatever the body.
		_, res = reserve(t, s, idemReq(acct.ID, "k1", "b", t0.Add(24*time.Hour)), store.IdemRun)

		// A released reservation lets the next request run.
		if err := s.ReleaseIdempotencyKey(ctx, res); err != nil {
			t.Fatal(err)
		}
		reserve(t, s, idemReq(acct.ID, "k1", "c", t0.Add(25*time.Hour)), store.IdemRun)
	})
}

// TestIdempotencyLeaseTakeover: a reservation whose instance died blocks
// its key only until its lease ends; the owner that lost it can then
// neither save nor release over the new one.
func TestIdempotencyLeaseTakeover(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		_, dead := reserve(t, s, idemReq(acct.ID, "k", "a", t0), store.IdemRun)
		reserve(t, s, idemReq(acct.ID, "k", "a", t0.Add(59*time.Second)), store.IdemInProgress)
		_, live := reserve(t, s, idemReq(acct.ID, "k", "a", t0.Add(time.Minute)), store.IdemRun)

		wantNotFound(t, "save by the dead owner", s.SaveIdempotentResponse(ctx, dead, store.IdemResponse{Status: 201}))
		if err := s.ReleaseIdempotencyKey(ctx, dead); err != nil {
			t.Fatal(err)
		}
		reserve(t, s, idemReq(acct.ID, "k", "a", t0.Add(61*time.Second)), store.IdemInProgress)
		if err := s.SaveIdempotentResponse(ctx, live, store.IdemResponse{Status: 404, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		reserve(t, s, idemReq(acct.ID, "k", "a", t0.Add(2*time.Minute)), store.IdemReplay)
	})
}

func TestSweepIdempotencyKeys(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		for i := range 7 {
			reserve(t, s, idemReq(acct.ID, fmt.Sprint("old", i), "a", t0), store.IdemRun)
		}
		reserve(t, s, idemReq(acct.ID, "young", "a", t0.Add(time.Hour)), store.IdemRun)
		sweepAt := t0.Add(24 * time.Hour)
		for _, want := range []int{3, 3, 1, 0} {
			n, err := s.SweepIdempotencyKeys(ctx, sweepAt, 3)
			if err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Fatalf("swept %d, want %d", n, want)
			}
		}
		// The young key is still there (another body is refused); a swept
		// one is new.
		reserve(t, s, idemReq(acct.ID, "young", "b", sweepAt), store.IdemMismatch)
		reserve(t, s, idemReq(acct.ID, "old0", "b", t0.Add(time.Second)), store.IdemRun)
	})
}

// TestIdempotencyReserveConcurrently reserves one key from many goroutines
// on two stores opened on one database (two instances): exactly one runs.
func TestIdempotencyReserveConcurrently(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		stores := idempotencyReserveConcurrentlyOpen(t, engine)
		acct := storetest.Account(t, stores[0])
		for round := range 5 {
			idempotencyReserveConcurrentlyRound(t, stores, acct.ID, round)
		}
	})
}

// idempotencyReserveConcurrentlyOpen opens two stores on one fresh
// database of engine, closed at the test's end.
func idempotencyReserveConcurrentlyOpen(t *testing.T, engine string) [2]*store.Store {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "agentapi.db")
	if engine == store.EnginePostgres {
		dsn = storetest.PostgresURL(t)
	}
	var stores [2]*store.Store
	for i := range stores {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	return stores
}

// idempotencyReserveConcurrentlyRound reserves the round's key from 16
// goroutines, half on each store, and checks exactly one runs.
func idempotencyReserveConcurrentlyRound(t *testing.T, stores [2]*store.Store, accountID string, round int) {
	t.Helper()
	key := fmt.Sprint("key-", round)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[store.IdemOutcome]int{}
	)
	for g := range 16 {
		wg.Go(func() {
			out, _, _, err := stores[g%2].ReserveIdempotencyKey(context.Background(), idemReq(accountID, key, "a", t0))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[out]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[store.IdemRun] != 1 || counts[store.IdemInProgress] != 15 {
		t.Fatalf("round %d: outcomes %v, want one run and 15 in progress", round, counts)
	}
}
