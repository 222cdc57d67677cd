package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/agentapi/agentapi/internal/domain"
)

// --- questions and conversations ---

const (
	statusAnswered = "answered"
	statusFailed   = "failed"
)

// ConversationTurns returns the conversation's answered turns, oldest first;
// ErrNotFound unless the conversation belongs to that agent and account.
func (s *Store) ConversationTurns(ctx context.Context, accountID, agentID, conversationID string) ([]domain.Question, error) {
	if !storable(accountID, agentID, conversationID) {
		return nil, domain.ErrNotFound
	}
	// One statement, so existence and turns come from one snapshot: a
	// conversation without answered turns yields one row of NULLs.
	rows, err := s.r.QueryContext(ctx, `SELECT q.id, q.question, q.answer, q.answer_ms, q.created_at
		FROM conversations c
		LEFT JOIN questions q ON q.conversation_id = c.id AND q.status = 'answered'
		WHERE c.id = $1 AND c.agent_id = $2 AND c.account_id = $3
		ORDER BY q.created_at, q.id`, conversationID, agentID, accountID)
	turns, err := collect("conversation turns", rows, err, func(r *sql.Rows) (domain.Question, error) {
		var (
			id, question, answer sql.NullString
			answerMS, created    sql.NullInt64
		)
		err := r.Scan(&id, &question, &answer, &answerMS, &created)
		return domain.Question{
			ID: id.String, AccountID: accountID, AgentID: agentID, ConversationID: conversationID,
			Question: question.String, Answer: answer.String, AnswerMS: answerMS.Int64, CreatedAt: fromMS(created.Int64),
		}, err
	})
	if err != nil {
		return nil, err
	}
	if len(turns) == 0 {
		return nil, domain.ErrNotFound
	}
	// The row of NULLs, when there is one, is the only row.
	return slices.DeleteFunc(turns, func(q domain.Question) bool { return q.ID == "" }), nil
}

// RecordQuestion stores one asked question. When newConversation is true the
// conversation row (q.ConversationID) is created in the same transaction,
// whether or not the question failed; a question stored without a
// conversation has an empty ConversationID (the questions package decides
// which failed first questions start one). failed questions keep an empty
// answer and count in failed_total.
func (s *Store) RecordQuestion(ctx context.Context, q domain.Question, newConversation, failed bool) error {
	status, answer, convID := statusAnswered, q.Answer, q.ConversationID
	if failed {
		status, answer = statusFailed, ""
	}
	return s.inTx(ctx, func(tx *Tx) error {
		if newConversation && convID != "" {
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO conversations (id, account_id, agent_id, created_at) VALUES ($1, $2, $3, $4)`,
				convID, q.AccountID, q.AgentID, toMS(q.CreatedAt)); err != nil {
				if isUnique(err) {
					return &domain.DuplicateError{ExistingID: convID}
				}
				return fmt.Errorf("insert conversation: %w", err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO questions
			(id, account_id, agent_id, conversation_id, question, answer, status, answer_ms, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			q.ID, q.AccountID, q.AgentID, nullString(convID), q.Question, answer, status, q.AnswerMS, toMS(q.CreatedAt))
		if isUnique(err) {
			return &domain.DuplicateError{ExistingID: q.ID}
		}
		if err != nil {
			return fmt.Errorf("insert question: %w", err)
		}
		return nil
	})
}

// AgentStats aggregates the agent's questions exactly.
func (s *Store) AgentStats(ctx context.Context, accountID, agentID string) (domain.AgentStats, error) {
	if !storable(accountID, agentID) {
		return domain.AgentStats{AgentID: agentID}, nil
	}
	// One statement: one snapshot for every counter.
	var (
		st                   = domain.AgentStats{AgentID: agentID}
		last                 sql.NullInt64
		answeredMS, answered int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT
			count(*),
			COALESCE(sum(CASE WHEN status = 'answered' THEN 1 ELSE 0 END), 0),
			COALESCE(sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0),
			max(created_at),
			CAST(COALESCE(sum(CASE WHEN status = 'answered' THEN answer_ms ELSE 0 END), 0) AS BIGINT),
			(SELECT count(*) FROM conversations WHERE agent_id = $2 AND account_id = $1)
		FROM questions WHERE agent_id = $2 AND account_id = $1`, accountID, agentID,
	).Scan(&st.QuestionsTotal, &answered, &st.FailedTotal, &last, &answeredMS, &st.ConversationsTotal)
	if err != nil {
		return domain.AgentStats{}, fmt.Errorf("agent stats: %w", err)
	}
	st.AnsweredTotal = answered
	st.LastQuestionAt = fromNullMS(last)
	if answered > 0 {
		// Rounded half up, in integers: answer_ms is never negative.
		avg := (2*answeredMS + answered) / (2 * answered)
		st.AverageAnswerMS = &avg
	}
	return st, nil
}

// RecentQuestions returns the agent's newest answered questions first. A
// limit of 0 or less returns them all.
func (s *Store) RecentQuestions(ctx context.Context, accountID, agentID string, limit int) ([]domain.Question, error) {
	if !storable(accountID, agentID) {
		return nil, nil
	}
	query := `SELECT id, account_id, agent_id, conversation_id, question, answer, answer_ms, created_at
		FROM questions WHERE agent_id = $1 AND account_id = $2 AND status = 'answered'
		ORDER BY created_at DESC, id DESC`
	args := []any{agentID, accountID}
	if limit > 0 {
		query += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	return collect("recent questions", rows, err, func(r *sql.Rows) (domain.Question, error) {
		var q domain.Question
		var conv sql.NullString
		var created int64
		err := r.Scan(&q.ID, &q.AccountID, &q.AgentID, &conv, &q.Question, &q.Answer, &q.AnswerMS, &created)
		q.ConversationID, q.CreatedAt = conv.String, fromMS(created)
		return q, err
	})
}
