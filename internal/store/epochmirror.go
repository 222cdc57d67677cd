package store

import (
	"context"
	"fmt"
	"sync"
)

// EpochNotifier is told the key epoch after every commit that bumped it,
// before the write returns: it raises the epoch's mirror in Redis
// (ratelimit.Mirror), so that instances holding keys in memory learn of
// the change on their very next request (docs/production.md). It is the
// one place where every writer (serve's API and console, the operator
// commands) raises the mirror; none of them does it on its own.
type EpochNotifier interface {
	RaiseEpoch(ctx context.Context, epoch int64) error
}

// SetEpochNotifier makes every write that bumps the key epoch tell n after
// its commit. Call it before the store is used. On PostgreSQL it also
// makes the store Mirrored.
func (s *Store) SetEpochNotifier(n EpochNotifier) { s.keyCache.notifier = n }

// Mirrored reports that keys held in memory may be used without asking
// the store, provided the caller checks the epoch they are held under
// against the mirror (keys.Authenticator does, in the rate-limit
// decision): PostgreSQL with an EpochNotifier. On SQLite the store's own
// check (PRAGMA data_version) costs less than any round trip and stays.
func (s *Store) Mirrored() bool {
	return s.keyCache.notifier != nil && s.engine == EnginePostgres
}

// HeldKey returns the key with that prefix if it is held in memory, with
// the epoch it is held under (KeyLookup.Epoch), without asking the store:
// only a caller that then finds that epoch current in the mirror may use
// it (Mirrored).
func (s *Store) HeldKey(prefix string) (KeyLookup, bool) {
	c := s.keyCache
	c.mu.RLock()
	e, ok := c.entries[prefix]
	epoch := c.epoch
	c.mu.RUnlock()
	if !ok {
		return KeyLookup{}, false
	}
	c.hits.Add(1)
	return KeyLookup{Key: e.key, AccountActive: e.accountActive, fromMemory: true, epoch: epoch}, true
}

// SeenKeyEpoch is the highest key epoch this store has learned of, from
// its reads of the epoch (lookups, CurrentKeyEpoch: the mirror's repair)
// and its own commits. A key held under a lower epoch is stale whatever
// the mirror says: a Redis that went back to exactly the held epoch (a
// replica promoted with an older copy) is not believed.
func (s *Store) SeenKeyEpoch() int64 { return s.keyCache.seen.Load() }

// CurrentKeyEpoch reads the store's key epoch (a check that started after the
// call began, shared with concurrent lookups).
func (s *Store) CurrentKeyEpoch(ctx context.Context) (int64, error) {
	m, err := s.keyCache.currentMark(ctx, s.check)
	if err != nil {
		return 0, fmt.Errorf("key epoch: %w", err)
	}
	return m.epoch, nil
}

// RaiseMirror tells the EpochNotifier epoch (a mirror found behind the
// store: Redis lost it or went back to an older copy).
func (s *Store) RaiseMirror(ctx context.Context, epoch int64) error {
	if s.keyCache.notifier == nil {
		return nil
	}
	return s.keyCache.notifier.RaiseEpoch(ctx, epoch)
}

// afterBump tells the notifier epoch, which a transaction that committed
// set (inTx). Its failure does not undo the commit: the report in ctx
// (WithEpochReport) receives it, and every instance's repair raises the
// mirror within a second (ratelimit.StaleBound).
func (s *Store) afterBump(ctx context.Context, epoch int64) {
	s.keyCache.noteSeen(epoch)
	if s.keyCache.notifier == nil {
		return
	}
	if err := s.keyCache.notifier.RaiseEpoch(ctx, epoch); err != nil {
		if r, _ := ctx.Value(epochReportKey{}).(*EpochReport); r != nil {
			r.set(err)
		}
	}
}

// EpochReport receives the failure to raise the mirror after a commit,
// for a writer that must say so (the console shows a warning).
type EpochReport struct {
	mu  sync.Mutex
	err error
}

type epochReportKey struct{}

// WithEpochReport returns ctx carrying a report that the writes made
// under it fill when they could not raise the mirror.
func WithEpochReport(ctx context.Context) (context.Context, *EpochReport) {
	r := &EpochReport{}
	return context.WithValue(ctx, epochReportKey{}, r), r
}

func (r *EpochReport) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Err is the last failure to raise the mirror, nil when none.
func (r *EpochReport) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
