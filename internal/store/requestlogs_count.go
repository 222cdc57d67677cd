package store

import (
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// CountRequestLogs counts the logs q's filters keep (q.After and q.Limit
// aside), up to upTo: more is true when there are more than upTo. It
// reads the batches the filters may keep, newest first, maxRead a query,
// and stops once past upTo, so a count costs at most a read of upTo logs
// plus those the filters drop (all the account's logs, 100,000 at most,
// for a filter keeping few). A log written twice (a lost acknowledgement,
// requestlogs.go) is counted twice: the count is the page's to within
// such rare doubles.
func (s *Store) CountRequestLogs(ctx context.Context, q RequestLogQuery, upTo int) (n int, more bool, err error) {
	if !storable(q.AccountID, q.KeyID, q.Class, q.Route, q.RequestID) || upTo <= 0 {
		return 0, false, nil
	}
	if q.Status != 0 {
		q.Class = requestlog.ClassOf(q.Status)
	}
	q.After, q.Limit = Cursor{}, 1
	f, ok := newLogFilter(q, time.Time{})
	if !ok {
		return 0, false, nil
	}
	var (
		d    requestlog.Decoder
		p    requestlog.Packed
		from batchPos
	)
	for {
		read, err := s.readBatches(ctx, batchQuery(&f, from, maxRead), func(sec, seq int64, _ string, blob []byte) (bool, error) {
			from = batchPos{sec: sec, seq: seq, set: true}
			for d.Reset(blob, sec); d.Next(&p); {
				if f.Keep(&p) {
					n++
				}
			}
			return n <= upTo, d.Err()
		})
		if err != nil {
			return 0, false, err
		}
		if n > upTo {
			return upTo, true, nil
		}
		if read < maxRead {
			return n, false, nil
		}
	}
}
