package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// AgentPageItem is an agent as the console's agents page lists it: the
// agent and its question counters.
type AgentPageItem struct {
	ID, Name             string
	Enabled              bool
	CreatedAt, UpdatedAt time.Time
	Stats                domain.AgentStats
}

// AgentPageQuery selects a page of an account's agents, oldest first (the
// API's order).
type AgentPageQuery struct {
	AccountID string
	// Search keeps agents whose name contains it.
	Search string
	After  Cursor
	Limit  int
}

// AgentPage returns up to q.Limit agents with their counters and the next
// page's cursor. It is one statement, whatever the page holds: the page is
// a keyset range of agents_page, and the counters of just its agents are
// aggregated beside it (questions_agent, conversations_agent), so the
// counters are one snapshot and a page costs its agents' questions, not
// one round trip per agent.
func (s *Store) AgentPage(ctx context.Context, q AgentPageQuery) ([]AgentPageItem, Cursor, error) {
	if !storable(q.AccountID, q.Search) || q.Limit <= 0 {
		return nil, Cursor{}, nil
	}
	b := agentPageSQL(q)
	return page(ctx, s, "agent", b, q.Limit, q.After, scanAgentPageItem,
		func(it AgentPageItem) Cursor { return Cursor{CreatedAt: it.CreatedAt, ID: it.ID} })
}

// agentPageSQL is AgentPage's statement; it asks for q.Limit+1 agents.
func agentPageSQL(q AgentPageQuery) *builder {
	var b builder
	acct := b.arg(q.AccountID)
	b.add(`WITH pg AS (SELECT id, name, enabled, created_at, updated_at FROM agents WHERE account_id = ` + acct)
	if q.Search != "" {
		b.add(` AND lower(name) LIKE ` + b.arg(likeContains(q.Search)) + ` ESCAPE '\'`)
	}
	b.keyset("", q.After, false, q.Limit)
	b.add(`)
		SELECT pg.id, pg.name, pg.enabled, pg.created_at, pg.updated_at,
			COALESCE(qs.total, 0), COALESCE(qs.answered, 0), COALESCE(qs.failed, 0), qs.last,
			COALESCE(qs.answered_ms, 0), COALESCE(cs.total, 0)
		FROM pg
		LEFT JOIN (SELECT agent_id, count(*) AS total,
				sum(CASE WHEN status = 'answered' THEN 1 ELSE 0 END) AS answered,
				sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed,
				max(created_at) AS last,
				CAST(sum(CASE WHEN status = 'answered' THEN answer_ms ELSE 0 END) AS BIGINT) AS answered_ms
			FROM questions WHERE account_id = ` + acct + ` AND agent_id IN (SELECT id FROM pg) GROUP BY agent_id) qs
			ON qs.agent_id = pg.id
		LEFT JOIN (SELECT agent_id, count(*) AS total FROM conversations
			WHERE account_id = ` + acct + ` AND agent_id IN (SELECT id FROM pg) GROUP BY agent_id) cs
			ON cs.agent_id = pg.id
		` + order("pg.", q.After.Back))
	return &b
}

func scanAgentPageItem(rows *sql.Rows) (AgentPageItem, error) {
	var (
		it                   AgentPageItem
		created, updated     int64
		last                 sql.NullInt64
		answeredMS, answered int64
	)
	st := &it.Stats
	if err := rows.Scan(&it.ID, &it.Name, &it.Enabled, &created, &updated,
		&st.QuestionsTotal, &answered, &st.FailedTotal, &last, &answeredMS, &st.ConversationsTotal); err != nil {
		return it, err
	}
	it.CreatedAt, it.UpdatedAt = fromMS(created), fromMS(updated)
	st.AgentID, st.AnsweredTotal, st.LastQuestionAt = it.ID, answered, fromNullMS(last)
	if answered > 0 {
		// Rounded half up, in integers, as AgentStats does.
		avg := (2*answeredMS + answered) / (2 * answered)
		st.AverageAnswerMS = &avg
	}
	return it, nil
}
