package store_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestClusterRequestLogsMigration opens a database as migration 0009 left
// it (request_logs with its five indexes, holding logs, 0010 and 0011 not
// recorded) and checks what migrations 0010 and 0011 make of it: every log
// kept and found by each filter, the search and the pages; on SQLite a
// table in (account_id, at, id) order with no index beside it, on
// PostgreSQL a primary key on (account_id, at, id) and the key's index;
// each migration recorded once.
func TestClusterRequestLogsMigration(t *testing.T) {
	ctx := context.Background()
	ddl, err := os.ReadFile("migrations/0009_usage.sql")
	if err != nil {
		t.Fatal(err)
	}
	logsDDL := string(ddl[:strings.Index(string(ddl), "CREATE TABLE usage_minute")])
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "logs.db")
			if e == store.EnginePostgres {
				dsn = storetest.PostgresURL(t)
			}
			s1, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s1.Writer().ExecContext(ctx, `DROP TABLE request_logs`); err != nil {
				t.Fatal(err)
			}
			if _, err := s1.Writer().ExecContext(ctx, logsDDL); err != nil {
				t.Fatalf("0009's request_logs: %v", err)
			}
			if _, err := s1.Writer().ExecContext(ctx,
				`DELETE FROM schema_migrations WHERE version IN ('0010_cluster_request_logs.go', '0011_key_request_logs_by_time.go')`); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			var logs []store.RequestLog
			for i := range 30 {
				logs = append(logs, usageLog("acc_1", []string{"key_a", "key_b", "key_c"}[i%3], i, t0.Add(time.Duration(i)*time.Second),
					[]int{200, 404, 500, 429, 201}[i%5], []string{"GET /v1/me", "POST /v1/ai-agents"}[i%2]))
			}
			logs = append(logs, usageLog("acc_2", "key_d", 0, t0, 200, "GET /v1/me"))
			if err := s1.WriteUsage(ctx, logs, nil); err != nil {
				t.Fatalf("write to 0009's table: %v", err)
			}
			s2 := reopen(t, s1, dsn, 2)
			want := []string{"request_logs_key", "request_logs_pkey"}
			q := `SELECT indexname FROM pg_indexes WHERE tablename = 'request_logs' ORDER BY indexname`
			if e == store.EnginePostgres {
				var pkey string
				if err := s2.Writer().QueryRowContext(ctx,
					`SELECT indexdef FROM pg_indexes WHERE indexname = 'request_logs_pkey'`).Scan(&pkey); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(pkey, "(account_id, at, id)") {
					t.Errorf("primary key: %s", pkey)
				}
			}
			if e == store.EngineSQLite {
				want = nil
				q = `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'request_logs' AND sql IS NOT NULL ORDER BY name`
				var table string
				if err := s2.Writer().QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'request_logs'`).Scan(&table); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(table, "PRIMARY KEY (account_id, at, id)") || !strings.HasSuffix(table, "WITHOUT ROWID") {
					t.Errorf("request_logs is %s", table)
				}
			}
			rows, err := s2.Writer().QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				got = append(got, name)
			}
			rows.Close()
			if !slices.Equal(got, want) {
				t.Errorf("indexes %v, want %v", got, want)
			}

			// Written before, read after: pages, filters, the search, and
			// a retried log still skipped.
			if err := s2.WriteUsage(ctx, logs[:5], nil); err != nil {
				t.Fatalf("a retried batch: %v", err)
			}
			read := func(q store.RequestLogQuery) (ids []string) {
				t.Helper()
				q.AccountID, q.Limit = "acc_1", 7
				for range 10 {
					page, next, err := s2.RequestLogPage(ctx, q)
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
			expect := func(q store.RequestLogQuery, keep func(store.RequestLog) bool) {
				t.Helper()
				var want []string
				for i := 29; i >= 0; i-- {
					if keep(logs[i]) {
						want = append(want, logs[i].ID)
					}
				}
				if got := read(q); !slices.Equal(got, want) {
					t.Errorf("%+v: %v, want %v", q, got, want)
				}
			}
			expect(store.RequestLogQuery{}, func(store.RequestLog) bool { return true })
			expect(store.RequestLogQuery{KeyID: "key_b"}, func(l store.RequestLog) bool { return l.KeyID == "key_b" })
			expect(store.RequestLogQuery{Status: 500}, func(l store.RequestLog) bool { return l.Status == 500 })
			expect(store.RequestLogQuery{Class: store.Class2xx, KeyID: "key_a"}, func(l store.RequestLog) bool { return l.Status < 300 && l.KeyID == "key_a" })
			expect(store.RequestLogQuery{Route: "POST /v1/ai-agents"}, func(l store.RequestLog) bool { return l.Route == "POST /v1/ai-agents" })
			expect(store.RequestLogQuery{From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)},
				func(l store.RequestLog) bool {
					return !l.At.Before(t0.Add(10*time.Second)) && l.At.Before(t0.Add(20*time.Second))
				})
			expect(store.RequestLogQuery{RequestID: logs[17].ID}, func(l store.RequestLog) bool { return l.ID == logs[17].ID })
			if got := read(store.RequestLogQuery{RequestID: logs[30].ID}); len(got) != 0 {
				t.Errorf("another account's request found: %v", got)
			}
		})
	}
}
