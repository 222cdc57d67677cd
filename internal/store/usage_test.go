package store_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

func usageLog(acct, key string, i int, at time.Time, status int, route string) requestlog.Log {
	return requestlog.Log{ID: fmt.Sprintf("req_%s_%04d", key, i), AccountID: acct, KeyID: key, At: at,
		Method: "GET", Route: route, Path: "/v1/me", Status: status, Duration: 1500 * time.Microsecond, Client: "192.0.2.1"}
}

// allLogs reads every page of q, q.Limit logs at a time.
func allLogs(t *testing.T, s *store.Store, q store.RequestLogQuery) []requestlog.Log {
	t.Helper()
	var out []requestlog.Log
	for range 1000 {
		page, next, err := s.RequestLogPage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next.IsZero() {
			return out
		}
		q.After = next
	}
	t.Fatal("no last page")
	return nil
}

// logIDs is the ids of every log of the account, newest first.
func logIDs(t *testing.T, s *store.Store, acct string) (ids []string) {
	t.Helper()
	for _, l := range allLogs(t, s, store.RequestLogQuery{AccountID: acct, Limit: 50}) {
		ids = append(ids, l.ID)
	}
	return ids
}

// Two writers (two instances) add their counts to the same minute: the
// totals are their sums; the chart's buckets and the Developers page's
// 24-hour totals read them back.
func TestUsageCountsAdd(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
		m := now.Truncate(time.Minute)
		a := []store.UsageCount{{AccountID: "acc_1", KeyID: "key_1", Minute: m, Class: requestlog.Class2xx, Count: 3},
			{AccountID: "acc_1", KeyID: "key_1", Minute: m, Class: requestlog.Class429, Count: 2}}
		b := []store.UsageCount{{AccountID: "acc_1", KeyID: "key_1", Minute: m, Class: requestlog.Class2xx, Count: 4},
			{AccountID: "acc_1", KeyID: "key_1", Minute: m.Add(-90 * time.Minute), Class: requestlog.Class5xx, Count: 1},
			{AccountID: "acc_1", KeyID: "key_2", Minute: m, Class: requestlog.Class4xx, Count: 5}}
		for _, batch := range [][]store.UsageCount{a, b} {
			if err := s.WriteUsage(ctx, nil, batch); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.KeyUsage(ctx, "key_1", now.Add(-24*time.Hour), now.Add(time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint([]store.UsageBucket{
			{Start: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC), Class: requestlog.Class5xx, Count: 1},
			{Start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Class: requestlog.Class2xx, Count: 7},
			{Start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Class: requestlog.Class429, Count: 2},
		})
		if fmt.Sprint(got) != want {
			t.Errorf("buckets = %v, want %v", got, want)
		}
		per, err := s.AccountKeyRequests(ctx, "acc_1", now.Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if per["key_1"] != 10 || per["key_2"] != 5 || len(per) != 2 {
			t.Errorf("per key = %v", per)
		}
	})
}

// The Logs page: newest first in pages that hold every row once, each
// filter, the search by request id, another account's rows never; a
// request id written twice (a retried batch) is stored once.
func TestRequestLogPage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		logs := requestLogPageSeed(t, s, t0)
		got := requestLogPageAll(t, s, store.RequestLogQuery{})
		if len(got) != 25 {
			t.Fatalf("%d logs, want 25", len(got))
		}
		requestLogPageCheckOrder(t, got)
		if got[0].Duration != 1500*time.Microsecond || got[0].Client != "192.0.2.1" {
			t.Errorf("read back %+v", got[0])
		}
		requestLogPageCheckFilters(t, s, logs, t0)
	})
}

// requestLogPageSeed writes 25 logs of acc_1, two a second from t0, and
// one of acc_2, then the first three again (a retried batch); it returns
// the logs.
func requestLogPageSeed(t *testing.T, s *store.Store, t0 time.Time) []requestlog.Log {
	t.Helper()
	ctx := context.Background()
	statuses := []int{200, 404, 429, 500, 201}
	var logs []requestlog.Log
	for i := range 25 {
		key := []string{"key_a", "key_b"}[i%2]
		route := []string{"GET /v1/me", "GET /v1/agents"}[i%3%2]
		logs = append(logs, usageLog("acc_1", key, i, t0.Add(time.Duration(i/2)*time.Second), statuses[i%5], route))
	}
	logs = append(logs, usageLog("acc_2", "key_c", 0, t0, 200, "GET /v1/me"))
	if err := s.WriteUsage(ctx, logs, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteUsage(ctx, logs[:3], nil); err != nil {
		t.Fatalf("a retried batch: %v", err)
	}
	return logs
}

// requestLogPageAll reads every page of q for acc_1, four logs a page.
func requestLogPageAll(t *testing.T, s *store.Store, q store.RequestLogQuery) []requestlog.Log {
	t.Helper()
	q.AccountID, q.Limit = "acc_1", 4
	return allLogs(t, s, q)
}

// requestLogPageCheckOrder checks the rows are acc_1's, each once, newest
// first.
func requestLogPageCheckOrder(t *testing.T, got []requestlog.Log) {
	t.Helper()
	seen := map[string]bool{}
	for i, l := range got {
		if seen[l.ID] || l.AccountID != "acc_1" {
			t.Fatalf("row %d: %+v (seen %v)", i, l, seen[l.ID])
		}
		seen[l.ID] = true
		if i > 0 && (l.At.After(got[i-1].At) || l.At.Equal(got[i-1].At) && l.ID > got[i-1].ID) {
			t.Fatalf("not newest first at %d", i)
		}
	}
}

// requestLogPageCount checks q finds want rows, as many as keep keeps of
// acc_1's logs, and only rows keep keeps.
func requestLogPageCount(t *testing.T, s *store.Store, logs []requestlog.Log, q store.RequestLogQuery, want int, keep func(requestlog.Log) bool) {
	t.Helper()
	rows := requestLogPageAll(t, s, q)
	n := 0
	for _, l := range logs[:25] {
		if keep(l) {
			n++
		}
	}
	if len(rows) != want || n != want {
		t.Errorf("%+v: %d rows (%d expected by filter), want %d", q, len(rows), n, want)
	}
	for _, l := range rows {
		if !keep(l) {
			t.Errorf("%+v: row %+v", q, l)
		}
	}
}

// requestLogPageCheckFilters checks each filter and the search by request
// id, and that another account's request is not found.
func requestLogPageCheckFilters(t *testing.T, s *store.Store, logs []requestlog.Log, t0 time.Time) {
	t.Helper()
	count := func(q store.RequestLogQuery, want int, keep func(requestlog.Log) bool) {
		t.Helper()
		requestLogPageCount(t, s, logs, q, want, keep)
	}
	count(store.RequestLogQuery{KeyID: "key_b"}, 12, func(l requestlog.Log) bool { return l.KeyID == "key_b" })
	count(store.RequestLogQuery{Class: requestlog.Class4xx}, 5, func(l requestlog.Log) bool { return l.Status == 404 })
	count(store.RequestLogQuery{Status: 429}, 5, func(l requestlog.Log) bool { return l.Status == 429 })
	count(store.RequestLogQuery{Class: requestlog.Class2xx}, 10, func(l requestlog.Log) bool { return l.Status < 300 })
	count(store.RequestLogQuery{Route: "GET /v1/agents"}, 8, func(l requestlog.Log) bool { return l.Route == "GET /v1/agents" })
	from, to := t0.Add(3*time.Second), t0.Add(5*time.Second)
	count(store.RequestLogQuery{From: from, To: to}, 4, func(l requestlog.Log) bool { return !l.At.Before(from) && l.At.Before(to) })
	count(store.RequestLogQuery{RequestID: logs[7].ID}, 1, func(l requestlog.Log) bool { return l.ID == logs[7].ID })
	if rows := requestLogPageAll(t, s, store.RequestLogQuery{RequestID: "req_key_c_0000"}); len(rows) != 0 {
		t.Errorf("another account's request found: %v", rows)
	}
}

// The sweep: logs older than 7 days go, and each account keeps only its
// newest logs; minutes older than 48 hours are added to their hour (to
// what an earlier sweep put there), hours older than 90 days go.
func TestSweepUsage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		var logs []requestlog.Log
		for i := range 6 {
			logs = append(logs, usageLog("acc_1", "key_a", i, now.Add(-time.Duration(i)*time.Hour), 200, "GET /v1/me"))
		}
		logs = append(logs, usageLog("acc_2", "key_b", 0, now.Add(-7*24*time.Hour-time.Millisecond), 200, "GET /v1/me"),
			usageLog("acc_2", "key_b", 1, now.Add(-7*24*time.Hour+time.Millisecond), 200, "GET /v1/me"))
		old := now.Add(-50 * time.Hour).Truncate(time.Hour)
		counts := []store.UsageCount{
			{AccountID: "acc_1", KeyID: "key_a", Minute: old, Class: requestlog.Class2xx, Count: 2},
			{AccountID: "acc_1", KeyID: "key_a", Minute: old.Add(59 * time.Minute), Class: requestlog.Class2xx, Count: 3},
			{AccountID: "acc_1", KeyID: "key_a", Minute: now.Add(-47 * time.Hour), Class: requestlog.Class2xx, Count: 4},
			{AccountID: "acc_1", KeyID: "key_a", Minute: now.Add(-91 * 24 * time.Hour), Class: requestlog.Class5xx, Count: 9},
		}
		if err := s.WriteUsage(ctx, logs, counts); err != nil {
			t.Fatal(err)
		}
		if err := s.SweepUsageKeeping(ctx, now, 4); err != nil {
			t.Fatal(err)
		}
		// A late flush of the same old minute, swept again: added.
		if err := s.WriteUsage(ctx, nil, counts[:1]); err != nil {
			t.Fatal(err)
		}
		if err := s.SweepUsageKeeping(ctx, now, 4); err != nil {
			t.Fatal(err)
		}
		ids := func(acct string) []string { return logIDs(t, s, acct) }
		if got := fmt.Sprint(ids("acc_1")); got != "[req_key_a_0000 req_key_a_0001 req_key_a_0002 req_key_a_0003]" {
			t.Errorf("acc_1 kept %s", got)
		}
		if got := fmt.Sprint(ids("acc_2")); got != "[req_key_b_0001]" {
			t.Errorf("acc_2 kept %s", got)
		}
		got, err := s.KeyUsage(ctx, "key_a", now.Add(-100*24*time.Hour), now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint([]store.UsageBucket{
			{Start: old, Class: requestlog.Class2xx, Count: 7},
			{Start: now.Add(-47 * time.Hour), Class: requestlog.Class2xx, Count: 4},
		})
		if fmt.Sprint(got) != want {
			t.Errorf("after the sweep %v, want %v", got, want)
		}
	})
}

// TestWriteUsageManyLogs: a batch of more logs than one packed row holds
// stores every log once; written again whole (a commit saved but not
// acknowledged, retried), each log is still read once, in order, page
// after page, though its second holds it twice.
func TestWriteUsageManyLogs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		var logs []requestlog.Log
		for i := range 700 {
			logs = append(logs, usageLog("acc_1", "key_a", i, t0.Add(time.Duration(i)*time.Millisecond), 200, "GET /v1/me"))
		}
		for round := range 2 {
			if err := s.WriteUsage(ctx, logs, nil); err != nil {
				t.Fatal(err)
			}
			got := allLogs(t, s, store.RequestLogQuery{AccountID: "acc_1", Limit: 100})
			if len(got) != len(logs) {
				t.Fatalf("round %d: %d logs read, want %d", round, len(got), len(logs))
			}
			for i, l := range got {
				if want := logs[len(logs)-1-i].ID; l.ID != want {
					t.Fatalf("round %d: log %d is %s, want %s", round, i, l.ID, want)
				}
			}
		}
	})
}

// A page reads batches a few dozen at a time: logs of one second spread
// over more batches than one read (40 keys), pages of 7 under a filter
// that matches one log in five, all come newest first, each once.
func TestRequestLogPageAcrossBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		logs := requestLogPageAcrossBatchesSeed(t, s, t0)
		for _, q := range []store.RequestLogQuery{{}, {Status: 500}, {KeyID: "key_07"}, {Class: requestlog.Class4xx, KeyID: "key_02"}} {
			requestLogPageAcrossBatchesCheck(t, s, logs, q)
		}
	})
}

// requestLogPageAcrossBatchesSeed writes 600 logs of 40 keys over three
// seconds, in two flushes, and returns them.
func requestLogPageAcrossBatchesSeed(t *testing.T, s *store.Store, t0 time.Time) []requestlog.Log {
	t.Helper()
	ctx := context.Background()
	var logs []requestlog.Log
	for i := range 600 {
		// 40 keys, 3 seconds; each second's logs are written in two flushes.
		logs = append(logs, usageLog("acc_1", fmt.Sprintf("key_%02d", i%40), i, t0.Add(time.Duration(i%3)*time.Second+time.Duration(i%997)*time.Millisecond),
			[]int{200, 200, 404, 200, 500}[i%5], "GET /v1/me"))
	}
	if err := s.WriteUsage(ctx, logs[:300], nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteUsage(ctx, logs[300:], nil); err != nil {
		t.Fatal(err)
	}
	return logs
}

// requestLogPageAcrossBatchesWant is the logs q's status, key and class
// match, newest first.
func requestLogPageAcrossBatchesWant(logs []requestlog.Log, q store.RequestLogQuery) []requestlog.Log {
	var want []requestlog.Log
	for _, l := range logs {
		if (q.Status == 0 || l.Status == q.Status) && (q.KeyID == "" || l.KeyID == q.KeyID) && (q.Class == "" || requestlog.ClassOf(l.Status) == q.Class) {
			want = append(want, l)
		}
	}
	slices.SortFunc(want, func(a, b requestlog.Log) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(b.ID, a.ID))
	})
	return want
}

// requestLogPageAcrossBatchesCheck reads q for acc_1 seven a page and
// checks it gives exactly the logs it matches, newest first.
func requestLogPageAcrossBatchesCheck(t *testing.T, s *store.Store, logs []requestlog.Log, q store.RequestLogQuery) {
	t.Helper()
	want := requestLogPageAcrossBatchesWant(logs, q)
	q.AccountID, q.Limit = "acc_1", 7
	got := allLogs(t, s, q)
	if len(got) != len(want) {
		t.Fatalf("%+v: %d logs, want %d", q, len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].At.Equal(want[i].At) || got[i].KeyID != want[i].KeyID {
			t.Fatalf("%+v: log %d is %s, want %s", q, i, got[i].ID, want[i].ID)
		}
	}
}

// The sweep's bounds fall within seconds: the cut-off 7 days back at
// 12:00:00.500 and the cap, both in a second whose logs are of two keys
// in several batches. Exactly the logs the rules keep are kept.
func TestSweepUsageWithinASecond(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 0, 0, 500_000_000, time.UTC)
		cut := now.Add(-store.LogRetention)
		logs := sweepUsageWithinASecondLogs(now, cut)
		for i := range logs {
			if err := s.WriteUsage(ctx, logs[i:i+1], nil); err != nil { // a batch each
				t.Fatal(err)
			}
		}
		if err := s.SweepUsageKeeping(ctx, now, 15); err != nil {
			t.Fatal(err)
		}
		want1, want2 := sweepUsageWithinASecondWant(logs, now, cut)
		if got := sweepUsageWithinASecondKept(t, s, "acc_1"); !slices.Equal(got, want1) {
			t.Errorf("acc_1 kept %v, want %v", got, want1)
		}
		if got := sweepUsageWithinASecondKept(t, s, "acc_2"); !slices.Equal(got, want2) || len(want2) != 15 {
			t.Errorf("acc_2 kept %v, want %v", got, want2)
		}
	})
}

// sweepUsageWithinASecondLogs is acc_1's twenty logs about the cut-off and
// acc_2's thirty over three seconds before now.
func sweepUsageWithinASecondLogs(now, cut time.Time) []requestlog.Log {
	var logs []requestlog.Log
	for i := range 20 {
		// acc_1: ten logs either side of the cut-off, in one second.
		logs = append(logs, usageLog("acc_1", []string{"key_a", "key_b"}[i%2], i, cut.Add(time.Duration(i-10)*10*time.Millisecond), 200, "GET /v1/me"))
	}
	for i := range 30 {
		// acc_2: three seconds of ten logs; the cap of 15 falls in the middle one.
		logs = append(logs, usageLog("acc_2", []string{"key_c", "key_d"}[i%2], i, now.Add(-time.Duration(i/10)*time.Second+time.Duration(i%10)*time.Millisecond), 404, "GET /v1/me"))
	}
	return logs
}

// sweepUsageWithinASecondKept is the ids of the account's logs the sweep
// kept, sorted.
func sweepUsageWithinASecondKept(t *testing.T, s *store.Store, acct string) (ids []string) {
	t.Helper()
	ids = logIDs(t, s, acct)
	slices.Sort(ids)
	return ids
}

// sweepUsageWithinASecondWant is the ids, sorted, the rules keep of acc_1
// and of acc_2.
func sweepUsageWithinASecondWant(logs []requestlog.Log, now, cut time.Time) (want1, want2 []string) {
	for _, l := range logs {
		switch {
		case l.AccountID == "acc_1" && !l.At.Before(cut):
			want1 = append(want1, l.ID)
		case l.AccountID == "acc_2" && l.At.After(now.Add(-time.Second+5*time.Millisecond)),
			l.KeyID == "key_c" && l.At.Equal(now.Add(-time.Second+4*time.Millisecond)):
			// A fair share each (15 between two keys of 15 logs: key_c,
			// first by id, keeps one more): the newest second's 10 and
			// of the middle one's, key_c's 3 latest and key_d's 2.
			want2 = append(want2, l.ID)
		}
	}
	slices.Sort(want1)
	slices.Sort(want2)
	return want1, want2
}

// TestSweepKeepsOtherKeysLogs: one key flooding its account's logs (429s,
// the newest of them all) beyond the cap pushes out its own logs at the
// sweep, never another key's; the keys holding the most lose first, down to
// one level, and the account keeps exactly its cap.
func TestSweepKeepsOtherKeysLogs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		logs := sweepKeepsOtherKeysLogsSeed(now)
		if err := s.WriteUsage(ctx, logs, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SweepUsageKeeping(ctx, now, 100); err != nil {
			t.Fatal(err)
		}
		perKey := sweepKeepsOtherKeysLogsPerKey(t, s)
		// 10 + 40 + 50: key_flood keeps its 50 newest, the others all theirs.
		if want := map[string]int{"key_quiet": 10, "key_mid": 40, "key_flood": 50}; fmt.Sprint(perKey) != fmt.Sprint(want) {
			t.Fatalf("kept %v, want %v", perKey, want)
		}
		flood := allLogs(t, s, store.RequestLogQuery{AccountID: "acc_1", KeyID: "key_flood", Limit: 50})
		if flood[len(flood)-1].ID != "req_key_flood_0450" {
			t.Errorf("key_flood's oldest kept log is %s, want its 50th newest", flood[len(flood)-1].ID)
		}
		// Below one level: two keys over it are cut to it, the quiet one kept.
		if err := s.SweepUsageKeeping(ctx, now, 50); err != nil {
			t.Fatal(err)
		}
		perKey = sweepKeepsOtherKeysLogsPerKey(t, s)
		if want := map[string]int{"key_quiet": 10, "key_mid": 20, "key_flood": 20}; fmt.Sprint(perKey) != fmt.Sprint(want) {
			t.Fatalf("kept %v, want %v", perKey, want)
		}
	})
}

// sweepKeepsOtherKeysLogsSeed is acc_1's logs: key_quiet's 10 an hour
// before now, key_mid's 40 half an hour before, key_flood's 500 429s in
// the last minute.
func sweepKeepsOtherKeysLogsSeed(now time.Time) []requestlog.Log {
	var logs []requestlog.Log
	for i := range 10 {
		logs = append(logs, usageLog("acc_1", "key_quiet", i, now.Add(-time.Hour+time.Duration(i)*time.Second), 200, "GET /v1/me"))
	}
	for i := range 40 {
		logs = append(logs, usageLog("acc_1", "key_mid", i, now.Add(-30*time.Minute+time.Duration(i)*time.Second), 200, "GET /v1/me"))
	}
	for i := range 500 {
		logs = append(logs, usageLog("acc_1", "key_flood", i, now.Add(-time.Minute+time.Duration(i)*time.Millisecond), 429, "GET /v1/me"))
	}
	return logs
}

// sweepKeepsOtherKeysLogsPerKey counts acc_1's kept logs by key.
func sweepKeepsOtherKeysLogsPerKey(t *testing.T, s *store.Store) map[string]int {
	t.Helper()
	perKey := map[string]int{}
	for _, l := range allLogs(t, s, store.RequestLogQuery{AccountID: "acc_1", Limit: 50}) {
		perKey[l.KeyID]++
	}
	return perKey
}
