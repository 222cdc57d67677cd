package store

import "database/sql"

// AgentPageSQL exposes AgentPage's one statement to its test.
func AgentPageSQL(q AgentPageQuery) (string, []any) {
	b := agentPageSQL(q)
	return b.b.String(), b.args
}

// DB is the store's reader pool, for a test to run a statement alone.
func (s *Store) DB() *sql.DB { return s.r }
