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
	lc := logCounter{f: &f, budget: budget}
	for {
		read, err := s.readBatches(ctx, batchQuery(&f, lc.from, maxRead), lc.take)
		switch {
		case err != nil && ctx.Err() != nil:
			return lc.n, lc.looked, false, nil
		case err != nil:
			return 0, 0, false, err
		case lc.looked >= budget && read > 0:
			// Stopped at the budget: complete only if nothing is left.
			more, err := s.readBatches(ctx, batchQuery(&f, lc.from, 1), func(int64, int64, string, []byte) (bool, error) { return false, nil })
			return lc.n, lc.looked, more == 0 && err == nil, nil
		case read < maxRead:
			return lc.n, lc.looked, true, nil
		}
	}
}

// logCounter counts the logs of batches read newest first that f keeps,
// until it has looked at budget logs.
type logCounter struct {
	f                 *requestlog.Filter
	d                 requestlog.Decoder
	p                 requestlog.Packed
	from              batchPos // the last batch counted
	n, looked, budget int
}

// take counts one batch; false once past the budget.
func (lc *logCounter) take(sec, seq int64, _ string, blob []byte) (bool, error) {
	if lc.looked >= lc.budget {
		return false, nil
	}
	lc.from = batchPos{sec: sec, seq: seq, set: true}
	kept := 0
	for lc.d.Reset(blob, sec); lc.d.Next(&lc.p); lc.looked++ {
		if lc.f.Keep(&lc.p) {
			kept++
		}
	}
	if lc.d.Err() == nil {
		lc.n += kept
	}
	return true, lc.d.Err()
}
