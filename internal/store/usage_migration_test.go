package store_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestRequestLogMigrations opens a database as migration 0009 left it
// (request_logs with its five indexes, holding logs; 0010, 0011 and 0012
// not recorded) and checks what migrations 0010 to 0012 make of it: the
// rows packed into request_log_batches, read a few at a time so that the
// logs of one second span two reads, request_logs gone, every log kept and
// found by each filter, the search and the pages; each migration recorded
// once.
func TestRequestLogMigrations(t *testing.T) {
	ddl, err := os.ReadFile("migrations/0009_usage.sql")
	if err != nil {
		t.Fatal(err)
	}
	logsDDL := string(ddl[:strings.Index(string(ddl), "CREATE TABLE usage_minute")])
	defer store.SetLogMigrationChunk(4)()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			requestLogMigrationsOnEngine(t, e, logsDDL)
		})
	}
}

// requestLogMigrationsOnEngine is TestRequestLogMigrations on engine e:
// a database as 0009 left it, with logs, reopened and read back.
func requestLogMigrationsOnEngine(t *testing.T, e, logsDDL string) {
	t.Helper()
	ctx := context.Background()
	s1, dsn := requestLogMigrationsOpen0009(t, e, logsDDL)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	logs := requestLogMigrationsLogs(t0)
	requestLogMigrationsInsert(t, s1, logs)
	s2 := reopen(t, s1, dsn, 3)
	requestLogMigrationsCheckTableGone(t, s2, e)

	// Written before, read after: pages, filters, the search, and
	// a log written twice (a batch whose commit was saved but not
	// acknowledged, written again) found once.
	if err := s2.WriteUsage(ctx, logs[:5], nil); err != nil {
		t.Fatalf("a retried batch: %v", err)
	}
	requestLogMigrationsCheckFilters(t, s2, logs, t0)
}

// requestLogMigrationsOpen0009 opens a store on engine e and takes it back
// to what migration 0009 left: request_logs instead of request_log_batches,
// 0010 to 0012 not recorded. It returns the store and its dsn.
func requestLogMigrationsOpen0009(t *testing.T, e, logsDDL string) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "logs.db")
	if e == store.EnginePostgres {
		dsn = storetest.PostgresURL(t)
	}
	s1, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Writer().ExecContext(ctx, `DROP TABLE request_log_batches`); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Writer().ExecContext(ctx, logsDDL); err != nil {
		t.Fatalf("0009's request_logs: %v", err)
	}
	if _, err := s1.Writer().ExecContext(ctx, `DELETE FROM schema_migrations WHERE version IN
				('0010_cluster_request_logs.go', '0011_key_request_logs_by_time.go', '0012_batch_request_logs.go')`); err != nil {
		t.Fatal(err)
	}
	return s1, dsn
}

// requestLogMigrationsLogs is 30 logs of acc_1 from t0 and one of acc_2.
func requestLogMigrationsLogs(t0 time.Time) []requestlog.Log {
	var logs []requestlog.Log
	for i := range 30 {
		// Three logs a second, of three keys.
		logs = append(logs, usageLog("acc_1", []string{"key_a", "key_b", "key_c"}[i%3], i, t0.Add(time.Duration(i)*333*time.Millisecond),
			[]int{200, 404, 500, 429, 201}[i%5], []string{"GET /v1/me", "POST /v1/ai-agents"}[i%2]))
	}
	logs = append(logs, usageLog("acc_2", "key_d", 0, t0, 200, "GET /v1/me"))
	return logs
}

// requestLogMigrationsInsert writes the logs into 0009's request_logs.
func requestLogMigrationsInsert(t *testing.T, s1 *store.Store, logs []requestlog.Log) {
	t.Helper()
	for _, l := range logs {
		if _, err := s1.Writer().ExecContext(context.Background(), `INSERT INTO request_logs (id, account_id, key_id, at, method, route, path, status, class, error_code, duration_us, client)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, l.ID, l.AccountID, l.KeyID, l.At.UnixMilli(), l.Method, l.Route, l.Path,
			l.Status, requestlog.ClassOf(l.Status), l.ErrorCode, l.Duration.Microseconds(), l.Client); err != nil {
			t.Fatalf("a log in 0009's table: %v", err)
		}
	}
}

// requestLogMigrationsCheckTableGone checks the migrations dropped
// request_logs.
func requestLogMigrationsCheckTableGone(t *testing.T, s2 *store.Store, e string) {
	t.Helper()
	var tables int
	q := `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'request_logs'`
	if e == store.EngineSQLite {
		q = `SELECT COUNT(*) FROM sqlite_master WHERE name = 'request_logs'`
	}
	if err := s2.Writer().QueryRowContext(context.Background(), q).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("request_logs still there (%d, %v)", tables, err)
	}
}

// requestLogMigrationsRead is the ids q finds for acc_1, seven a page, over
// at most ten pages.
func requestLogMigrationsRead(t *testing.T, s2 *store.Store, q store.RequestLogQuery) (ids []string) {
	t.Helper()
	q.AccountID, q.Limit = "acc_1", 7
	for range 10 {
		page, next, err := s2.RequestLogPage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page {
			ids = append(ids, l.ID)
		}
		if next.IsZero() {
			return ids
		}
		q.After = next
	}
	t.Fatal("no last page")
	return nil
}

// requestLogMigrationsExpect checks q finds, newest first, exactly the
// logs of acc_1 that keep keeps.
func requestLogMigrationsExpect(t *testing.T, s2 *store.Store, logs []requestlog.Log, q store.RequestLogQuery, keep func(requestlog.Log) bool) {
	t.Helper()
	var want []string
	for i := 29; i >= 0; i-- {
		if keep(logs[i]) {
			want = append(want, logs[i].ID)
		}
	}
	if got := requestLogMigrationsRead(t, s2, q); !slices.Equal(got, want) {
		t.Errorf("%+v: %v, want %v", q, got, want)
	}
}

// requestLogMigrationsCheckFilters checks every filter and the search find
// what they should, and another account's request nothing.
func requestLogMigrationsCheckFilters(t *testing.T, s2 *store.Store, logs []requestlog.Log, t0 time.Time) {
	t.Helper()
	expect := func(q store.RequestLogQuery, keep func(requestlog.Log) bool) {
		t.Helper()
		requestLogMigrationsExpect(t, s2, logs, q, keep)
	}
	expect(store.RequestLogQuery{}, func(requestlog.Log) bool { return true })
	expect(store.RequestLogQuery{KeyID: "key_b"}, func(l requestlog.Log) bool { return l.KeyID == "key_b" })
	expect(store.RequestLogQuery{Status: 500}, func(l requestlog.Log) bool { return l.Status == 500 })
	expect(store.RequestLogQuery{Class: requestlog.Class2xx, KeyID: "key_a"}, func(l requestlog.Log) bool { return l.Status < 300 && l.KeyID == "key_a" })
	expect(store.RequestLogQuery{Route: "POST /v1/ai-agents"}, func(l requestlog.Log) bool { return l.Route == "POST /v1/ai-agents" })
	expect(store.RequestLogQuery{From: t0.Add(3 * time.Second), To: t0.Add(7 * time.Second)},
		func(l requestlog.Log) bool {
			return !l.At.Before(t0.Add(3*time.Second)) && l.At.Before(t0.Add(7*time.Second))
		})
	expect(store.RequestLogQuery{RequestID: logs[17].ID}, func(l requestlog.Log) bool { return l.ID == logs[17].ID })
	if got := requestLogMigrationsRead(t, s2, store.RequestLogQuery{RequestID: logs[30].ID}); len(got) != 0 {
		t.Errorf("another account's request found: %v", got)
	}
}
