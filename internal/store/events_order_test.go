package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// openOn opens another store on dsn, closed when the test ends: one more
// instance sharing the database.
func openOn(t *testing.T, dsn string) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestEventCursorUnderConcurrentWriters: writers on several instances
// change agents of one account while a consumer follows the cursor from
// where it last read; it sees every event exactly once, in commit order
// (seq strictly increasing without a gap), and nothing else.
func TestEventCursorUnderConcurrentWriters(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresURL(t)
		checkCursor(t, []*store.Store{openOn(t, dsn), openOn(t, dsn), openOn(t, dsn)})
	})
	t.Run("sqlite", func(t *testing.T) {
		a, b := storetest.OpenTwo(t, store.EngineSQLite)
		checkCursor(t, []*store.Store{a, b})
	})
}

func checkCursor(t *testing.T, stores []*store.Store) {
	acct := storetest.Account(t, stores[0])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writeAgents(ctx, t, stores[i%len(stores)], acct.ID, i, &acked)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	seen := followEvents(t, stores[len(stores)-1], acct.ID, done)
	all, err := stores[0].ListEvents(context.Background(), store.EventQuery{AccountID: acct.ID, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(all)) != acked.Load() || len(seen) != len(all) {
		t.Fatalf("writes acknowledged %d, events stored %d, seen by the consumer %d", acked.Load(), len(all), len(seen))
	}
	for i, ev := range all {
		if seen[i].ID != ev.ID || ev.Seq != int64(i+1) {
			t.Fatalf("event %d: consumer saw %s (seq %d), the table holds %s (seq %d)", i, seen[i].ID, seen[i].Seq, ev.ID, ev.Seq)
		}
	}
	t.Logf("%d events from %d instances", len(all), len(stores))
}

// writeAgents creates an agent and toggles it until ctx ends, counting
// the writes acknowledged (each records one event).
func writeAgents(ctx context.Context, t *testing.T, s *store.Store, acct string, n int, acked *atomic.Int64) {
	now := time.Now()
	ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: acct, Name: fmt.Sprintf("agent %d", n),
		Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateAgent(context.Background(), ag); err != nil {
		t.Errorf("create agent: %v", err)
		return
	}
	acked.Add(1)
	for ctx.Err() == nil {
		_, err := s.UpdateAgent(context.Background(), acct, ag.ID, func(a *domain.Agent) (bool, error) {
			a.Enabled = !a.Enabled
			a.UpdatedAt = time.Now()
			return true, nil
		})
		if err != nil {
			t.Errorf("update agent: %v", err)
			return
		}
		acked.Add(1)
	}
}

// followEvents reads the account's events from the last one seen, small
// pages at a time, until done is closed and nothing more is there; it
// fails on a seq that does not follow the one before.
func followEvents(t *testing.T, s *store.Store, acct string, done <-chan struct{}) []domain.Event {
	var seen []domain.Event
	var last int64
	finished := false
	for {
		evs, err := s.ListEvents(context.Background(), store.EventQuery{AccountID: acct, AfterSeq: last, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 7 {
			evs = evs[:7]
		}
		for _, ev := range evs {
			if ev.Seq != last+1 {
				t.Fatalf("after seq %d the consumer read seq %d (%s)", last, ev.Seq, ev.ID)
			}
			last = ev.Seq
			seen = append(seen, ev)
		}
		if len(evs) > 0 {
			continue
		}
		if finished {
			return seen
		}
		select {
		case <-done:
			finished = true // one more read after the last write
		default:
		}
	}
}
