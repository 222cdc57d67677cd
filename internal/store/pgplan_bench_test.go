package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// backendCPU sums the CPU time (user and system, in clock ticks of 10 ms
// on Linux) that PostgreSQL's backends connected to datname have used,
// read from /proc: the database's own cost, whatever else loads the
// machine.
func backendCPU(tb testing.TB, admin *sql.DB, datname string) int64 {
	tb.Helper()
	rows, err := admin.Query(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, datname)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			tb.Skipf("PostgreSQL is not on this machine: %v", err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += utime + stime
	}
	return total
}

// BenchmarkListAgentPagePostgresCPU: the page GET /ai-agents reads (31 of
// 3,000 agents, after a cursor), reporting PostgreSQL's CPU per page
// (pg-µs/op, from its backends' /proc counters): wall time on a shared
// machine says little. Sub-benchmarks: PostgreSQL's default
// plan_cache_mode (auto) and force_generic_plan. In psql, EXECUTE of this
// statement stays on custom plans (planning 0.07–0.15 ms, more than the
// 0.03–0.08 ms execution on 4 shared buffers); through pgx's prepared
// statement both modes measured the same (about 40–48 pg-µs/op), so
// planning is not where the page's time goes.
func BenchmarkListAgentPagePostgresCPU(b *testing.B) {
	for _, mode := range []string{"auto", "force_generic_plan"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			s, admin, datname := listAgentPagePostgresCPUOpen(b, mode)
			q := listAgentPagePostgresCPUSeed(b, s)
			before := backendCPU(b, admin, datname)
			b.ReportAllocs()
			for b.Loop() {
				if l, err := s.ListAgentItems(ctx, q); err != nil || len(l) != 31 {
					b.Fatal(len(l), err)
				}
			}
			ticks := backendCPU(b, admin, datname) - before
			b.ReportMetric(float64(ticks)*10_000/float64(b.N), "pg-µs/op")
		})
	}
}

// listAgentPagePostgresCPUOpen opens a store and an admin connection on
// PostgreSQL with plan_cache_mode set to mode, both closed at the
// benchmark's end; it returns them and the database's name.
func listAgentPagePostgresCPUOpen(b *testing.B, mode string) (*store.Store, *sql.DB, string) {
	b.Helper()
	dsn := storetest.PostgresURL(b)
	u, _ := url.Parse(dsn)
	datname := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(dsn, "?") {
		dsn += "&plan_cache_mode=" + mode
	} else {
		dsn += "?plan_cache_mode=" + mode
	}
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close() })
	return s, admin, datname
}

// listAgentPagePostgresCPUSeed imports 3,000 agents of a new account and
// returns the query for the 31 after the middle one, already run ten times
// so that the statement is prepared.
func listAgentPagePostgresCPUSeed(b *testing.B, s *store.Store) store.AgentQuery {
	b.Helper()
	ctx := context.Background()
	acct := storetest.Account(b, s)
	agents := make([]domain.Agent, 3000)
	for i := range agents {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		agents[i] = domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: acct.ID,
			Name: fmt.Sprintf("agent %07d", i), Instructions: "be kind", Enabled: true, CreatedAt: at, UpdatedAt: at}
	}
	if err := s.ImportAgents(ctx, agents); err != nil {
		b.Fatal(err)
	}
	mid := agents[len(agents)/2]
	q := store.AgentQuery{AccountID: acct.ID, AfterCreatedAt: mid.CreatedAt, AfterID: mid.ID, Limit: 31}
	for range 10 { // prepared, past PostgreSQL's five custom plans
		if _, err := s.ListAgentItems(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return q
}
