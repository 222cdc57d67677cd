package store

import (
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// CountRequestLogs counts the logs q's filters keep (q.After and q.Limit
// aside), newest first, looking at no more than budget logs: complete is
// false when it stopped there, n then counting only the matches among
// them; looked is how many it looked at. The key and class filters skip
// batches by their columns, so the logs looked at are those of the key and
// holding the class; the rest of the filters are tested on each log. When
// ctx ends (its deadline: a caller's bound on the count's time) the count
// stops there too, without error, what it counted so far kept. A log
// written twice (a lost acknowledgement, requestlogs.go) is counted twice:
// the count is the page's to within such rare doubles.
func (s *Store) CountRequestLogs(ctx context.Context, q RequestLogQuery, budget int) (n, looked int, complete bool, err error) {
	if !storable(q.AccountID, q.KeyID, q.Class, q.Route, q.RequestID) || budget <= 0 {
		return 0, 0, true, nil
	}
	if q.Status != 0 {
		q.Class = requestlog.ClassOf(q.Status)
	}
	q.After, q.Limit = Cursor{}, 1
	f, ok := newLogFilter(q, time.Time{})
	if !ok {
		return 0, 0, true, nil
	}
	var (
		d    requestlog.Decoder
		p    requestlog.Packed
		from batchPos
	)
	for {
		read, err := s.readBatches(ctx, batchQuery(&f, from, maxRead), func(sec, seq int64, _ string, blob []byte) (bool, error) {
			if looked >= budget {
				return false, nil
			}
			from = batchPos{sec: sec, seq: seq, set: true}
			kept := 0
			for d.Reset(blob, sec); d.Next(&p); looked++ {
				if f.Keep(&p) {
					kept++
				}
			}
			if d.Err() == nil {
				n += kept
			}
			return true, d.Err()
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return n, looked, false, nil
		case err != nil:
			return 0, 0, false, err
		case looked >= budget && read > 0:
			// Stopped at the budget: complete only if nothing is left.
			more, err := s.readBatches(ctx, batchQuery(&f, from, 1), func(int64, int64, string, []byte) (bool, error) { return false, nil })
			return n, looked, more == 0 && err == nil, nil
		case read < maxRead:
			return n, looked, true, nil
		}
	}
}
