package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// The console's agents page, on both engines: pages of agents oldest first
// that together hold every agent of the account once (several created in
// one millisecond), search by name (case-insensitive, LIKE's wildcards as
// text), and each agent's counters exactly as AgentStats gives them, from
// one statement for the whole page.
func TestAgentPage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		a, other := storetest.Account(t, s), storetest.Account(t, s)
		ags := agentPageSeed(t, s, a.ID, other.ID)
		got := agentPageWalk(t, s, a.ID)
		agentPageCheckItems(t, s, a.ID, ags, got)
		agentPageCheckSearch(t, s, a.ID)

		// The whole page, counters included, is one statement: run alone, it
		// gives what AgentPage gives.
		agentPageCheckOneStatement(t, s, a.ID, got)
	})
}

// agentPageSeed imports twelve agents of the account (three a millisecond)
// and one of the other account, gives them questions, and returns the
// account's agents.
func agentPageSeed(t *testing.T, s *store.Store, accountID, otherID string) []domain.Agent {
	t.Helper()
	ctx := context.Background()
	var ags []domain.Agent
	for i := range 12 {
		at := t0.Add(time.Duration(i/3) * time.Millisecond)
		ags = append(ags, domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: accountID,
			Name: fmt.Sprintf("Bot_%02d", i), Enabled: i%2 == 0, CreatedAt: at, UpdatedAt: at})
	}
	theirs := domain.Agent{ID: domain.NewID(domain.PrefixAgent, t0), AccountID: otherID, Name: "Bot_00", CreatedAt: t0, UpdatedAt: t0}
	if err := s.ImportAgents(ctx, append(ags[:len(ags):len(ags)], theirs)); err != nil {
		t.Fatal(err)
	}
	agentPageAskQuestions(t, s, accountID, ags)
	// The other account's agent has questions of its own, never counted here.
	q := domain.Question{ID: domain.NewID(domain.PrefixQuestion, t0), AccountID: otherID, AgentID: theirs.ID,
		ConversationID: domain.NewID(domain.PrefixConvo, t0), Question: "q", Answer: "a", AnswerMS: 5, CreatedAt: t0}
	if err := s.RecordQuestion(ctx, q, true, false); err != nil {
		t.Fatal(err)
	}
	return ags
}

// agentPageAskQuestions records agent i's questions: i of them over i/2+1
// conversations; every fourth fails.
func agentPageAskQuestions(t *testing.T, s *store.Store, accountID string, ags []domain.Agent) {
	t.Helper()
	n := 0
	for i, ag := range ags {
		conv := ""
		for j := range i {
			n++
			at := t0.Add(time.Duration(n) * time.Second)
			fresh := j%2 == 0
			if fresh {
				conv = domain.NewID(domain.PrefixConvo, at)
			}
			q := domain.Question{ID: domain.NewID(domain.PrefixQuestion, at), AccountID: accountID, AgentID: ag.ID,
				ConversationID: conv, Question: "q", Answer: "a", AnswerMS: int64(100*j + i), CreatedAt: at}
			if err := s.RecordQuestion(context.Background(), q, fresh, j%4 == 3); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// agentPageWalk reads the account's agents five a page, over three pages.
func agentPageWalk(t *testing.T, s *store.Store, accountID string) []store.AgentPageItem {
	t.Helper()
	var got []store.AgentPageItem
	var after store.Cursor
	for pages := 1; ; pages++ {
		items, next, err := s.AgentPage(context.Background(), store.AgentPageQuery{AccountID: accountID, After: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, items...)
		if next.IsZero() {
			if pages != 3 {
				t.Fatalf("%d pages, want 3", pages)
			}
			break
		}
		after = next
	}
	return got
}

// agentPageCheckItems checks the pages hold every agent once, oldest first,
// each with the counters AgentStats gives it.
func agentPageCheckItems(t *testing.T, s *store.Store, accountID string, ags []domain.Agent, got []store.AgentPageItem) {
	t.Helper()
	if len(got) != len(ags) {
		t.Fatalf("%d agents, want %d", len(got), len(ags))
	}
	for i, it := range got {
		ag := ags[i]
		if it.ID != ag.ID || it.Name != ag.Name || it.Enabled != ag.Enabled || !it.CreatedAt.Equal(ag.CreatedAt) || !it.UpdatedAt.Equal(ag.UpdatedAt) {
			t.Fatalf("item %d = %+v, want %+v", i, it, ag)
		}
		want, err := s.AgentStats(context.Background(), accountID, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(it.Stats, want) {
			t.Errorf("%s: stats %s, want %s", ag.Name, statsString(it.Stats), statsString(want))
		}
	}
	if got[0].Stats.QuestionsTotal != 0 || got[11].Stats.QuestionsTotal != 11 || got[11].Stats.FailedTotal != 2 {
		t.Fatalf("the fixture is not what the test means: %s", statsString(got[11].Stats))
	}
}

// agentPageCheckSearch checks search by name: case-insensitive, LIKE's
// wildcards as text, and a search no database can store.
func agentPageCheckSearch(t *testing.T, s *store.Store, accountID string) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range []struct {
		search string
		want   int
	}{{"bot_1", 2}, {"BOT_0", 10}, {"_", 12}, {"%", 0}, {"nobody", 0}} {
		items, next, err := s.AgentPage(ctx, store.AgentPageQuery{AccountID: accountID, Search: tc.search, Limit: 50})
		if err != nil || len(items) != tc.want || !next.IsZero() {
			t.Errorf("search %q: %d agents, %v, %v; want %d", tc.search, len(items), next, err, tc.want)
		}
	}
	if items, _, err := s.AgentPage(ctx, store.AgentPageQuery{AccountID: accountID, Search: "a\x00", Limit: 50}); err != nil || len(items) != 0 {
		t.Errorf("unstorable search: %v, %v", items, err)
	}
}

// agentPageCheckOneStatement runs AgentPage's SQL alone and checks it is
// one statement whose twelve rows match the page got.
func agentPageCheckOneStatement(t *testing.T, s *store.Store, accountID string, got []store.AgentPageItem) {
	t.Helper()
	query, args := store.AgentPageSQL(store.AgentPageQuery{AccountID: accountID, Limit: 50})
	if strings.Contains(query, ";") {
		t.Fatalf("more than one statement:\n%s", query)
	}
	rows, err := s.DB().QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	count := 0
	for rows.Next() {
		agentPageCheckRow(t, rows, count, got[count])
		count++
	}
	if err := rows.Err(); err != nil || count != 12 {
		t.Fatalf("the statement gave %d rows, %v", count, err)
	}
}

// agentPageCheckRow scans row count of the statement and checks its id and
// counters are the page item's.
func agentPageCheckRow(t *testing.T, rows *sql.Rows, count int, item store.AgentPageItem) {
	t.Helper()
	var (
		id, name                        string
		enabled                         bool
		created, updated                int64
		total, answered, failed, convos int64
		last                            sql.NullInt64
		answeredMS                      int64
	)
	if err := rows.Scan(&id, &name, &enabled, &created, &updated, &total, &answered, &failed, &last, &answeredMS, &convos); err != nil {
		t.Fatal(err)
	}
	st := item.Stats
	if id != item.ID || total != st.QuestionsTotal || answered != st.AnsweredTotal || failed != st.FailedTotal || convos != st.ConversationsTotal {
		t.Errorf("row %d of the statement differs from the page", count)
	}
}

func statsString(st domain.AgentStats) string {
	avg := "nil"
	if st.AverageAnswerMS != nil {
		avg = fmt.Sprint(*st.AverageAnswerMS)
	}
	last := "nil"
	if st.LastQuestionAt != nil {
		last = st.LastQuestionAt.String()
	}
	return fmt.Sprintf("{q=%d a=%d f=%d c=%d avg=%s last=%s}", st.QuestionsTotal, st.AnsweredTotal, st.FailedTotal, st.ConversationsTotal, avg, last)
}
