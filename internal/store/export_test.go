package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
)

// ListAgentsSQL exposes ListAgents' statement to the plan tests.
func ListAgentsSQL(q AgentQuery) (string, []any) { return listAgentsSQL(agentColumns, q) }

// ListAgentItemsSQL exposes ListAgentItems' statement to the plan tests.
func ListAgentItemsSQL(q AgentQuery) (string, []any) { return listAgentsSQL(agentItemColumns, q) }

// KeyByPrefixSQL is the authentication hot path's statement.
const KeyByPrefixSQL = keyByPrefixSQL

// Explain returns the engine's plan of query, one line per step. On
// PostgreSQL sequential scans are discouraged for the statement, so that a
// tiny test table still shows which index the planner can use.
func (s *Store) Explain(ctx context.Context, query string, args ...any) (string, error) {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	prefix := "EXPLAIN QUERY PLAN "
	if s.engine == EnginePostgres {
		prefix = "EXPLAIN "
		if _, err := conn.ExecContext(ctx, "SET enable_seqscan = off"); err != nil {
			return "", err
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "RESET enable_seqscan")
	}
	rows, err := conn.QueryContext(ctx, prefix+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		lines = append(lines, fmt.Sprint(vals[len(vals)-1]))
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// Writer is the pool every transaction runs on.
func (s *Store) Writer() *sql.DB { return s.w }

// ReadPoolStats reports the read pool's counters.
func (s *Store) ReadPoolStats() sql.DBStats { return s.r.Stats() }

// SessionRowExists reports whether a console_sessions row with that token
// hash is stored, whatever its expiry and its user's state: what a test needs
// to see that a row was deleted rather than merely refused. Production reads
// sessions only through SessionUser.
func (s *Store) SessionRowExists(ctx context.Context, tokenHash []byte) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM console_sessions WHERE token_hash = $1`, tokenHash).Scan(&n)
	return n > 0, err
}

// ListAgents is ListAgentItems reading whole agents, for tests that check
// what is stored.
func (s *Store) ListAgents(ctx context.Context, q AgentQuery) ([]domain.Agent, error) {
	query, args := listAgentsSQL(agentColumns, q)
	rows, err := s.queryRead(ctx, query, args...)
	return collect("list agents", rows, err, func(r *sql.Rows) (domain.Agent, error) { return scanAgent(r) })
}

// AnomalyState is how many 10-minute buckets and networks the store keeps
// for a key (anomalies.go).
func (s *Store) AnomalyState(ctx context.Context, keyID string) (buckets, networks int, err error) {
	if err = s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM key_buckets WHERE key_id = $1`, keyID).Scan(&buckets); err != nil {
		return
	}
	err = s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM key_networks WHERE key_id = $1`, keyID).Scan(&networks)
	return
}
