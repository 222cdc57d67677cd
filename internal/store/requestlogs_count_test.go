package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// TestCountRequestLogs: the count is of the logs the filters keep (key,
// class, status, route by its method-less pattern, time), over more
// batches than one query reads; it looks at no more logs than its budget
// (of those the key and class columns let through), newest first, and
// says so; it counts nothing of another account.
func TestCountRequestLogs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
		var logs []requestlog.Log
		for i := range 3000 {
			// A second each: 3,000 batches, more than one query's 1,024.
			at := t0.Add(time.Duration(i) * time.Second)
			l := usageLog("acc_1", []string{"key_a", "key_b"}[i%2], i, at, []int{200, 404, 500}[i%3], "GET /v1/ai-agents/{agent_id}")
			if i%5 == 0 {
				l.Method, l.Route = "PATCH", "PATCH /v1/ai-agents/{agent_id}"
			}
			logs = append(logs, l)
		}
		logs = append(logs, usageLog("acc_2", "key_c", 0, t0, 200, "GET /v1/me"))
		if err := s.WriteUsage(ctx, logs, nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			q        store.RequestLogQuery
			budget   int
			n        int
			complete bool
		}{
			{store.RequestLogQuery{}, 5000, 3000, true},
			{store.RequestLogQuery{}, 3000, 3000, true},
			{store.RequestLogQuery{}, 2999, 2999, false},
			{store.RequestLogQuery{KeyID: "key_a"}, 1500, 1500, true},
			{store.RequestLogQuery{Class: "5xx"}, 1000, 1000, true},
			{store.RequestLogQuery{Status: 404, KeyID: "key_b"}, 5000, 500, true},
			{store.RequestLogQuery{Route: "PATCH /v1/ai-agents/{agent_id}"}, 5000, 600, true},
			// The newest 1,000 logs hold 200 PATCHes.
			{store.RequestLogQuery{Route: "PATCH /v1/ai-agents/{agent_id}"}, 1000, 200, false},
			{store.RequestLogQuery{Route: "/v1/ai-agents/{agent_id}"}, 5000, 3000, true},
			{store.RequestLogQuery{Route: "GET /v1/me"}, 5000, 0, true},
			{store.RequestLogQuery{From: t0.Add(1000 * time.Second), To: t0.Add(1100 * time.Second)}, 5000, 100, true},
		} {
			c.q.AccountID = "acc_1"
			n, _, complete, err := s.CountRequestLogs(ctx, c.q, c.budget)
			if err != nil || n != c.n || complete != c.complete {
				t.Errorf("%+v within %d: %d, %v, %v; want %d, %v", c.q, c.budget, n, complete, err, c.n, c.complete)
			}
		}
		if n, looked, complete, err := s.CountRequestLogs(ctx, store.RequestLogQuery{AccountID: "acc_2"}, 10); n != 1 || looked != 1 || !complete || err != nil {
			t.Errorf("acc_2: %d of %d, %v, %v", n, looked, complete, err)
		}
		// A count whose time is up stops without error, incomplete.
		done, cancel := context.WithCancel(ctx)
		cancel()
		if n, _, complete, err := s.CountRequestLogs(done, store.RequestLogQuery{AccountID: "acc_1"}, 5000); n != 0 || complete || err != nil {
			t.Errorf("a count out of time: %d, %v, %v", n, complete, err)
		}
	})
}
