package keys

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Toucher records last_used_at write-behind: requests note the time in
// memory, and a loop writes each key at most once per interval. The store's
// update is monotonic, so instances flushing out of order never move a key's
// last_used_at backwards.
type Toucher struct {
	write    func(context.Context, map[string]time.Time) error
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[string]time.Time
}

// NewToucher returns a Toucher that writes through write (store.TouchKeys).
func NewToucher(write func(context.Context, map[string]time.Time) error, log *slog.Logger, interval time.Duration) *Toucher {
	return &Toucher{write: write, log: log, interval: interval, pending: map[string]time.Time{}}
}

// Touch notes that key id was used at t.
func (t *Toucher) Touch(id string, at time.Time) {
	t.mu.Lock()
	if prev, ok := t.pending[id]; !ok || at.After(prev) {
		t.pending[id] = at
	}
	t.mu.Unlock()
}

// Run flushes every interval until ctx ends; it does not flush on exit
// (the caller calls Flush after the server has drained).
func (t *Toucher) Run(ctx context.Context) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.Flush(ctx); err != nil && ctx.Err() == nil {
				t.log.Warn("last_used_at flush", "err", err)
			}
		}
	}
}

// Flush writes what is pending. On failure the batch goes back to pending
// (keeping the newer time where a request came in meanwhile), so nothing is
// lost while the store is away.
func (t *Toucher) Flush(ctx context.Context) error {
	t.mu.Lock()
	batch := t.pending
	if len(batch) == 0 {
		t.mu.Unlock()
		return nil
	}
	t.pending = make(map[string]time.Time, len(batch))
	t.mu.Unlock()
	if err := t.write(ctx, batch); err != nil {
		for id, at := range batch {
			t.Touch(id, at)
		}
		return err
	}
	return nil
}

// Pending is how many keys wait to be written (for tests and metrics).
func (t *Toucher) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}
