package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/questions"
	"github.com/agentapi/agentapi/internal/wire"
)

func handleAgentStats(svc *agents.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		st, err := svc.Stats(r.Context(), agentActor(r), r.PathValue("agent_id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, single{Data: wire.Stats{
			AgentID: st.AgentID, QuestionsTotal: st.QuestionsTotal, AnsweredTotal: st.AnsweredTotal,
			FailedTotal: st.FailedTotal, LastQuestionAt: wire.TimePtr(st.LastQuestionAt),
			AverageAnswerMS: st.AverageAnswerMS, ConversationsTotal: st.ConversationsTotal,
		}})
		return nil
	}
}

// maxIDJSON bounds the JSON text of an id that is decoded; a longer one
// is no id of ours.
const maxIDJSON = 1 << 10

func toAnswerObject(q domain.Question) wire.Answer {
	return wire.Answer{
		ID: q.ID, ConversationID: q.ConversationID, Question: q.Question, Answer: q.Answer,
		CreatedAt: wire.Time(q.CreatedAt), AnswerMS: q.AnswerMS,
	}
}

// askInput is a question request's body, validated.
type askInput struct {
	question string
	conv     *string
	stream   bool
}

func decodeAsk(w http.ResponseWriter, r *http.Request) (askInput, error) {
	var p problems
	var in askInput
	p.query(r)
	obj := p.object(w, r, "question", "conversation_id", "stream")
	in.question, _ = p.text(obj, "question", domain.MaxQuestionLength, true)
	// conversation_id is optional; null counts as absent.
	if raw, given := obj["conversation_id"]; given && jsonKind(raw) != "null" {
		var id string // a longer one names no conversation: not decoded
		if !longJSON(raw, maxIDJSON) {
			id, _ = p.str(raw, "conversation_id")
		}
		in.conv = &id
	}
	if _, given := obj["stream"]; given {
		in.stream, _ = p.boolean(obj, "stream")
	}
	return in, p.err()
}

// handleAsk answers a question: 201 with the answer, or with "stream": true
// the answer as server-sent events once every check passed (stream.go).
func handleAsk(svc *questions.Service, log *slog.Logger, keepAlive time.Duration) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		in, err := decodeAsk(w, r)
		if err != nil {
			return err
		}
		p, err := svc.Prepare(r.Context(), authFrom(r.Context()).key.AccountID, r.PathValue("agent_id"), in.question, in.conv)
		if err != nil {
			return err
		}
		if in.stream {
			streamAnswer(w, r, log, p, keepAlive)
			return nil
		}
		q, err := p.Answer(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, single{Data: toAnswerObject(q)})
		return nil
	}
}
