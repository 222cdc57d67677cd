package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// LatencyFromLogs is what AccountLatency would be read from the request
// logs instead of the histograms: every batch of the account in [from,
// to) read and unpacked, each log's duration binned in its bucket. Only
// BenchmarkLatencySource uses it, to measure that choice.
func (s *Store) LatencyFromLogs(ctx context.Context, accountID string, from, to time.Time, width time.Duration) (map[int64][]int64, error) {
	rows, err := s.queryRead(ctx, `SELECT sec, key_id, logs FROM request_log_batches WHERE account_id = $1 AND sec >= $2 AND sec < $3`,
		accountID, from.Unix(), to.Unix())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]int64{}
	var logs []requestlog.Log
	for rows.Next() {
		var sec int64
		var keyID string
		var blob []byte
		if err := rows.Scan(&sec, &keyID, &blob); err != nil {
			return nil, err
		}
		if logs, err = requestlog.Unpack(logs[:0], blob, sec, accountID, keyID); err != nil {
			return nil, fmt.Errorf("unpack: %w", err)
		}
		for _, l := range logs {
			b := l.At.Truncate(width).UnixMilli()
			h := out[b]
			if h == nil {
				h = make([]int64, requestlog.LatencyBins)
				out[b] = h
			}
			h[requestlog.LatencyBin(l.Duration)]++
		}
	}
	return out, rows.Err()
}
