package questions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/questions"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// model answers from a function and remembers what it was asked.
type model struct {
	answer func(ctx context.Context, msgs []llm.Message) (string, error)
	asked  [][]llm.Message
}

func (m *model) Complete(ctx context.Context, msgs []llm.Message) (string, error) {
	m.asked = append(m.asked, msgs)
	return m.answer(ctx, msgs)
}

func (m *model) Stream(ctx context.Context, msgs []llm.Message, onDelta func(string) error) (string, error) {
	answer, err := m.Complete(ctx, msgs)
	if err == nil {
		err = onDelta(answer)
	}
	return answer, err
}

// ask is a question answered whole, as POST …/questions without "stream".
func ask(ctx context.Context, svc *questions.Service, accountID, agentID, question string, conv *string) (domain.Question, error) {
	p, err := svc.Prepare(ctx, accountID, agentID, question, conv)
	if err != nil {
		return domain.Question{}, err
	}
	return p.Answer(ctx)
}

type world struct {
	st              *store.Store
	clock           *testenv.Clock
	m               *model
	svc             *questions.Service
	acct, off       domain.Account
	agent, disabled domain.Agent
	offAgent        domain.Agent
}

func setup(t *testing.T, engine string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{st: storetest.Open(t, engine), clock: testenv.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	w.m = &model{answer: func(context.Context, []llm.Message) (string, error) { return "4", nil }}
	w.svc = questions.New(w.st, w.m, w.clock.Now)
	now := w.clock.Now()
	mkAccount := func(name string, on bool) domain.Account {
		a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
		if err := w.st.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		if on {
			if err := w.st.SetAccountFeature(ctx, a.ID, domain.FeatureAIAnswers, true); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	mkAgent := func(acct, name string, enabled bool) domain.Agent {
		ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: acct, Name: name,
			Instructions: "Answer in digits.", Enabled: enabled, CreatedAt: now, UpdatedAt: now}
		if err := w.st.CreateAgent(ctx, ag); err != nil {
			t.Fatal(err)
		}
		return ag
	}
	w.acct, w.off = mkAccount("On", true), mkAccount("Off", false)
	w.agent, w.disabled = mkAgent(w.acct.ID, "Maths", true), mkAgent(w.acct.ID, "Asleep", false)
	w.offAgent = mkAgent(w.off.ID, "Maths", true)
	return w
}

func ptr(s string) *string { return &s }

func eachEngine(t *testing.T, f func(t *testing.T, w *world)) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) { f(t, setup(t, engine)) })
	}
}

func TestRefusals(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		ans, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "2+2?", nil)
		if err != nil {
			t.Fatal(err)
		}
		other := setupAgent(t, w, "Other")
		noModel := questions.New(w.st, nil, w.clock.Now)
		for _, tc := range []struct {
			what     string
			svc      *questions.Service
			acct, ag string
			question string
			conv     *string
			code     domain.Code
			says     string
		}{
			{"blank question", w.svc, w.acct.ID, w.agent.ID, " \n", nil, domain.CodeInvalidValue, "blank"},
			{"zero-width question", w.svc, w.acct.ID, w.agent.ID, "\u200b\u200d", nil, domain.CodeInvalidValue, "blank"},
			{"long question", w.svc, w.acct.ID, w.agent.ID, strings.Repeat("x", domain.MaxQuestionLength+1), nil, domain.CodeInvalidValue, "at most"},
			{"unknown agent", w.svc, w.acct.ID, "agt_nope", "q", nil, domain.CodeNotFound, "No AI agent"},
			{"another account's agent", w.svc, w.acct.ID, w.offAgent.ID, "q", nil, domain.CodeNotFound, "No AI agent"},
			{"feature off", w.svc, w.off.ID, w.offAgent.ID, "q", nil, domain.CodeFeatureNotEnabled, "ai-answers feature"},
			{"no model", noModel, w.acct.ID, w.agent.ID, "q", nil, domain.CodeFeatureNotEnabled, "--llm-url"},
			{"no model outranks feature off", noModel, w.off.ID, w.offAgent.ID, "q", nil, domain.CodeFeatureNotEnabled, "agentapi account feature --enable ai-answers"},
			{"disabled agent", w.svc, w.acct.ID, w.disabled.ID, "q", nil, domain.CodeImmutableState, "disabled"},
			{"empty conversation id", w.svc, w.acct.ID, w.agent.ID, "q", ptr(""), domain.CodeNotFound, "No conversation"},
			{"unknown conversation", w.svc, w.acct.ID, w.agent.ID, "q", ptr("conv_nope"), domain.CodeNotFound, "No conversation"},
			{"another agent's conversation", w.svc, w.acct.ID, other.ID, "q", &ans.ConversationID, domain.CodeNotFound, "No conversation"},
		} {
			asked := len(w.m.asked)
			_, err := ask(ctx, tc.svc, tc.acct, tc.ag, tc.question, tc.conv)
			if domain.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v, want %s saying %q", tc.what, err, tc.code, tc.says)
			}
			if len(w.m.asked) != asked {
				t.Errorf("%s: the model was asked", tc.what)
			}
		}
		st, err := w.st.AgentStats(ctx, w.acct.ID, w.agent.ID)
		if err != nil || st.QuestionsTotal != 1 {
			t.Errorf("a refusal was recorded: %+v, %v", st, err)
		}
	})
}

func setupAgent(t *testing.T, w *world, name string) domain.Agent {
	t.Helper()
	now := w.clock.Now()
	ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: w.acct.ID, Name: name, Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := w.st.CreateAgent(context.Background(), ag); err != nil {
		t.Fatal(err)
	}
	return ag
}

func TestConversationAndRecord(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		first, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "2+2?", nil)
		if err != nil {
			t.Fatal(err)
		}
		if first.Answer != "4" || first.ConversationID == "" || !first.CreatedAt.Equal(w.clock.Now()) || first.AgentID != w.agent.ID {
			t.Errorf("first = %+v", first)
		}
		w.clock.Advance(time.Second)
		w.m.answer = func(context.Context, []llm.Message) (string, error) { return "6", nil }
		second, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "And 3+3?", &first.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		if second.ConversationID != first.ConversationID || second.ID == first.ID {
			t.Errorf("second = %+v", second)
		}
		want := llm.Conversation("Answer in digits.", []llm.Turn{{Question: "2+2?", Answer: "4"}}, "And 3+3?")
		if got := w.m.asked[1]; len(got) != len(want) || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Errorf("asked %+v, want %+v", got, want)
		}
		st, err := w.st.AgentStats(ctx, w.acct.ID, w.agent.ID)
		if err != nil || st.QuestionsTotal != 2 || st.AnsweredTotal != 2 || st.ConversationsTotal != 1 {
			t.Errorf("stats %+v, %v", st, err)
		}
	})
}

func TestFailuresAreRecordedAndSayNothingOfTheProvider(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		const secret = "provider says: quota of org-SECRET exceeded"
		var (
			deadline time.Duration
			leave    context.CancelFunc // the caller going away mid-answer
		)
		for i, tc := range []struct {
			what   string
			ctx    func() (context.Context, context.CancelFunc)
			answer func(ctx context.Context, msgs []llm.Message) (string, error)
		}{
			{"model error", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
				func(ctx context.Context, _ []llm.Message) (string, error) {
					if d, ok := ctx.Deadline(); ok {
						deadline = time.Until(d)
					}
					return "", errors.New(secret)
				}},
			{"caller went away", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
				func(ctx context.Context, _ []llm.Message) (string, error) {
					leave()
					<-ctx.Done()
					return "partial", ctx.Err()
				}},
		} {
			w.m.answer = tc.answer
			ctx, cancel := tc.ctx()
			leave = cancel
			_, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "q", nil)
			cancel()
			var de *domain.Error
			if err == nil || errors.As(err, &de) || domain.ErrorCode(err) != domain.CodeServerError {
				t.Errorf("%s: %v, want an internal error (server_error)", tc.what, err)
			}
			st, serr := w.st.AgentStats(context.Background(), w.acct.ID, w.agent.ID)
			if serr != nil || st.FailedTotal != int64(i+1) || st.AnsweredTotal != 0 || st.ConversationsTotal != 0 {
				t.Errorf("%s: stats %+v, %v", tc.what, st, serr)
			}
		}
		if deadline <= 0 || deadline > questions.Timeout {
			t.Errorf("the model call's deadline was %v away, want at most %v", deadline, questions.Timeout)
		}
	})
}

func TestPrepareFixesTheQuestionBeforeTheModelIsAsked(t *testing.T) {
	w := setup(t, store.EngineSQLite)
	ctx := context.Background()
	p, err := w.svc.Prepare(ctx, w.acct.ID, w.agent.ID, "2+2?", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Question()
	if len(w.m.asked) != 0 || q.ID == "" || q.ConversationID == "" || q.Answer != "" {
		t.Fatalf("prepared %+v, asked %d", q, len(w.m.asked))
	}
	if st, _ := w.st.AgentStats(ctx, w.acct.ID, w.agent.ID); st.QuestionsTotal != 0 {
		t.Fatalf("recorded before the answer: %+v", st)
	}
	got, err := p.Answer(ctx)
	if err != nil || got.ID != q.ID || got.ConversationID != q.ConversationID || got.Answer != "4" {
		t.Fatalf("answered %+v, %v", got, err)
	}
}

// TestStreamedFailureKeepsItsConversation: a streamed question tells the
// client its conversation before the answer (question.created), so when
// the answer then fails the conversation is kept and can be continued; a
// question answered whole that fails starts none (its id was never shown).
func TestStreamedFailureKeepsItsConversation(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		w.m.answer = func(context.Context, []llm.Message) (string, error) { return "", errors.New("model down") }
		p, err := w.svc.Prepare(ctx, w.acct.ID, w.agent.ID, "2+2?", nil)
		if err != nil {
			t.Fatal(err)
		}
		told := p.Question().ConversationID
		if _, err := p.AnswerStream(ctx, func(string) error { return nil }); err == nil {
			t.Fatal("a failed model answered")
		}
		if _, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "3+3?", nil); err == nil {
			t.Fatal("a failed model answered")
		}
		st, err := w.st.AgentStats(ctx, w.acct.ID, w.agent.ID)
		if err != nil || st.FailedTotal != 2 || st.ConversationsTotal != 1 {
			t.Fatalf("stats %+v, %v: want 2 failed, 1 conversation (the streamed one)", st, err)
		}
		w.m.answer = func(context.Context, []llm.Message) (string, error) { return "4", nil }
		q, err := ask(ctx, w.svc, w.acct.ID, w.agent.ID, "2+2?", &told)
		if err != nil || q.ConversationID != told {
			t.Fatalf("continuing the streamed conversation: %+v, %v", q, err)
		}
	})
}
