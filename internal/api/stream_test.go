package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/wire"
)

// sseEvent is one server-sent event, or a comment (name "", comment set).
type sseEvent struct{ name, data, comment string }

// nextEvent reads one event or comment block.
func nextEvent(t *testing.T, br *bufio.Reader) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v (so far %+v)", err, ev)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// streamFixture is a fixture served over a real loopback server, with the
// ai-answers feature on, an agent and a query key.
type streamFixture struct {
	*fixture
	srv   *httptest.Server
	peer  *llmtest.Server
	agent string
	key   string
}

func newStreamFixture(t *testing.T, keepAlive time.Duration, reply func(llmtest.Request) (int, string)) *streamFixture {
	t.Helper()
	peer := llmtest.NewServer(t, reply)
	// No model timeout to speak of: only the client leaving may end a
	// model that waits (TestStreamClientGoneCancelsTheModel).
	model, err := llm.New(llm.Config{BaseURL: peer.URL, Model: "test-model", APIKey: "sk-provider-secret", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "sqlite", func(c *Config) { c.LLM = model; c.StreamKeepAlive = keepAlive })
	if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	admin := f.key(allAgentScopes...)
	sf := &streamFixture{fixture: f, peer: peer, agent: f.createAgent(admin, "Helpdesk"), key: admin}
	sf.srv = httptest.NewServer(f.h)
	t.Cleanup(sf.srv.Close)
	return sf
}

// ask posts a streamed question and returns the response and its reader.
func (sf *streamFixture) ask(t *testing.T, ctx context.Context, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	hr, err := http.NewRequestWithContext(ctx, "POST", sf.srv.URL+"/v1/ai-agents/"+sf.agent+"/questions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+sf.key)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

func (sf *streamFixture) stats(t *testing.T) map[string]any {
	t.Helper()
	r := sf.get("/v1/ai-agents/"+sf.agent+"/stats", sf.key)
	r.wantStatus(t, 200)
	return r.data()
}

func TestStreamedAnswer(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, llmtest.Echo)
	resp, br := sf.ask(t, context.Background(), `{"question":"What is 2+2?","stream":true}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	ev := nextEvent(t, br)
	var created struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversation_id"`
		CreatedAt      string `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(ev.data), &created); ev.name != "question.created" || err != nil ||
		!strings.HasPrefix(created.ID, "qst_") || !strings.HasPrefix(created.ConversationID, "conv_") || created.CreatedAt != "2026-11-22T12:00:00.000Z" {
		t.Fatalf("first event %+v", ev)
	}
	var text strings.Builder
	for ev = nextEvent(t, br); ev.name == "answer.delta"; ev = nextEvent(t, br) {
		var d struct{ Delta string }
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Delta)
	}
	if text.String() != "echo: What is 2+2?" || ev.name != "answer.completed" {
		t.Fatalf("deltas %q then %+v", text.String(), ev)
	}
	var done struct{ Data wire.Answer }
	if err := json.Unmarshal([]byte(ev.data), &done); err != nil || done.Data.ID != created.ID || done.Data.ConversationID != created.ConversationID || done.Data.Answer != "echo: What is 2+2?" ||
		done.Data.Question != "What is 2+2?" {
		t.Fatalf("completed %s", ev.data)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("more after answer.completed: %v", err)
	}
	if reqs := sf.peer.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Fatalf("model asked %+v", reqs)
	}
	if s := sf.stats(t); s["answered_total"] != float64(1) || s["failed_total"] != float64(0) {
		t.Fatalf("stats %v", s)
	}
}

func TestStreamValidation(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, llmtest.Echo)
	path := "/v1/ai-agents/" + sf.agent + "/questions"
	for _, v := range []string{`null`, `"true"`, `1`, `{}`} {
		sf.send("POST", path, sf.key, `{"question":"x","stream":`+v+`}`).wantError(t, 400, domain.CodeInvalidValue, "stream:invalid_value")
	}
	sf.send("POST", path, sf.key, `{"question":"x","stream":false}`).wantStatus(t, 201)
	// A refusal before the stream is the usual JSON error.
	sf.send("POST", "/v1/ai-agents/agt_none/questions", sf.key, `{"question":"x","stream":true}`).wantError(t, 404, domain.CodeNotFound)
}

// The first delta reaches the client while the model is still thinking:
// the model blocks after its first token until the test has read it.
func TestStreamSendsTokensAsTheyCome(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, nil)
	release := make(chan struct{})
	sf.peer.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("first ")
		select {
		case <-release:
		case <-r.Context.Done():
			return
		}
		send("second")
	})
	_, br := sf.ask(t, context.Background(), `{"question":"q","stream":true}`)
	nextEvent(t, br) // question.created
	if ev := nextEvent(t, br); ev.name != "answer.delta" || ev.data != `{"delta":"first "}` {
		t.Fatalf("got %+v", ev)
	}
	close(release) // only now may the model finish
	if ev := nextEvent(t, br); ev.data != `{"delta":"second"}` {
		t.Fatalf("got %+v", ev)
	}
	if ev := nextEvent(t, br); ev.name != "answer.completed" {
		t.Fatalf("got %+v", ev)
	}
}

func TestStreamKeepAlive(t *testing.T) {
	sf := newStreamFixture(t, time.Millisecond, nil)
	release := make(chan struct{})
	sf.peer.StreamWith(func(r llmtest.Request, send func(string) bool) {
		select {
		case <-release:
		case <-r.Context.Done():
			return
		}
		send("late")
	})
	_, br := sf.ask(t, context.Background(), `{"question":"q","stream":true}`)
	nextEvent(t, br) // question.created
	if ev := nextEvent(t, br); ev.comment != "keep-alive" || ev.name != "" {
		t.Fatalf("got %+v", ev)
	}
	close(release)
	for ev := nextEvent(t, br); ev.name != "answer.completed"; ev = nextEvent(t, br) {
		if ev.comment == "" && ev.name != "answer.delta" {
			t.Fatalf("got %+v", ev)
		}
	}
}

func TestStreamModelFailure(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, func(llmtest.Request) (int, string) { return 503, `{"error":{"message":"sk-provider-secret"}}` })
	_, br := sf.ask(t, context.Background(), `{"question":"q","stream":true}`)
	if ev := nextEvent(t, br); ev.name != "question.created" {
		t.Fatalf("got %+v", ev)
	}
	ev := nextEvent(t, br)
	if ev.name != "error" || !strings.Contains(ev.data, `"code":"server_error"`) || strings.Contains(ev.data, "sk-provider") {
		t.Fatalf("got %+v", ev)
	}
	if s := sf.stats(t); s["failed_total"] != float64(1) || s["answered_total"] != float64(0) {
		t.Fatalf("stats %v", s)
	}
}

func TestStreamClientGoneCancelsTheModel(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, nil)
	canceled := make(chan struct{})
	sf.peer.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("first ")
		<-r.Context.Done() // only the client leaving ends this model
		close(canceled)
	})
	ctx, cancel := context.WithCancel(context.Background())
	_, br := sf.ask(t, ctx, `{"question":"q","stream":true}`)
	nextEvent(t, br)
	nextEvent(t, br) // the first delta: the model is now waiting
	cancel()
	<-canceled
	sf.srv.Close() // waits for the handler, which records the question
	if s := sf.stats(t); s["failed_total"] != float64(1) || s["questions_total"] != float64(1) {
		t.Fatalf("stats %v", s)
	}
}
