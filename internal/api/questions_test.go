package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// withModel points the fixture at a loopback Chat Completions peer.
func withModel(t *testing.T, reply func(llmtest.Request) (int, string)) (func(*Config), *llmtest.Server) {
	t.Helper()
	peer := llmtest.NewServer(t, reply)
	client, err := llm.New(llm.Config{BaseURL: peer.URL, Model: "test-model", APIKey: "sk-provider-secret", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.LLM = client }, peer
}

func TestQuestions(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		opt, peer := withModel(t, llmtest.Echo)
		f := newFixture(t, engine, opt)
		ctx := context.Background()
		admin := f.key(allAgentScopes...)
		asker := f.keyIn(f.account, f.owner, nil, domain.ScopeAgentsRead, domain.ScopeAgentsQuery).Credential
		r := f.send("POST", "/v1/ai-agents", admin, `{"name":"Helpdesk","instructions":"You are terse."}`)
		id := r.data()["id"].(string)

		// Off until support switches the feature on.
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":"hi"}`).wantError(t, 403, domain.CodeFeatureNotEnabled)
		if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}

		r = f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":"What is 2+2?"}`)
		r.wantStatus(t, http.StatusCreated)
		conv := questionsWantFirstAnswer(t, r.data())
		f.clock.Advance(time.Second)
		r = f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":"And 3+3?","conversation_id":`+quote(conv)+`}`)
		r.wantStatus(t, 201)
		if r.data()["conversation_id"] != conv {
			t.Fatalf("continued conversation changed id: %v", r.data())
		}
		questionsWantModelRequests(t, peer)

		// Errors: unknown conversation, other agent's conversation, bad bodies.
		other := f.createAgent(admin, "Other")
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":"x","conversation_id":"conv_nope"}`).wantError(t, 404, domain.CodeNotFound)
		f.send("POST", "/v1/ai-agents/"+other+"/questions", asker, `{"question":"x","conversation_id":`+quote(conv)+`}`).wantError(t, 404, domain.CodeNotFound)
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{}`).wantError(t, 400, domain.CodeMissingField, "question:missing_field")
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":" "}`).wantError(t, 400, domain.CodeInvalidValue, "question:invalid_value")
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":`+quote(strings.Repeat("q", domain.MaxQuestionLength+1))+`}`).wantError(t, 400, domain.CodeInvalidValue, "question:invalid_value")
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":true}`).wantError(t, 400, domain.CodeDatatypeMismatch, "question:datatype_mismatch")
		f.send("POST", "/v1/ai-agents/agt_none/questions", asker, `{"question":"x"}`).wantError(t, 404, domain.CodeNotFound)

		// Stats are exact.
		questionsWantStats(t, f, asker, id, other)

		// A disabled agent cannot be asked, and keeps its history.
		f.send("PUT", "/v1/ai-agents/"+id+"/enabled", admin, `{"enabled":false}`).wantStatus(t, 200)
		f.send("POST", "/v1/ai-agents/"+id+"/questions", asker, `{"question":"still there?"}`).wantError(t, 409, domain.CodeImmutableState)
		if turns, err := f.st.ConversationTurns(ctx, f.account.ID, id, conv); err != nil || len(turns) != 2 {
			t.Fatalf("history after disable: %v %v", turns, err)
		}

		// A key restricted to other agents is refused; the feature switch turns it off again.
		restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{other} }, allAgentScopes...).Credential
		f.send("POST", "/v1/ai-agents/"+id+"/questions", restricted, `{"question":"x"}`).wantError(t, 403, domain.CodeAccessDenied)
		if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, false); err != nil {
			t.Fatal(err)
		}
		f.send("POST", "/v1/ai-agents/"+other+"/questions", restricted, `{"question":"x"}`).wantError(t, 403, domain.CodeFeatureNotEnabled)
	})
}

// questionsWantFirstAnswer checks the answer to the first question and
// returns its conversation's id.
func questionsWantFirstAnswer(t *testing.T, a map[string]any) string {
	t.Helper()
	conv := a["conversation_id"].(string)
	if a["question"] != "What is 2+2?" || a["answer"] != "echo: What is 2+2?" || conv == "" || a["created_at"] == nil {
		t.Fatalf("answer %v", a)
	}
	for _, k := range []string{"id", "conversation_id", "question", "answer", "created_at", "answer_ms"} {
		if _, ok := a[k]; !ok {
			t.Fatalf("answer lacks %s: %v", k, a)
		}
	}
	return conv
}

// questionsWantModelRequests checks that the model got two requests, the
// second carrying the model, the provider's key and the whole conversation.
func questionsWantModelRequests(t *testing.T, peer *llmtest.Server) {
	t.Helper()
	reqs := peer.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests", len(reqs))
	}
	got := reqs[1]
	if got.Model != "test-model" || got.Authorization != "Bearer sk-provider-secret" {
		t.Fatalf("model request %+v", got)
	}
	want := []llm.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "What is 2+2?"},
		{Role: "assistant", Content: "echo: What is 2+2?"},
		{Role: "user", Content: "And 3+3?"},
	}
	if fmt.Sprint(got.Messages) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", got.Messages, want)
	}
}

// questionsWantStats checks the exact stats of the agent asked twice (id)
// and of one never asked (other).
func questionsWantStats(t *testing.T, f *fixture, asker, id, other string) {
	t.Helper()
	r := f.get("/v1/ai-agents/"+id+"/stats", asker)
	r.wantStatus(t, 200)
	s := r.data()
	if s["agent_id"] != id || s["questions_total"] != float64(2) || s["answered_total"] != float64(2) ||
		s["failed_total"] != float64(0) || s["conversations_total"] != float64(1) ||
		s["last_question_at"] != "2026-11-22T12:00:01.000Z" || s["average_answer_ms"] == nil {
		t.Fatalf("stats %v", s)
	}
	fresh := f.get("/v1/ai-agents/"+other+"/stats", asker).data()
	if fresh["questions_total"] != float64(0) || fresh["last_question_at"] != nil || fresh["average_answer_ms"] != nil {
		t.Fatalf("fresh stats %v", fresh)
	}
}

func TestQuestionWithoutModelIsFeatureNotEnabled(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "x")
	// A server without a model is self-hosted: whether or not the account's
	// switch is on, its operator is told what to do, not to contact support.
	for _, on := range []bool{false, true} {
		if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, on); err != nil {
			t.Fatal(err)
		}
		r := f.send("POST", "/v1/ai-agents/"+id+"/questions", key, `{"question":"hi"}`)
		r.wantError(t, 403, domain.CodeFeatureNotEnabled)
		if m := r.message(); !strings.Contains(m, "--llm-url") || !strings.Contains(m, "agentapi account feature --enable ai-answers") || strings.Contains(m, "support") {
			t.Fatalf("no model, feature %v: message %q", on, m)
		}
	}
}

func TestModelFailuresAreServerErrorsWithoutLeaks(t *testing.T) {
	var mu sync.Mutex
	mode := "500"
	opt, _ := withModel(t, func(llmtest.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		switch mode {
		case "500":
			return 500, `{"error":{"message":"provider internals sk-provider-secret"}}`
		case "malformed":
			return 200, `{"choices":[{"message":`
		}
		return 200, `{"choices":[]}`
	})
	f := newFixture(t, "sqlite", opt)
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "Flaky")
	if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	for i, m := range []string{"500", "malformed", "empty"} {
		mu.Lock()
		mode = m
		mu.Unlock()
		r := f.send("POST", "/v1/ai-agents/"+id+"/questions", key, `{"question":"hello"}`)
		r.wantError(t, 500, domain.CodeServerError)
		if strings.Contains(r.Body.String(), "sk-provider") || strings.Contains(r.Body.String(), "internals") {
			t.Fatalf("provider text leaked: %s", r.Body.String())
		}
		s := f.get("/v1/ai-agents/"+id+"/stats", key).data()
		if s["failed_total"] != float64(i+1) || s["answered_total"] != float64(0) || s["questions_total"] != float64(i+1) {
			t.Fatalf("stats after %s: %v", m, s)
		}
	}
	if strings.Contains(f.logs.String(), "sk-provider-secret") {
		t.Fatal("the provider key reached the log")
	}
}

func TestGetAndPatchAgent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		id := f.createAgent(key, "Original")
		taken := f.createAgent(key, "Taken")
		f.clock.Advance(time.Second)
		r := f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":"Renamed","instructions":"Be brief."}`)
		r.wantStatus(t, 200)
		if d := r.data(); d["name"] != "Renamed" || d["instructions"] != "Be brief." || d["updated_at"] != "2026-11-22T12:00:01.000Z" || d["enabled"] != true {
			t.Fatalf("patched %v", d)
		}
		f.clock.Advance(time.Second)
		// An empty object, or the same values, change nothing.
		r = f.send("PATCH", "/v1/ai-agents/"+id, key, `{}`)
		r.wantStatus(t, 200)
		if r.data()["updated_at"] != "2026-11-22T12:00:01.000Z" {
			t.Fatalf("no-op moved updated_at: %v", r.data())
		}
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":"Renamed"}`).wantStatus(t, 200)
		g := f.get("/v1/ai-agents/"+id, key)
		g.wantStatus(t, 200)
		if g.data()["updated_at"] != "2026-11-22T12:00:01.000Z" || g.data()["name"] != "Renamed" {
			t.Fatalf("get %v", g.data())
		}
		// Renaming to another agent's name is a duplicate; case changes of its own name are fine.
		r = f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":"TAKEN"}`)
		r.wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
		if r.body["error"].(map[string]any)["existing_id"] != taken {
			t.Fatalf("existing_id: %s", r.Body.String())
		}
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":"RENAMED"}`).wantStatus(t, 200)
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"enabled":false}`).wantError(t, 400, domain.CodeInvalidField, "enabled:invalid_field")
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":""}`).wantError(t, 400, domain.CodeInvalidValue, "name:invalid_value")
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"instructions":7}`).wantError(t, 400, domain.CodeDatatypeMismatch, "instructions:datatype_mismatch")
		f.send("PATCH", "/v1/ai-agents/"+id, key, `{"instructions":`+quote(strings.Repeat("i", domain.MaxInstructionsLength+1))+`}`).wantError(t, 400, domain.CodeInvalidValue, "instructions:invalid_value")
		f.send("PATCH", "/v1/ai-agents/agt_none", key, `{"name":"x"}`).wantError(t, 404, domain.CodeNotFound)
		// Lists keep exactly the contract's four fields.
		for _, it := range f.get("/v1/ai-agents", key).body["data"].([]any) {
			if len(it.(map[string]any)) != 4 {
				t.Fatalf("list item %v", it)
			}
		}
	})
}
