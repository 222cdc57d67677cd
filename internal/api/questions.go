package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm"
)

type statsObject struct {
	AgentID            string  `json:"agent_id"`
	QuestionsTotal     int64   `json:"questions_total"`
	AnsweredTotal      int64   `json:"answered_total"`
	FailedTotal        int64   `json:"failed_total"`
	LastQuestionAt     *string `json:"last_question_at"`
	AverageAnswerMS    *int64  `json:"average_answer_ms"`
	ConversationsTotal int64   `json:"conversations_total"`
}

func (s *Server) handleAgentStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ag, ok := s.pathAgent(w, r)
		if !ok {
			return
		}
		id := ag.ID
		st, err := s.store.AgentStats(r.Context(), ag.AccountID, id)
		if err != nil {
			writeError(w, r, s.log, fmt.Errorf("agent stats: %w", err))
			return
		}
		writeJSON(w, http.StatusOK, single{Data: statsObject{
			AgentID: id, QuestionsTotal: st.QuestionsTotal, AnsweredTotal: st.AnsweredTotal,
			FailedTotal: st.FailedTotal, LastQuestionAt: formatTimePtr(st.LastQuestionAt),
			AverageAnswerMS: st.AverageAnswerMS, ConversationsTotal: st.ConversationsTotal,
		}})
	})
}

type answerObject struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Question       string `json:"question"`
	Answer         string `json:"answer"`
	CreatedAt      string `json:"created_at"`
	AnswerMS       int64  `json:"answer_ms"`
}

// optionalString reads an optional string attribute; null counts as absent.
func (p *problems) optionalString(obj map[string]json.RawMessage, field string) (string, bool) {
	raw, present := obj[field]
	if !present || jsonKind(raw) == "null" {
		return "", false
	}
	return p.str(raw, field)
}

func (s *Server) handleAsk() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		ctx := r.Context()
		var p problems
		p.query(r)
		obj := p.object(w, r, "question", "conversation_id")
		question, _ := p.text(obj, "question", MaxQuestionLength, true)
		convID, continuing := p.optionalString(obj, "conversation_id")
		if err := p.err(); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		id := r.PathValue("agent_id")
		ag, err := s.store.GetAgent(ctx, a.key.AccountID, id)
		if err != nil {
			writeError(w, r, s.log, agentErr(err, id))
			return
		}
		acct, err := s.store.GetAccount(ctx, a.key.AccountID)
		if err != nil {
			writeError(w, r, s.log, fmt.Errorf("get account: %w", err))
			return
		}
		// Both refusals share the code; the message tells support which
		// switch to look at: the account's feature, or the service's model.
		if !acct.HasFeature(domain.FeatureAIAnswers) {
			writeError(w, r, s.log, domain.Errorf(domain.CodeFeatureNotEnabled,
				"Answering questions (the ai-answers feature) is not enabled for this account; contact support."))
			return
		}
		if s.llm == nil {
			writeError(w, r, s.log, domain.Errorf(domain.CodeFeatureNotEnabled,
				"Answering questions is enabled for this account, but this service has no model configured; contact support."))
			return
		}
		if !ag.Enabled {
			writeError(w, r, s.log, domain.Errorf(domain.CodeImmutableState,
				"This AI agent is disabled and cannot be asked; enable it first."))
			return
		}
		var turns []llm.Turn
		if continuing {
			earlier, err := s.store.ConversationTurns(ctx, a.key.AccountID, ag.ID, convID)
			if errors.Is(err, domain.ErrNotFound) {
				writeError(w, r, s.log, domain.Errorf(domain.CodeNotFound, "No conversation %q with this AI agent.", truncate(convID, 64)))
				return
			}
			if err != nil {
				writeError(w, r, s.log, fmt.Errorf("conversation turns: %w", err))
				return
			}
			for _, t := range earlier {
				turns = append(turns, llm.Turn{Question: t.Question, Answer: t.Answer})
			}
		}
		now := a.now.Truncate(time.Millisecond)
		q := domain.Question{
			ID: domain.NewID(domain.PrefixQuestion, now), AccountID: a.key.AccountID, AgentID: ag.ID,
			ConversationID: convID, Question: question, CreatedAt: now,
		}
		if !continuing {
			q.ConversationID = domain.NewID(domain.PrefixConvo, now)
		}
		// The model call is bound to the request: a caller who goes away
		// cancels it. The outcome is still recorded, so stats stay exact.
		start := time.Now()
		answer, askErr := s.llm.Complete(ctx, llm.Conversation(ag.Instructions, turns, question))
		q.AnswerMS = time.Since(start).Milliseconds()
		q.Answer = answer
		recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.store.RecordQuestion(recordCtx, q, !continuing, askErr != nil); err != nil {
			writeError(w, r, s.log, fmt.Errorf("record question: %w", err))
			return
		}
		if askErr != nil {
			writeError(w, r, s.log, fmt.Errorf("ask model: %w", askErr))
			return
		}
		writeJSON(w, http.StatusCreated, single{Data: answerObject{
			ID: q.ID, ConversationID: q.ConversationID, Question: q.Question, Answer: q.Answer,
			CreatedAt: formatTime(q.CreatedAt), AnswerMS: q.AnswerMS,
		}})
	})
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
