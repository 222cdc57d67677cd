package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// withModel points the server at a loopback Chat Completions peer.
func withModel(t *testing.T, reply func(llmtest.Request) (int, string)) func(*api.Config) {
	t.Helper()
	peer := llmtest.NewServer(t, reply)
	m, err := llm.New(llm.Config{BaseURL: peer.URL, Model: "test-model", APIKey: "sk-test", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *api.Config) { c.LLM = m }
}

func TestEveryMethodAgainstTheServer(t *testing.T) {
	f := newFixture(t, withModel(t, llmtest.Echo))
	ctx := context.Background()
	created := f.key(func(p *keys.CreateParams) { p.Name = "ops"; p.Description = "the ops key" }, allScopes...)
	c := f.client(created.Credential)

	everyMethodMe(t, ctx, f, c, created)
	a := everyMethodCreate(t, ctx, f, c)
	everyMethodUpdate(t, ctx, f, c, a)
	everyMethodSwitch(t, ctx, f, c, a)
	everyMethodAsk(t, ctx, f, c, a)
	if n := len(c.sleeper.got()); n != 0 {
		t.Fatalf("the client slept %d times on a happy path", n)
	}
}

// everyMethodMe: Me describes the key the client holds.
func everyMethodMe(t *testing.T, ctx context.Context, f *fixture, c tclient, created keys.Created) {
	t.Helper()
	me, err := c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me.ID != created.Key.ID || me.Name != "ops" || me.Description != "the ops key" || me.Prefix != created.Key.Prefix ||
		strings.Join(me.Scopes, ",") != "aiagents:read,aiagents:write,aiagents:query" || me.RateLimitPerMinute != 120 ||
		me.ExpiresAt != nil || me.LastUsedAt == nil || !me.LastUsedAt.Equal(f.clock.Now()) {
		t.Fatalf("Me: %+v", me)
	}
}

// everyMethodCreate creates the agent a second later and reads it back.
func everyMethodCreate(t *testing.T, ctx context.Context, f *fixture, c tclient) client.Agent {
	t.Helper()
	f.clock.Advance(time.Second)
	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "  Helpdesk  ", Instructions: "Be brief."})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "agt_") || a.Name != "Helpdesk" || !a.Enabled || a.Instructions != "Be brief." ||
		!a.CreatedAt.Equal(f.clock.Now()) || !a.UpdatedAt.Equal(a.CreatedAt) || a.Adopted {
		t.Fatalf("CreateAgent: %+v", a)
	}
	got, err := c.GetAgent(ctx, a.ID)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(a) {
		t.Fatalf("GetAgent: %+v, %v; want %+v", got, err, a)
	}
	return a
}

// everyMethodUpdate renames a a second later, then sends an empty update.
func everyMethodUpdate(t *testing.T, ctx context.Context, f *fixture, c tclient, a client.Agent) {
	t.Helper()
	f.clock.Advance(time.Second)
	name, instr := "Support desk", "Answer in French."
	up, err := c.UpdateAgent(ctx, a.ID, client.AgentUpdate{Name: &name, Instructions: &instr})
	if err != nil {
		t.Fatal(err)
	}
	if up.Name != name || up.Instructions != instr || !up.UpdatedAt.Equal(f.clock.Now()) || !up.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("UpdateAgent: %+v", up)
	}
	// An empty update changes nothing (nil fields are not sent).
	same, err := c.UpdateAgent(ctx, a.ID, client.AgentUpdate{})
	if err != nil || fmt.Sprint(same) != fmt.Sprint(up) {
		t.Fatalf("empty UpdateAgent: %+v, %v", same, err)
	}
}

// everyMethodSwitch disables a (twice), turns the account's AI answers on,
// finds a disabled agent cannot be asked, and enables a again.
func everyMethodSwitch(t *testing.T, ctx context.Context, f *fixture, c tclient, a client.Agent) {
	t.Helper()
	off, err := c.DisableAgent(ctx, a.ID)
	if err != nil || off.Enabled {
		t.Fatalf("DisableAgent: %+v, %v", off, err)
	}
	if again, err := c.SetEnabled(ctx, a.ID, false); err != nil || again.Enabled {
		t.Fatalf("SetEnabled(false) twice: %+v, %v", again, err)
	}
	// A disabled agent cannot be asked: 409 immutable_state (after the feature check).
	if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	_, err = c.Ask(ctx, a.ID, client.Question{Question: "hello?"})
	wantAPIError(t, err, 409, client.CodeImmutableState)
	on, err := c.EnableAgent(ctx, a.ID)
	if err != nil || !on.Enabled {
		t.Fatalf("EnableAgent: %+v, %v", on, err)
	}
}

// everyMethodAsk asks a twice in one conversation, with its stats before
// and after, then in an unknown conversation.
func everyMethodAsk(t *testing.T, ctx context.Context, f *fixture, c tclient, a client.Agent) {
	t.Helper()
	st, err := c.AgentStats(ctx, a.ID)
	if err != nil || st.AgentID != a.ID || st.QuestionsTotal != 0 || st.LastQuestionAt != nil || st.AverageAnswerMS != nil {
		t.Fatalf("AgentStats before asking: %+v, %v", st, err)
	}
	ans, err := c.Ask(ctx, a.ID, client.Question{Question: "What is 2+2?"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ans.ID, "qst_") || ans.ConversationID == "" || ans.Question != "What is 2+2?" ||
		ans.Answer != "echo: What is 2+2?" || !ans.CreatedAt.Equal(f.clock.Now()) {
		t.Fatalf("Ask: %+v", ans)
	}
	ans2, err := c.Ask(ctx, a.ID, client.Question{Question: "And 3+3?", ConversationID: ans.ConversationID})
	if err != nil || ans2.ConversationID != ans.ConversationID || ans2.ID == ans.ID {
		t.Fatalf("Ask in a conversation: %+v, %v", ans2, err)
	}
	st, err = c.AgentStats(ctx, a.ID)
	if err != nil || st.QuestionsTotal != 2 || st.AnsweredTotal != 2 || st.ConversationsTotal != 1 ||
		st.LastQuestionAt == nil || st.AverageAnswerMS == nil {
		t.Fatalf("AgentStats after asking: %+v, %v", st, err)
	}
	if _, err := c.Ask(ctx, a.ID, client.Question{Question: "x", ConversationID: "conv_nope"}); err != nil {
		wantAPIError(t, err, 404, client.CodeNotFound)
	} else {
		t.Fatal("unknown conversation accepted")
	}
}

// Every error of the contract that the typed client can meet reaches the
// caller as *client.Error, after exactly one request (none of them is
// retried).
func TestErrorsAreTypedAndNotRetried(t *testing.T) {
	f := newFixture(t, withModel(t, llmtest.Echo))
	ctx := context.Background()
	admin := f.key(nil, allScopes...).Credential
	ca := f.client(admin)
	first, err := ca.CreateAgent(ctx, client.NewAgent{Name: "Helpdesk"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := ca.CreateAgent(ctx, client.NewAgent{Name: "Second"})
	if err != nil {
		t.Fatal(err)
	}
	readOnly := f.key(nil, domain.ScopeAgentsRead).Credential
	restricted := f.key(func(p *keys.CreateParams) { p.AgentIDs = []string{first.ID} }, allScopes...).Credential
	revoked := f.key(nil, allScopes...)
	if err := f.keys.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	unknown, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	otherAcct, otherOwner, err := f.newAccount("Other")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := f.mint(otherAcct, otherOwner, nil, allScopes...)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := f.client(otherKey.Credential).CreateAgent(ctx, client.NewAgent{Name: "Theirs"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 201)

	for _, c := range []errorsTypedCase{
		{name: "blank name", key: admin, status: 400, code: client.CodeInvalidValue, fields: []string{"name:invalid_value"},
			call: func(c *client.Client) error { _, err := c.CreateAgent(ctx, client.NewAgent{Name: "   "}); return err }},
		{name: "name too long", key: admin, status: 400, code: client.CodeInvalidValue, fields: []string{"name:invalid_value"},
			call: func(c *client.Client) error { _, err := c.CreateAgent(ctx, client.NewAgent{Name: long}); return err }},
		{name: "blank question", key: admin, status: 400, code: client.CodeInvalidValue, fields: []string{"question:invalid_value"},
			call: func(c *client.Client) error {
				_, err := c.Ask(ctx, first.ID, client.Question{Question: " "})
				return err
			}},
		{name: "forged cursor", key: admin, status: 400, code: client.CodeInvalidValue, fields: []string{"next:invalid_value"},
			call: func(c *client.Client) error {
				_, err := c.ListAgents(ctx, client.ListOptions{Next: "bm90IGEgY3Vyc29y"})
				return err
			}},
		{name: "unknown key", key: unknown.Text, status: 401, code: client.CodeInvalidCredentials,
			call:  func(c *client.Client) error { _, err := c.Me(ctx); return err },
			check: func(t *testing.T, e *client.Error) { wantText(t, e.Message, "invalid") }},
		{name: "revoked key", key: revoked.Credential, status: 401, code: client.CodeInvalidCredentials,
			call: func(c *client.Client) error { _, err := c.Me(ctx); return err }},
		{name: "missing scope", key: readOnly, status: 403, code: client.CodeAccessDenied,
			call:  func(c *client.Client) error { _, err := c.CreateAgent(ctx, client.NewAgent{Name: "x"}); return err },
			check: func(t *testing.T, e *client.Error) { wantText(t, e.Message, "aiagents:write") }},
		{name: "missing query scope", key: readOnly, status: 403, code: client.CodeAccessDenied,
			call: func(c *client.Client) error {
				_, err := c.Ask(ctx, first.ID, client.Question{Question: "hi"})
				return err
			},
			check: func(t *testing.T, e *client.Error) { wantText(t, e.Message, "aiagents:query") }},
		{name: "restricted key, other agent", key: restricted, status: 403, code: client.CodeAccessDenied,
			call: func(c *client.Client) error { _, err := c.GetAgent(ctx, second.ID); return err }},
		{name: "feature off", key: admin, status: 403, code: client.CodeFeatureNotEnabled,
			call: func(c *client.Client) error {
				_, err := c.Ask(ctx, first.ID, client.Question{Question: "hi"})
				return err
			}},
		{name: "unknown agent", key: admin, status: 404, code: client.CodeNotFound,
			call: func(c *client.Client) error { _, err := c.GetAgent(ctx, "agt_nope"); return err }},
		{name: "another account's agent", key: admin, status: 404, code: client.CodeNotFound,
			call: func(c *client.Client) error { _, err := c.AgentStats(ctx, foreign.ID); return err }},
		{name: "id with a slash stays one segment", key: admin, status: 404, code: client.CodeNotFound,
			call: func(c *client.Client) error { _, err := c.DisableAgent(ctx, first.ID+"/x"); return err }},
		{name: "duplicate name", key: admin, status: 409, code: client.CodeDuplicateValue, fields: []string{"name:duplicate_value"},
			call: func(c *client.Client) error {
				_, err := c.CreateAgent(ctx, client.NewAgent{Name: " HELPDESK "})
				return err
			},
			check: errorsTypedExistingIs(first.ID)},
		{name: "rename onto a taken name", key: admin, status: 409, code: client.CodeDuplicateValue, fields: []string{"name:duplicate_value"},
			call: func(c *client.Client) error {
				n := "helpdesk"
				_, err := c.UpdateAgent(ctx, second.ID, client.AgentUpdate{Name: &n})
				return err
			},
			check: errorsTypedExistingIs(first.ID)},
	} {
		t.Run(c.name, func(t *testing.T) {
			errorsTypedRun(t, f, c)
		})
	}
	if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Ask(ctx, first.ID, client.Question{Question: "now?"}); err != nil {
		t.Fatalf("Ask once the feature is on: %v", err)
	}
}

// errorsTypedCase is one error of TestErrorsAreTypedAndNotRetried: the call
// made with key, and the error it must meet.
type errorsTypedCase struct {
	name   string
	key    string
	call   func(c *client.Client) error
	status int
	code   string
	fields []string
	check  func(t *testing.T, e *client.Error)
}

// errorsTypedRun makes c's call with a fresh client on c.key and checks the
// *client.Error: its status, code and fields, request id and rate-limit
// headers, no key in its text, c.check, one request and no sleep.
func errorsTypedRun(t *testing.T, f *fixture, c errorsTypedCase) {
	t.Helper()
	tc := f.client(c.key)
	err := c.call(tc.Client)
	e := wantAPIError(t, err, c.status, c.code, c.fields...)
	if e.RequestID == "" {
		t.Errorf("no request id: %+v", e)
	}
	if e.RateLimit.Limit == 0 || e.RateLimit.Reset.IsZero() {
		t.Errorf("no rate-limit headers: %+v", e.RateLimit)
	}
	if c.status != 409 && e.ExistingID != "" {
		t.Errorf("existing_id on %d", c.status)
	}
	if strings.Contains(err.Error(), c.key) || strings.Contains(err.Error(), c.key[22:]) {
		t.Fatalf("the error text shows the key")
	}
	if c.check != nil {
		c.check(t, e)
	}
	if n := tc.requests.count(); n != 1 {
		t.Fatalf("%d requests; %d is never retried", n, c.status)
	}
	if s := tc.sleeper.got(); len(s) != 0 {
		t.Fatalf("slept %v", s)
	}
}

// errorsTypedExistingIs is a check that the 409 names id as existing_id.
func errorsTypedExistingIs(id string) func(t *testing.T, e *client.Error) {
	return func(t *testing.T, e *client.Error) {
		t.Helper()
		if e.ExistingID != id {
			t.Fatalf("existing_id %q, want %q", e.ExistingID, id)
		}
	}
}

func wantText(t *testing.T, s, want string) {
	t.Helper()
	if !strings.Contains(s, want) {
		t.Fatalf("%q does not mention %q", s, want)
	}
}

func TestCreateAdoptsAnExistingAgent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.client(f.key(nil, allScopes...).Credential)
	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "Billing", Instructions: "first"})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	got, err := c.CreateAgent(ctx, client.NewAgent{Name: "billing ", Instructions: "second", AdoptExisting: true})
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if !got.Adopted || got.ID != a.ID || got.Name != "Billing" || got.Instructions != "first" {
		t.Fatalf("adopted %+v, want %+v", got, a)
	}
	// A fresh name with AdoptExisting is an ordinary create.
	fresh, err := c.CreateAgent(ctx, client.NewAgent{Name: "Sales", AdoptExisting: true})
	if err != nil || fresh.Adopted || fresh.ID == a.ID {
		t.Fatalf("fresh create with AdoptExisting: %+v, %v", fresh, err)
	}
	// Adopting needs aiagents:read to fetch the record; without it the
	// error is still the 409, whose ExistingID the caller can use, and it
	// says why the fetch failed.
	writeOnly := f.client(f.key(nil, domain.ScopeAgentsWrite).Credential)
	_, err = writeOnly.CreateAgent(ctx, client.NewAgent{Name: "Billing", AdoptExisting: true})
	if e := wantAPIError(t, err, 409, client.CodeDuplicateValue, "name:duplicate_value"); e.ExistingID != a.ID {
		t.Fatalf("ExistingID lost: %v", err)
	}
	wantText(t, err.Error(), "aiagents:read")
}

// The rate limiter's 429 is retried only after Retry-After, which the fake
// sleeper spends on the server's clock; a context that ends sooner gets
// the 429 at once.
func TestRateLimitRetriesAfterRetryAfter(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	key := f.key(func(p *keys.CreateParams) { p.RateLimit = 3 }, allScopes...).Credential
	c := f.client(key)
	for i := 0; i < 3; i++ {
		if _, err := c.Me(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	// Window: uses at 0 s, 1 s, 2 s; now 3 s. The oldest leaves at 60 s.
	me, err := c.Me(ctx)
	if err != nil {
		t.Fatalf("Me after the ceiling: %v", err)
	}
	if s := c.sleeper.got(); len(s) != 1 || s[0] != 57*time.Second {
		t.Fatalf("sleeps %v, want [57s] (Retry-After)", s)
	}
	if c.requests.count() != 5 || me.RateLimitPerMinute != 3 {
		t.Fatalf("%d requests, key %+v", c.requests.count(), me)
	}

	// Full again (uses at 1 s, 2 s and 60 s; now 60 s, so Retry-After is
	// 1 s): a deadline sooner than Retry-After answers now.
	short, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Me(short)
	e := wantAPIError(t, err, 429, client.CodeRateLimitExceeded)
	// Waiting would take the whole 900 ms; answering now takes a round trip.
	if e.RetryAfter != time.Second || time.Since(start) > 800*time.Millisecond {
		t.Fatalf("Retry-After %v, took %v", e.RetryAfter, time.Since(start))
	}
	if e.RateLimit.Limit != 3 || e.RateLimit.Remaining != 0 {
		t.Fatalf("rate limit %+v", e.RateLimit)
	}
	if e.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", e.StatusCode)
	}
	if s := c.sleeper.got(); len(s) != 1 {
		t.Fatalf("slept %v with a deadline sooner than Retry-After", s)
	}

	// MaxAttempts 1: no retry at all.
	one := f.client(key, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	_, err = one.Me(ctx)
	wantAPIError(t, err, 429, client.CodeRateLimitExceeded)
	if one.requests.count() != 1 || len(one.sleeper.got()) != 0 {
		t.Fatalf("MaxAttempts 1: %d requests, sleeps %v", one.requests.count(), one.sleeper.got())
	}

	// A Retry-After longer than MaxRetryAfter is returned, not waited out.
	impatient := f.client(key, client.WithRetry(client.RetryPolicy{MaxRetryAfter: time.Millisecond}))
	_, err = impatient.Me(ctx)
	wantAPIError(t, err, 429, client.CodeRateLimitExceeded)
	if impatient.requests.count() != 1 || len(impatient.sleeper.got()) != 0 {
		t.Fatalf("MaxRetryAfter: %d requests, sleeps %v", impatient.requests.count(), impatient.sleeper.got())
	}

	// Refused requests are not counted, so a patient client gets through.
	if _, err := c.Me(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAgentsFollowsEveryPage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.client(f.key(nil, allScopes...).Credential)
	want := agentsEveryPageSeed(t, ctx, f, c)
	for _, tc := range []struct {
		limit, pages int
		want         []string
	}{
		{limit: 3, pages: 3, want: want},    // 3 + 3 + 1
		{limit: 7, pages: 1, want: want},    // an exact fit is one page: has_more is false
		{limit: 2, pages: 4, want: want},    // 2 + 2 + 2 + 1
		{limit: 0, pages: 1, want: want},    // the server's default, 30
		{limit: 1000, pages: 1, want: want}, // clamped to 100
	} {
		t.Run(fmt.Sprint("limit ", tc.limit), func(t *testing.T) {
			agentsEveryPageFollow(t, ctx, c, tc.limit, tc.pages, tc.want)
		})
	}

	agentsEveryPageMeta(t, ctx, c, want)
	agentsEveryPageBreak(t, ctx, c)
	agentsEveryPageUpdatedSince(t, ctx, f, c, want)
	agentsEveryPageError(t, ctx, f)
}

// agentsEveryPageSeed creates seven agents a second apart and returns
// their ids in creation order.
func agentsEveryPageSeed(t *testing.T, ctx context.Context, f *fixture, c tclient) []string {
	t.Helper()
	var want []string
	for i := 0; i < 7; i++ {
		a, err := c.CreateAgent(ctx, client.NewAgent{Name: fmt.Sprintf("agent %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, a.ID)
		f.clock.Advance(time.Second)
	}
	return want
}

// agentsEveryPageFollow lists every agent with Agents at limit and wants
// the ids in want, as list items, fetched in pages requests.
func agentsEveryPageFollow(t *testing.T, ctx context.Context, c tclient, limit, pages int, want []string) {
	t.Helper()
	before := c.requests.count()
	var got []string
	for a, err := range c.Agents(ctx, client.ListOptions{Limit: limit}) {
		if err != nil {
			t.Fatal(err)
		}
		if a.Name == "" || a.CreatedAt.IsZero() || !a.Enabled || a.Instructions != "" || !a.UpdatedAt.IsZero() {
			t.Fatalf("list item %+v", a)
		}
		got = append(got, a.ID)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	if n := c.requests.count() - before; n != pages {
		t.Fatalf("%d requests, want %d pages", n, pages)
	}
}

// agentsEveryPageMeta: ListAgents gives each page's meta as the server
// sent it.
func agentsEveryPageMeta(t *testing.T, ctx context.Context, c tclient, want []string) {
	t.Helper()
	// Page-level: meta as the server sent it.
	p, err := c.ListAgents(ctx, client.ListOptions{Limit: 1000})
	if err != nil || p.Limit != 100 || p.HasMore || p.Next != "" || len(p.Agents) != 7 || p.RateLimit.Limit != 120 {
		t.Fatalf("page %+v, %v", p, err)
	}
	p, err = c.ListAgents(ctx, client.ListOptions{Limit: 5})
	if err != nil || p.Limit != 5 || !p.HasMore || p.Next == "" || len(p.Agents) != 5 {
		t.Fatalf("first page %+v, %v", p, err)
	}
	p, err = c.ListAgents(ctx, client.ListOptions{Limit: 5, Next: p.Next})
	if err != nil || p.HasMore || len(p.Agents) != 2 || p.Agents[1].ID != want[6] {
		t.Fatalf("second page %+v, %v", p, err)
	}
}

// agentsEveryPageBreak: breaking out of the loop stops fetching.
func agentsEveryPageBreak(t *testing.T, ctx context.Context, c tclient) {
	t.Helper()
	before := c.requests.count()
	for range c.Agents(ctx, client.ListOptions{Limit: 2}) {
		break
	}
	if n := c.requests.count() - before; n != 1 {
		t.Fatalf("break after one item: %d requests", n)
	}
}

// agentsEveryPageUpdatedSince changes two agents a minute later and lists
// the agents changed at or after that time.
func agentsEveryPageUpdatedSince(t *testing.T, ctx context.Context, f *fixture, c tclient, want []string) {
	t.Helper()
	// updated_since: agents changed at or after the time.
	f.clock.Advance(time.Minute)
	since := f.clock.Now()
	instr := "changed"
	if _, err := c.UpdateAgent(ctx, want[2], client.AgentUpdate{Instructions: &instr}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DisableAgent(ctx, want[5]); err != nil {
		t.Fatal(err)
	}
	var got []string
	for a, err := range c.Agents(ctx, client.ListOptions{Limit: 1, UpdatedSince: since.In(time.FixedZone("CET", 3600))}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.ID)
	}
	if strings.Join(got, ",") != want[2]+","+want[5] {
		t.Fatalf("updated_since: %v, want %v", got, []string{want[2], want[5]})
	}
}

// agentsEveryPageError: an error ends the iteration after being yielded
// once.
func agentsEveryPageError(t *testing.T, ctx context.Context, f *fixture) {
	t.Helper()
	noRead := f.client(f.key(nil, domain.ScopeAgentsWrite).Credential)
	n := 0
	for a, err := range noRead.Agents(ctx, client.ListOptions{}) {
		n++
		if a.ID != "" {
			t.Fatalf("item with the error: %+v", a)
		}
		wantAPIError(t, err, 403, client.CodeAccessDenied)
	}
	if n != 1 {
		t.Fatalf("error yielded %d times", n)
	}
}

// A client that reads AGENTAPI_KEY from a file or environment may get a
// trailing newline; New refuses it rather than send a malformed header,
// and never shows the key while doing so.
func TestNewChecksTheKeyWithoutShowingIt(t *testing.T) {
	f := newFixture(t)
	good := f.key(nil, domain.ScopeAgentsRead).Credential
	last := good[len(good)-1]
	flipped := good[:len(good)-1] + string(rune(map[bool]byte{true: 'A', false: 'B'}[last != 'A']))
	for name, k := range map[string]string{
		"empty":            "",
		"trailing newline": good + "\n",
		"leading space":    " " + good,
		"bearer prefix":    "Bearer " + good,
		"checksum":         flipped,
		"truncated":        good[:len(good)-1],
		"wrong tag":        "agx" + good[3:],
		"env":              strings.Replace(good, "_live_", "_prod_", 1),
		"upper prefix":     good[:9] + strings.ToUpper(good[9:21]) + good[21:],
	} {
		t.Run(name, func(t *testing.T) {
			c, err := client.New(f.URL, k)
			if err == nil || c != nil {
				t.Fatalf("accepted: %v", c)
			}
			if k != "" && strings.Contains(err.Error(), strings.TrimSpace(k)[22:]) {
				t.Fatalf("error shows the key: %v", err)
			}
		})
	}
	if _, err := client.New(f.URL, good); err != nil {
		t.Fatalf("a minted key is refused: %v", err)
	}
	if _, err := client.New(f.URL, strings.Replace(good, "_live_", "_test_", 1)); err == nil {
		t.Fatal("env changed under the checksum is accepted")
	}
}

func TestNewChecksTheBaseURL(t *testing.T) {
	key, err := credential.Generate(domain.EnvTest)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url  string
		opts []client.Option
		ok   bool
	}{
		{url: "https://api.example.com/v1", ok: true},
		{url: "https://api.example.com/v1/", ok: true},
		{url: "https://api.example.com/prefix/v1", ok: true},
		{url: "http://127.0.0.1:8080/v1", ok: true},
		{url: "http://localhost:8080/v1", ok: true},
		{url: "http://[::1]:8080/v1", ok: true},
		{url: "http://api.example.com/v1"},
		{url: "http://10.0.0.5/v1"},
		{url: "http://api.example.com/v1", opts: []client.Option{client.WithInsecureHTTP()}, ok: true},
		{url: "https://api.example.com"},
		{url: "https://api.example.com/v2"},
		{url: "ftp://api.example.com/v1"},
		{url: "https://user:pw@api.example.com/v1"},
		{url: "https://api.example.com/v1?api_key=x"},
		{url: "/v1"},
		{url: "://"},
	} {
		_, err := client.New(c.url, key.Text, c.opts...)
		if (err == nil) != c.ok {
			t.Errorf("New(%q): %v, want ok=%v", c.url, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows the URL's password: %v", err)
		}
	}
}

// errors.As works through wrapping, as callers wrap.
func TestErrorUnwraps(t *testing.T) {
	f := newFixture(t)
	c := f.client(f.key(nil, domain.ScopeAgentsRead).Credential)
	_, err := c.GetAgent(context.Background(), "agt_nope")
	wrapped := fmt.Errorf("sync agents: %w", err)
	var e *client.Error
	if !errors.As(wrapped, &e) || e.StatusCode != http.StatusNotFound || !client.IsCode(wrapped, client.CodeNotFound) ||
		client.IsCode(wrapped, client.CodeAccessDenied) || client.IsCode(nil, client.CodeNotFound) {
		t.Fatalf("wrapped: %v", wrapped)
	}
	if !strings.Contains(e.Error(), "404 not_found") || !strings.Contains(e.Error(), e.RequestID) {
		t.Fatalf("Error(): %q", e.Error())
	}
	if _, err := c.GetAgent(context.Background(), ""); err == nil || IsAPIError(err) {
		t.Fatalf("empty id: %v", err)
	}
}

func IsAPIError(err error) bool {
	var e *client.Error
	return errors.As(err, &e)
}

// One Client serves many goroutines (go test -race checks the sharing).
func TestConcurrentUse(t *testing.T) {
	f := newFixture(t)
	c := f.client(f.key(nil, allScopes...).Credential)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if _, err := c.CreateAgent(ctx, client.NewAgent{Name: fmt.Sprintf("w%d-%d", i, j)}); err != nil {
					errs <- err
				}
				if _, err := c.Me(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	for _, err := range c.Agents(ctx, client.ListOptions{Limit: 7}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 40 {
		t.Fatalf("listed %d agents, want 40", n)
	}
}
