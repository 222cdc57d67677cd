package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// TestServeStreamingIdempotencyAndCORS drives the built binary, as a user
// would, through issue 18's three behaviours: a streamed answer fed by the
// model's own stream, an Idempotency-Key replay that makes no second agent
// or model call, and CORS on /v1 (a preflight and the exposed fields).
func TestServeStreamingIdempotencyAndCORS(t *testing.T) {
	peer := llmtest.NewServer(t, llmtest.Echo)
	db := filepath.Join(t.TempDir(), "r11.db")
	acct := strings.TrimSpace(mustCLI(t, db, "", "account", "create", "--name", "Acme"))
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "owner@acme.test", "--role", "owner")
	mustCLI(t, db, "", "account", "feature", "--enable", "ai-answers", acct)
	var k struct{ Credential string }
	out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "owner@acme.test", "--name", "e2e", "--preset", "full-access", "--json")
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, []string{"AGENTAPI_LLM_API_KEY=sk-e2e"}, "--db", db, "--llm-url", peer.URL, "--llm-model", "m")

	// CORS: a preflight without a key, then the fields on a real answer.
	release11CheckPreflight(t, s.base)

	// Idempotency-Key: the same create twice makes one agent; the second
	// is the saved answer, marked.
	agent := release11CheckCreateTwice(t, s.base, k.Credential)

	// A streamed question: the events in order, fed by the model's stream.
	release11CheckStreamedQuestion(t, s.base, k.Credential, agent, peer)
}

// release11CheckPreflight: an OPTIONS preflight without a key is answered
// 204 with the CORS fields, Idempotency-Key allowed, no credentials.
func release11CheckPreflight(t *testing.T, base string) {
	t.Helper()
	pre, _ := http.NewRequest("OPTIONS", base+"/v1/ai-agents", nil)
	pre.Header.Set("Origin", "http://tool.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Idempotency-Key") ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// release11Create creates the agent Helpdesk with Idempotency-Key
// create-helpdesk-1, from a CORS origin.
func release11Create(t *testing.T, base, cred string) (int, map[string]any, http.Header) {
	t.Helper()
	return callWith(t, "POST", base+"/v1/ai-agents", cred, `{"name":"Helpdesk","instructions":"Be brief."}`,
		map[string]string{"Idempotency-Key": "create-helpdesk-1", "Origin": "http://tool.example"})
}

// release11CheckCreateTwice: the same create twice answers 201 twice, the
// second a marked replay of the same agent with the CORS fields, and one
// agent is listed. It returns the agent's id.
func release11CheckCreateTwice(t *testing.T, base, cred string) string {
	t.Helper()
	code1, first, h1 := release11Create(t, base, cred)
	code2, second, h2 := release11Create(t, base, cred)
	if code1 != 201 || code2 != 201 || h1.Get("Idempotent-Replayed") != "" || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("create twice: %d %s / %d %s", code1, h1.Get("Idempotent-Replayed"), code2, h2.Get("Idempotent-Replayed"))
	}
	agent := first["data"].(map[string]any)["id"].(string)
	if second["data"].(map[string]any)["id"] != agent || h2.Get("Location") != h1.Get("Location") {
		t.Fatalf("the replay is another agent: %v vs %v", second, first)
	}
	if h1.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h1.Get("Access-Control-Expose-Headers"), "Idempotent-Replayed") {
		t.Fatalf("CORS fields on the create: %v", h1)
	}
	code, list, _ := call(t, "GET", base+"/v1/ai-agents", cred, "")
	if n := len(list["data"].([]any)); code != 200 || n != 1 {
		t.Fatalf("agents after two creates with one key: %d %d", code, n)
	}
	return agent
}

// release11Ask asks agent a streamed question with Idempotency-Key ask-1
// and returns the answer (body read) and its event names in order.
func release11Ask(t *testing.T, base, cred, agent string) (*http.Response, []string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/ai-agents/"+agent+"/questions", strings.NewReader(`{"question":"hello there","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ask-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
	}
	return resp, events
}

// release11CheckStreamedQuestion: the streamed answer's events come in
// order from one streamed model call, and the same question again is the
// saved answer with no second model call.
func release11CheckStreamedQuestion(t *testing.T, base, cred, agent string, peer *llmtest.Server) {
	t.Helper()
	resp, events := release11Ask(t, base, cred, agent)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("streamed question: %d %v", resp.StatusCode, resp.Header)
	}
	release11CheckEvents(t, events)
	reqs := peer.Requests()
	if len(reqs) != 1 || !reqs[0].Stream {
		t.Fatalf("the model was asked %d times (stream %v), want once, streamed", len(reqs), len(reqs) > 0 && reqs[0].Stream)
	}
	// The same question again with the same key: the saved answer, and no
	// second model call.
	resp, events = release11Ask(t, base, cred, agent)
	if resp.Header.Get("Idempotent-Replayed") != "true" || strings.Join(events, ",") != "question.created,answer.delta,answer.completed" {
		t.Fatalf("replayed stream: %v %v", resp.Header, events)
	}
	if n := len(peer.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times after the replay, want 1", n)
	}
}

// release11CheckEvents: question.created, then answer.delta events only,
// then answer.completed.
func release11CheckEvents(t *testing.T, events []string) {
	t.Helper()
	if len(events) < 3 || events[0] != "question.created" || events[len(events)-1] != "answer.completed" {
		t.Fatalf("events %v", events)
	}
	for _, e := range events[1 : len(events)-1] {
		if e != "answer.delta" {
			t.Fatalf("events %v", events)
		}
	}
}
