package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// TestRequestLogFoundByItsID: a request id made as serve makes it is found
// (by the time it carries), in its own account only; ids of another form
// or whose time is not their log's (an older release's random ids, a log
// written by a clock other than the id's) are found all the same.
func TestRequestLogFoundByItsID(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
		var logs []requestlog.Log
		for i := range 40 {
			at := t0.Add(time.Duration(i) * 250 * time.Millisecond)
			logs = append(logs, usageLog("acc_1", "key_a", i, at, 200, "GET /v1/me"))
			logs[i].ID = domain.NewRequestID(at)
		}
		// Same millisecond as logs[5], other account.
		other := usageLog("acc_2", "key_b", 0, logs[5].At, 404, "GET /v1/me")
		other.ID = domain.NewRequestID(logs[5].At)
		// An id carrying a time its log does not have, and one of no such form.
		skewed := usageLog("acc_1", "key_a", 98, t0.Add(time.Hour), 500, "GET /v1/me")
		skewed.ID = domain.NewRequestID(t0.Add(-time.Hour))
		plain := usageLog("acc_1", "key_a", 99, t0.Add(2*time.Hour), 429, "GET /v1/me")
		logs = append(logs, other, skewed, plain)
		if err := s.WriteUsage(ctx, logs, nil); err != nil {
			t.Fatal(err)
		}
		find := func(acct, id string) []requestlog.Log {
			t.Helper()
			rows, _, err := s.RequestLogPage(ctx, store.RequestLogQuery{AccountID: acct, RequestID: id, Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			return rows
		}
		for _, l := range []requestlog.Log{logs[0], logs[5], logs[39], skewed, plain} {
			if rows := find("acc_1", l.ID); len(rows) != 1 || rows[0].ID != l.ID || !rows[0].At.Equal(l.At) {
				t.Errorf("search for %s: %+v", l.ID, rows)
			}
		}
		if rows := find("acc_1", other.ID); len(rows) != 0 {
			t.Errorf("another account's request found: %+v", rows)
		}
		if rows := find("acc_2", other.ID); len(rows) != 1 || rows[0].Status != 404 {
			t.Errorf("acc_2's own request: %+v", rows)
		}
		if rows := find("acc_1", domain.NewRequestID(t0)); len(rows) != 0 {
			t.Errorf("an id no request had: %+v", rows)
		}
	})
}
