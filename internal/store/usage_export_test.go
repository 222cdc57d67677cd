package store

import (
	"context"
	"time"
)

// SweepUsageKeeping is SweepUsage keeping perAccount logs per account
// instead of LogsPerAccount, so a test need not write 100,000 rows.
func (s *Store) SweepUsageKeeping(ctx context.Context, now time.Time, perAccount int) error {
	return s.sweepUsage(ctx, now, perAccount)
}

// SetLogMigrationChunk sets how many rows of request_logs migration 0012
// reads at a time, until the returned func restores it.
func SetLogMigrationChunk(n int) (restore func()) {
	was := logMigrationChunk
	logMigrationChunk = n
	return func() { logMigrationChunk = was }
}
