package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

func question(acct, agent, conv string, at time.Time, ms int64) domain.Question {
	return domain.Question{
		ID: domain.NewID(domain.PrefixQuestion, at), AccountID: acct, AgentID: agent, ConversationID: conv,
		Question: "q at " + at.Format(time.RFC3339Nano), Answer: "a", CreatedAt: at, AnswerMS: ms,
	}
}

func TestConversations(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct, other := storetest.Account(t, s), storetest.Account(t, s)
		ag := storetest.Agent(t, s, acct.ID, "talker", t0)
		ag2 := storetest.Agent(t, s, acct.ID, "other", t0)
		conv := domain.NewID(domain.PrefixConvo, t0)

		first, second := conversationsRecordTurns(t, s, acct.ID, ag.ID, conv)
		conversationsCheckTurns(t, s, acct.ID, ag.ID, conv, first, second)
		_, err := s.ConversationTurns(ctx, acct.ID, ag2.ID, conv)
		wantNotFound(t, "conversation of another agent", err)
		_, err = s.ConversationTurns(ctx, other.ID, ag.ID, conv)
		wantNotFound(t, "conversation of another account", err)
		_, err = s.ConversationTurns(ctx, acct.ID, ag.ID, "conv_nope")
		wantNotFound(t, "unknown conversation", err)

		// A failed first question the client was told of starts one.
		conversationsCheckFailedFirst(t, s, acct.ID, ag.ID)
		conversationsCheckRecent(t, s, acct.ID, ag.ID, first, second)

		st, err := s.AgentStats(ctx, acct.ID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		avg := int64(15)
		last := t0.Add(3 * time.Second)
		want := domain.AgentStats{AgentID: ag.ID, QuestionsTotal: 4, AnsweredTotal: 2, FailedTotal: 2,
			LastQuestionAt: &last, AverageAnswerMS: &avg, ConversationsTotal: 2}
		assertStats(t, st, want)
	})
}

// conversationsRecordTurns records a conversation's first question, a
// failed turn and a second question; it returns the first and the second.
func conversationsRecordTurns(t *testing.T, s *store.Store, acctID, agentID, conv string) (first, second domain.Question) {
	t.Helper()
	ctx := context.Background()
	first = question(acctID, agentID, conv, t0, 10)
	if err := s.RecordQuestion(ctx, first, true, false); err != nil {
		t.Fatal(err)
	}
	// A failed turn of an existing conversation is kept but not a turn.
	failedTurn := question(acctID, agentID, conv, t0.Add(time.Second), 5)
	if err := s.RecordQuestion(ctx, failedTurn, false, true); err != nil {
		t.Fatal(err)
	}
	second = question(acctID, agentID, conv, t0.Add(2*time.Second), 20)
	second.Answer = "second answer"
	if err := s.RecordQuestion(ctx, second, false, false); err != nil {
		t.Fatal(err)
	}
	return first, second
}

// conversationsCheckTurns checks the conversation's turns are the first
// and the second question, the failed turn left out.
func conversationsCheckTurns(t *testing.T, s *store.Store, acctID, agentID, conv string, first, second domain.Question) {
	t.Helper()
	turns, err := s.ConversationTurns(context.Background(), acctID, agentID, conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0] != first || turns[1] != second {
		t.Fatalf("turns:\n%+v\nwant\n%+v\n%+v", turns, first, second)
	}
}

// conversationsCheckFailedFirst records a failed first question that starts
// its conversation (a streamed one, whose conversation the client was
// told) and checks the conversation is found, with no answered turn.
func conversationsCheckFailedFirst(t *testing.T, s *store.Store, acctID, agentID string) {
	t.Helper()
	ctx := context.Background()
	told := domain.NewID(domain.PrefixConvo, t0)
	if err := s.RecordQuestion(ctx, question(acctID, agentID, told, t0.Add(3*time.Second), 7), true, true); err != nil {
		t.Fatal(err)
	}
	if turns, err := s.ConversationTurns(ctx, acctID, agentID, told); err != nil || len(turns) != 0 {
		t.Fatalf("conversation of a failed first question: %v, %+v", err, turns)
	}
}

// conversationsCheckRecent checks the recent questions are the answered
// ones, newest first, and that the limit holds.
func conversationsCheckRecent(t *testing.T, s *store.Store, acctID, agentID string, first, second domain.Question) {
	t.Helper()
	ctx := context.Background()
	recent, err := s.RecentQuestions(ctx, acctID, agentID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 2 || recent[0] != second || recent[1] != first {
		t.Fatalf("recent (answered, newest first): %+v", recent)
	}
	if recent, _ := s.RecentQuestions(ctx, acctID, agentID, 1); len(recent) != 1 || recent[0] != second {
		t.Fatalf("recent limit 1: %+v", recent)
	}
}

func assertStats(t *testing.T, got, want domain.AgentStats) {
	t.Helper()
	str := func(s domain.AgentStats) string {
		last, avg := "nil", "nil"
		if s.LastQuestionAt != nil {
			last = s.LastQuestionAt.Format(time.RFC3339Nano) + " " + s.LastQuestionAt.Location().String()
		}
		if s.AverageAnswerMS != nil {
			avg = fmt.Sprint(*s.AverageAnswerMS)
		}
		return fmt.Sprintf("%s total=%d answered=%d failed=%d last=%s avg=%s conversations=%d",
			s.AgentID, s.QuestionsTotal, s.AnsweredTotal, s.FailedTotal, last, avg, s.ConversationsTotal)
	}
	if str(got) != str(want) {
		t.Fatalf("stats:\n got %s\nwant %s", str(got), str(want))
	}
}

func TestAgentStatsEmptyAndRounding(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		ag := storetest.Agent(t, s, acct.ID, "quiet", t0)
		st, err := s.AgentStats(ctx, acct.ID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertStats(t, st, domain.AgentStats{AgentID: ag.ID})

		// Only failures: counted, but no average.
		if err := s.RecordQuestion(ctx, question(acct.ID, ag.ID, "", t0, 100), false, true); err != nil {
			t.Fatal(err)
		}
		st, _ = s.AgentStats(ctx, acct.ID, ag.ID)
		assertStats(t, st, domain.AgentStats{AgentID: ag.ID, QuestionsTotal: 1, FailedTotal: 1, LastQuestionAt: &t0})

		// 1, 2: 1.5 rounds to 2; adding 2: 5/3 rounds to 2; adding 1: 6/4 to 2; adding 0: 6/5 to 1.
		for i, ms := range []int64{1, 2, 2, 1, 0} {
			at := t0.Add(time.Duration(i+1) * time.Millisecond)
			if err := s.RecordQuestion(ctx, question(acct.ID, ag.ID, domain.NewID(domain.PrefixConvo, at), at, ms), true, false); err != nil {
				t.Fatal(err)
			}
		}
		st, _ = s.AgentStats(ctx, acct.ID, ag.ID)
		avg, last := int64(1), t0.Add(5*time.Millisecond)
		assertStats(t, st, domain.AgentStats{AgentID: ag.ID, QuestionsTotal: 6, AnsweredTotal: 5, FailedTotal: 1,
			LastQuestionAt: &last, AverageAnswerMS: &avg, ConversationsTotal: 5})
	})
}

// TestAgentStatsExactUnderConcurrency records many questions at once, as
// many requests (on many instances) do, and expects every one counted.
func TestAgentStatsExactUnderConcurrency(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		ag := storetest.Agent(t, s, acct.ID, "busy", t0)
		const n = 50
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				// Even i start a conversation, failed or not; odd i are stored without one.
				conv := ""
				if i%2 == 0 {
					conv = domain.NewID(domain.PrefixConvo, at)
				}
				q := question(acct.ID, ag.ID, conv, at, int64(i))
				if err := s.RecordQuestion(ctx, q, conv != "", i%5 == 0); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Answered: i not a multiple of 5 (40 of them), sum 1225-225 = 1000.
		// Conversations: every even i (25).
		avg, last := int64(25), t0.Add((n-1)*time.Millisecond)
		st, err := s.AgentStats(ctx, acct.ID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertStats(t, st, domain.AgentStats{AgentID: ag.ID, QuestionsTotal: n, AnsweredTotal: 40, FailedTotal: 10,
			LastQuestionAt: &last, AverageAnswerMS: &avg, ConversationsTotal: 25})
	})
}
