package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestCheckpointEmptiesTheWAL: after Checkpoint the SQLite write-ahead log
// is empty and the data is all there; on PostgreSQL it does nothing.
func TestCheckpointEmptiesTheWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acct := storetest.Account(t, s)
	for i := range 50 {
		storetest.Agent(t, s, acct.ID, "agent "+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL to checkpoint: %v", err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("WAL after the checkpoint: %d bytes", fi.Size())
	}
	if got, err := s.ListAgentItems(ctx, store.AgentQuery{AccountID: acct.ID, Limit: 100}); err != nil || len(got) != 50 {
		t.Fatalf("%d agents after the checkpoint, want 50 (%v)", len(got), err)
	}
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		if err := s.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
