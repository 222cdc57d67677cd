package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// Expired Idempotency-Keys (kept 24 hours) are deleted by every serve
// instance on a ticker, in short bounded statements.
const idemSweepBatch = 1000

// idemSweepEvery is a variable so that TestServeStartsIdemSweeper can see
// serve sweep without waiting ten minutes.
var idemSweepEvery = 10 * time.Minute

// sweepFunc deletes at most batch keys expired at now and reports how
// many it deleted (store.Store.SweepIdempotencyKeys).
type sweepFunc func(ctx context.Context, now time.Time, batch int) (int, error)

// runIdemSweeper sweeps on every tick (serve's: every idemSweepEvery)
// until ctx ends: batch after batch until one deletes fewer than
// idemSweepBatch, so a backlog is cleared without one long statement. A
// failure is logged and retried next tick.
func runIdemSweeper(ctx context.Context, ticks <-chan time.Time, sweep sweepFunc, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			for ctx.Err() == nil {
				n, err := sweep(ctx, now, idemSweepBatch)
				if err != nil && ctx.Err() == nil {
					log.Warn("idempotency keys not swept", "err", err)
				}
				if err != nil || n < idemSweepBatch {
					break
				}
			}
		}
	}
}

// expirySweepEvery is how often each instance writes the api_key.expiring
// and api_key.expired events that have fallen due (docs/webhooks.md).
var expirySweepEvery = time.Minute

// sweepEvents is the sweep of events, webhook deliveries and attempts past
// their 30 days (docs/webhooks.md).
func sweepEvents(st *store.Store) sweepFunc {
	return func(ctx context.Context, now time.Time, batch int) (int, error) {
		n, err := st.DeleteOldEvents(ctx, now.Add(-store.EventRetention), batch)
		return int(n), err
	}
}
