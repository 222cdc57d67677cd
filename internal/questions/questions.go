// Package questions owns asking an AI agent a question: the checks that
// come before it (the agent, the account's ai-answers feature, a configured
// model, the agent enabled, the conversation), the model call and its time
// bound, its timing, and the record every outcome leaves (answered or
// failed, so the agent's counters stay exact). Errors carry contract codes;
// nothing of the provider's reply reaches them.
//
// Asking is two steps, Prepare and Answer, so that a streamed answer
// (decisions.md, "Streaming answers") can send its first event between
// them: every refusal comes from Prepare, before anything is sent, and a
// failure after that is recorded as failed like any other.
package questions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/store"
)

// Timeout bounds a model call, reading the answer included (the llm
// client's own default bound, applied here for any Model).
const Timeout = llm.DefaultTimeout

// recordTimeout bounds the write of a question's outcome, which outlives a
// caller who went away: the counters must still see it.
const recordTimeout = 10 * time.Second

// Model answers a conversation, whole or streamed; *llm.Client is one.
type Model interface {
	Complete(ctx context.Context, msgs []llm.Message) (string, error)
	Stream(ctx context.Context, msgs []llm.Message, onDelta func(string) error) (string, error)
}

// Service asks agents questions and records the outcome.
type Service struct {
	store *store.Store
	model Model // nil: no model configured
	now   func() time.Time
}

// New returns a Service. model is nil when the service has no model
// configured (every question is then refused with feature_not_enabled);
// now is the clock (time.Now when nil).
func New(st *store.Store, model Model, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, model: model, now: now}
}

// Pending is a question that passed every check and is about to be asked:
// its id, conversation and time are fixed; nothing is recorded yet.
type Pending struct {
	svc      *Service
	q        domain.Question
	msgs     []llm.Message
	newConvo bool
}

// Question is the question as it will be recorded, without its answer.
func (p *Pending) Question() domain.Question { return p.q }

// Prepare does every check and lookup a question needs, in the contract's
// order, and fixes the question's id, conversation and time. A refusal is
// a domain error; nothing has been asked or recorded then.
func (s *Service) Prepare(ctx context.Context, accountID, agentID, question string, conversationID *string) (*Pending, error) {
	if err := checkQuestion(question); err != nil {
		return nil, err
	}
	ag, err := s.store.GetAgent(ctx, accountID, agentID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, agents.NotFound(agentID)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	acct, err := s.store.GetAccount(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("get account: %w", err)
	}
	// Both refusals share the code. A server without a model is
	// self-hosted: its operator is told what to do; a server with one
	// has support that switches the account's feature on.
	if s.model == nil {
		return nil, domain.Errorf(domain.CodeFeatureNotEnabled,
			"This server has no model configured to answer questions: its operator starts serve with --llm-url "+
				"(an OpenAI-compatible API) and turns answering on for the account with agentapi account feature --enable ai-answers.")
	}
	if !acct.HasFeature(domain.FeatureAIAnswers) {
		return nil, domain.Errorf(domain.CodeFeatureNotEnabled,
			"Answering questions (the ai-answers feature) is not enabled for this account; contact support.")
	}
	if !ag.Enabled {
		return nil, domain.Errorf(domain.CodeImmutableState,
			"This AI agent is disabled and cannot be asked; enable it first.")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	var turns []llm.Turn
	convID := domain.NewID(domain.PrefixConvo, now)
	if conversationID != nil {
		convID = *conversationID
		earlier, err := s.store.ConversationTurns(ctx, accountID, ag.ID, convID)
		if errors.Is(err, domain.ErrNotFound) {
			return nil, domain.Errorf(domain.CodeNotFound, "No conversation %q with this AI agent.", truncate(convID, 64))
		}
		if err != nil {
			return nil, fmt.Errorf("conversation turns: %w", err)
		}
		for _, t := range earlier {
			turns = append(turns, llm.Turn{Question: t.Question, Answer: t.Answer})
		}
	}
	p := &Pending{
		svc: s, msgs: llm.Conversation(ag.Instructions, turns, question), newConvo: conversationID == nil,
		q: domain.Question{
			ID: domain.NewID(domain.PrefixQuestion, now), AccountID: accountID, AgentID: ag.ID,
			ConversationID: convID, Question: question, CreatedAt: now,
		},
	}
	return p, nil
}

// checkQuestion applies the rule for a question's text: required, not
// blank (a question of white space or zero-width characters alone, with no
// visible character, is blank), at most MaxQuestionLength code points, no
// control characters but line breaks and tabs.
func checkQuestion(q string) error {
	switch problem := domain.CheckText(q, domain.MaxQuestionLength); {
	case strings.IndexFunc(q, domain.IsVisible) < 0:
		return domain.FieldErr(domain.CodeInvalidValue, "question", "question must not be blank.")
	case problem == domain.TextTooLong:
		return domain.FieldErr(domain.CodeInvalidValue, "question",
			fmt.Sprintf("question must be at most %d characters.", domain.MaxQuestionLength))
	case problem == domain.TextControl:
		return domain.FieldErr(domain.CodeInvalidValue, "question",
			"question must not contain control characters other than line breaks and tabs.")
	}
	return nil
}

// Answer asks the model, bound to ctx (a caller who goes away cancels the
// call) and to Timeout, and records the outcome, answered or failed, even
// when ctx is done. A model failure is an error without the provider's
// words in its message; the cause is wrapped for the log.
func (p *Pending) Answer(ctx context.Context) (domain.Question, error) {
	return p.finish(ctx, false, p.svc.model.Complete)
}

// AnswerStream is Answer for a streamed question: it passes the answer's
// text to onDelta piece by piece as the model produces it, under the same
// bounds, and records the outcome the same way. onDelta failing (the
// caller went away) ends the model call, and the question is recorded as
// failed. The caller has told the client the question's conversation
// (question.created), so a new conversation is kept even when the answer
// fails: its id stays usable to ask again.
func (p *Pending) AnswerStream(ctx context.Context, onDelta func(string) error) (domain.Question, error) {
	return p.finish(ctx, true, func(ctx context.Context, msgs []llm.Message) (string, error) {
		return p.svc.model.Stream(ctx, msgs, onDelta)
	})
}

// finish runs one model call and records its outcome; a streamed answer
// passes a call that forwards the model's deltas as they come. told: the
// client already has the question's conversation id (a stream's
// question.created), so a new conversation is kept even if the answer fails.
func (p *Pending) finish(ctx context.Context, told bool, call func(context.Context, []llm.Message) (string, error)) (domain.Question, error) {
	q := p.q
	callCtx, cancel := context.WithTimeout(ctx, Timeout)
	start := time.Now()
	answer, askErr := call(callCtx, p.msgs)
	q.AnswerMS = time.Since(start).Milliseconds()
	cancel()
	q.Answer = answer
	// A failed first question whose conversation the client never saw
	// starts no conversation.
	rec, newConvo := q, p.newConvo
	if askErr != nil && newConvo && !told {
		rec.ConversationID, newConvo = "", false
	}
	recordCtx, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancelRecord()
	if err := p.svc.store.RecordQuestion(recordCtx, rec, newConvo, askErr != nil); err != nil {
		return domain.Question{}, fmt.Errorf("record question: %w", err)
	}
	if askErr != nil {
		return domain.Question{}, fmt.Errorf("ask model: %w", askErr)
	}
	return q, nil
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
