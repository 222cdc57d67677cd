package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

const (
	testKey = "sk-test"
	// secret stands for anything a provider might echo into a body: the
	// prompt, the key, its own internals.
	secret = "sk-live-LEAKED-0123456789"
)

// patient is the client timeout of tests about anything but the timeout: a
// loaded machine may take seconds to move megabytes over loopback, and a
// hang is go test's -timeout to catch.
const patient = time.Hour

func newClient(t *testing.T, base, key string, timeout time.Duration) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: base, Model: "test-model", APIKey: key, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// peer starts a loopback HTTP server running h and closes it when the test ends.
func peer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func answer(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, llmtest.Answer(content))
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  llm.Config
		ok   bool
	}{
		{"openai", llm.Config{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini"}, true},
		{"ollama", llm.Config{BaseURL: "http://127.0.0.1:11434/v1/", Model: "llama3"}, true},
		{"azure query", llm.Config{BaseURL: "https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01", Model: "d"}, true},
		{"empty base", llm.Config{Model: "m"}, false},
		{"relative base", llm.Config{BaseURL: "/v1", Model: "m"}, false},
		{"no scheme", llm.Config{BaseURL: "api.openai.com/v1", Model: "m"}, false},
		{"other scheme", llm.Config{BaseURL: "ftp://example.com/v1", Model: "m"}, false},
		{"no host", llm.Config{BaseURL: "http:///v1", Model: "m"}, false},
		{"unparsable", llm.Config{BaseURL: "http://[::1", Model: "m"}, false},
		{"no model", llm.Config{BaseURL: "http://127.0.0.1/v1"}, false},
		{"blank model", llm.Config{BaseURL: "http://127.0.0.1/v1", Model: "  "}, false},
		{"negative timeout", llm.Config{BaseURL: "http://127.0.0.1/v1", Model: "m", Timeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := llm.New(tt.cfg)
			if tt.ok && (err != nil || c == nil) {
				t.Fatalf("New: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestConversation(t *testing.T) {
	turns := []llm.Turn{{Question: "q1", Answer: "a1"}, {Question: "q2", Answer: "a2"}}
	tests := []struct {
		name         string
		instructions string
		turns        []llm.Turn
		want         []llm.Message
	}{
		{"first question", "Be terse.", nil, []llm.Message{
			{Role: "system", Content: "Be terse."}, {Role: "user", Content: "q"},
		}},
		{"blank instructions", " \n\t", nil, []llm.Message{{Role: "user", Content: "q"}}},
		{"earlier turns in order", "Be terse.", turns, []llm.Message{
			{Role: "system", Content: "Be terse."},
			{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"},
			{Role: "user", Content: "q2"}, {Role: "assistant", Content: "a2"},
			{Role: "user", Content: "q"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := llm.Conversation(tt.instructions, tt.turns, "q"); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// sent is the request as the peer saw it on the wire.
type sent struct {
	method, path, query string
	header              http.Header
	body                map[string]any
}

func TestCompleteSendsExactRequest(t *testing.T) {
	msgs := llm.Conversation("You are terse.",
		[]llm.Turn{{Question: "What is 2+2?", Answer: "4"}, {Question: "And 3+3?", Answer: "6"}},
		"And 4+4?")
	wantMessages := []any{
		map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": "What is 2+2?"},
		map[string]any{"role": "assistant", "content": "4"},
		map[string]any{"role": "user", "content": "And 3+3?"},
		map[string]any{"role": "assistant", "content": "6"},
		map[string]any{"role": "user", "content": "And 4+4?"},
	}
	tests := []completeExactRequestCase{
		{"with key", "/v1", testKey, []string{"Bearer " + testKey}, "/v1/chat/completions", ""},
		{"without key", "/v1", "", nil, "/v1/chat/completions", ""},
		{"trailing slash", "/v1/", testKey, []string{"Bearer " + testKey}, "/v1/chat/completions", ""},
		{"query kept", "/openai/deployments/d?api-version=2024-06-01", testKey, []string{"Bearer " + testKey},
			"/openai/deployments/d/chat/completions", "api-version=2024-06-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { completeExactRequestCheck(t, tt, msgs, wantMessages) })
	}
}

// completeExactRequestCase is one of TestCompleteSendsExactRequest's cases.
type completeExactRequestCase struct {
	name      string
	suffix    string // appended to the server's URL to form the base
	key       string
	wantAuth  []string
	wantPath  string
	wantQuery string
}

// completeExactRequestCheck sends msgs through a client on tt's base and key
// and checks the reply, and the request line, headers and body the peer saw.
func completeExactRequestCheck(t *testing.T, tt completeExactRequestCase, msgs []llm.Message, wantMessages []any) {
	t.Helper()
	srv, got := completeExactRequestPeer(t)
	reply, err := newClient(t, srv.URL+tt.suffix, tt.key, 0).Complete(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if reply != "8" {
		t.Fatalf("reply %q, want %q", reply, "8")
	}
	s := <-got
	if s.method != http.MethodPost || s.path != tt.wantPath || s.query != tt.wantQuery {
		t.Fatalf("request line %s %s?%s, want POST %s?%s", s.method, s.path, s.query, tt.wantPath, tt.wantQuery)
	}
	for name, want := range map[string][]string{
		"Authorization": tt.wantAuth,
		"Content-Type":  {"application/json"},
		"Accept":        {"application/json"},
		"User-Agent":    {"agentapi"},
	} {
		if got := s.header.Values(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s header %q, want %q", name, got, want)
		}
	}
	wantBody := map[string]any{"model": "test-model", "messages": wantMessages, "stream": false}
	if !reflect.DeepEqual(s.body, wantBody) {
		t.Fatalf("body %v\nwant %v", s.body, wantBody)
	}
}

// completeExactRequestPeer is a peer that answers "8" and hands each
// request, as it saw it on the wire, to the channel returned.
func completeExactRequestPeer(t *testing.T) (*httptest.Server, chan sent) {
	t.Helper()
	got := make(chan sent, 1)
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) {
		s := sent{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header}
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&s.body); err != nil {
			t.Errorf("request body: %v", err)
		}
		got <- s
		answer(w, "\n\n8\n")
	})
	return srv, got
}

func TestCompleteFailures(t *testing.T) {
	// Each peer misbehaves once; the client must fail with the right kind
	// and with text that quotes nothing the peer or the caller supplied.
	tests := []struct {
		name   string
		h      http.HandlerFunc
		kind   llm.Kind
		status int
	}{
		{"status 500 echoing secrets", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":{"message":"internal %s; you sent %s"}}`, secret, r.Header.Get("Authorization"))
		}, llm.KindStatus, 500},
		{"status 429", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"rate limited `+secret+`"}}`, http.StatusTooManyRequests)
		}, llm.KindStatus, 429},
		{"redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://"+secret+".invalid/v1/chat/completions", http.StatusTemporaryRedirect)
		}, llm.KindStatus, 307},
		{"malformed JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"`+secret)
		}, llm.KindMalformed, 0},
		{"trailing garbage", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, llmtest.Answer("fine")+secret)
		}, llm.KindMalformed, 0},
		{"content not a string", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[{"message":{"content":[{"type":"text","text":"`+secret+`"}]}}]}`)
		}, llm.KindMalformed, 0},
		{"HTML", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, llmtest.Answer(secret))
		}, llm.KindMalformed, 0},
		{"no content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil // suppress sniffing
			_, _ = io.WriteString(w, llmtest.Answer(secret))
		}, llm.KindMalformed, 0},
		{"no choices", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[],"note":"`+secret+`"}`)
		}, llm.KindEmpty, 0},
		{"error object with 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"error":{"message":"`+secret+`"}}`)
		}, llm.KindEmpty, 0},
		{"null content", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":null}}]}`)
		}, llm.KindEmpty, 0},
		{"blank content", func(w http.ResponseWriter, r *http.Request) {
			answer(w, " \n ")
		}, llm.KindEmpty, 0},
		{"huge body with length", func(w http.ResponseWriter, r *http.Request) {
			huge := llmtest.Answer(strings.Repeat(secret, 5<<20/len(secret)))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(huge)))
			_, _ = io.WriteString(w, huge)
		}, llm.KindTooLarge, 0},
		{"huge chunked body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"`)
			w.(http.Flusher).Flush() // chunked: the client cannot know the size up front
			piece := strings.Repeat(secret, 64<<10/len(secret))
			for range 5 << 20 / len(piece) {
				if _, err := io.WriteString(w, piece); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}}]}`)
		}, llm.KindTooLarge, 0},
		{"connection closed before answering", func(w http.ResponseWriter, r *http.Request) {
			hijack(t, w).Close()
		}, llm.KindTransport, 0},
		{"connection closed mid-body", func(w http.ResponseWriter, r *http.Request) {
			conn := hijack(t, w)
			defer conn.Close()
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+
				`{"choices":[{"message":{"content":"`+secret)
		}, llm.KindTransport, 0},
		{"not HTTP at all", func(w http.ResponseWriter, r *http.Request) {
			conn := hijack(t, w)
			defer conn.Close()
			_, _ = io.WriteString(conn, "SSH-2.0-"+secret+"\r\n\r\n")
		}, llm.KindTransport, 0},
	}
	msgs := []llm.Message{{Role: "user", Content: "hello"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { completeFailuresCheck(t, tt.h, msgs, tt.kind, tt.status) })
	}
}

// completeFailuresCheck: a client sending msgs to a peer answering with h
// fails with kind and status, in text that quotes nothing the peer or the
// caller supplied.
func completeFailuresCheck(t *testing.T, h http.HandlerFunc, msgs []llm.Message, kind llm.Kind, status int) {
	t.Helper()
	srv := peer(t, h)
	_, err := newClient(t, srv.URL+"/v1", testKey, patient).Complete(context.Background(), msgs)
	e := wantKind(t, err, kind)
	if e.Status != status {
		t.Errorf("Status %d, want %d", e.Status, status)
	}
	if status != 0 {
		if want := fmt.Sprintf("llm: provider answered status %d", status); err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
	for _, leak := range []string{secret, testKey, "LEAKED", srv.URL, "127.0.0.1"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q quotes %q", err, leak)
		}
	}
}

func wantKind(t *testing.T, err error, k llm.Kind) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *llm.Error", err, err)
	}
	if e.Kind != k {
		t.Fatalf("kind %v (%q), want %v", e.Kind, err, k)
	}
	sentinels := map[llm.Kind]error{
		llm.KindTransport: llm.ErrTransport, llm.KindTimeout: llm.ErrTimeout, llm.KindCanceled: llm.ErrCanceled,
		llm.KindStatus: llm.ErrStatus, llm.KindMalformed: llm.ErrMalformed, llm.KindTooLarge: llm.ErrTooLarge,
		llm.KindEmpty: llm.ErrEmpty,
	}
	for kind, s := range sentinels {
		if got := errors.Is(fmt.Errorf("wrapped: %w", err), s); got != (kind == k) {
			t.Errorf("errors.Is(err, %v) = %v for kind %v", s, got, k)
		}
	}
	return e
}

func hijack(t *testing.T, w http.ResponseWriter) net.Conn {
	t.Helper()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		panic(http.ErrAbortHandler)
	}
	return conn
}

// awaitAbort plays a model that never answers, until the client gives up.
// The server notices a closed connection only once the request body has
// been read to its end, so it reads it first.
func awaitAbort(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func TestCompleteTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			awaitAbort(r)
		}},
		// The bound covers reading the answer, not just its headers.
		{"stalled body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[`)
			w.(http.Flusher).Flush()
			awaitAbort(r)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := peer(t, tt.h)
			start := time.Now()
			_, err := newClient(t, srv.URL+"/v1", testKey, timeout).Complete(context.Background(), []llm.Message{{Role: "user", Content: "hi"}})
			elapsed := time.Since(start)
			wantKind(t, err, llm.KindTimeout)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("error %v should be a deadline, not a cancellation", err)
			}
			if err.Error() != "llm: timed out after 200ms" {
				t.Errorf("error %q", err)
			}
			if elapsed < timeout || elapsed > timeout+2*time.Second {
				t.Errorf("gave up after %v, want about %v", elapsed, timeout)
			}
		})
	}
}

func TestCompleteCanceledByCaller(t *testing.T) {
	arrived := make(chan struct{})
	aborted := make(chan struct{})
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		awaitAbort(r)
		close(aborted)
	})
	c := newClient(t, srv.URL+"/v1", testKey, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, []llm.Message{{Role: "user", Content: "hi"}})
		errc <- err
	}()
	<-arrived
	start := time.Now()
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(5 * time.Second):
		t.Fatal("Complete ignored the canceled context")
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %v to notice the cancellation", elapsed)
	}
	wantKind(t, err, llm.KindCanceled)
	if !errors.Is(err, context.Canceled) || err.Error() != "llm: request canceled" {
		t.Errorf("error %q should match context.Canceled", err)
	}
	// The model request itself must be aborted, not left running.
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer never saw the request aborted")
	}
}

func TestCompleteCallersDeadline(t *testing.T) {
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) { awaitAbort(r) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := newClient(t, srv.URL+"/v1", testKey, time.Minute).Complete(ctx, []llm.Message{{Role: "user", Content: "hi"}})
	// The caller's own deadline is the caller giving up, not the model being slow.
	wantKind(t, err, llm.KindCanceled)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v should match context.DeadlineExceeded", err)
	}
}

func TestCompleteConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1"
	srv.Close()
	_, err := newClient(t, base, testKey, patient).Complete(context.Background(), []llm.Message{{Role: "user", Content: "hi"}})
	wantKind(t, err, llm.KindTransport)
	if err.Error() != "llm: provider unreachable: connection refused" {
		t.Errorf("error %q", err)
	}
}

func TestCompleteNoMessages(t *testing.T) {
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) { t.Error("nothing should be sent") })
	if _, err := newClient(t, srv.URL+"/v1", "", 0).Complete(context.Background(), nil); err == nil {
		t.Fatal("Complete sent an empty conversation")
	}
}

// Unwanted bodies are drained, so answers of every kind leave their
// connection reusable instead of making each question dial afresh.
func TestConnectionsAreReused(t *testing.T) {
	var mu sync.Mutex
	dials, n := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch i % 3 {
		case 0:
			answer(w, "ok")
		case 1:
			http.Error(w, strings.Repeat("x", 10<<10), http.StatusBadGateway)
		case 2:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, strings.Repeat("y", 10<<10))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			dials++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL+"/v1", testKey, patient)
	for range 9 {
		_, _ = c.Complete(context.Background(), []llm.Message{{Role: "user", Content: "hi"}})
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 1 {
		t.Fatalf("%d connections for 9 sequential requests, want 1", dials)
	}
}

func TestFakePeer(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.Echo)
	c := newClient(t, fake.URL, testKey, patient)
	msgs := llm.Conversation("Be kind.", []llm.Turn{{Question: "a", Answer: "echo: a"}}, "b")
	reply, err := c.Complete(context.Background(), msgs)
	if err != nil || reply != "echo: b" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	if got := reqs[0]; got.Model != "test-model" || got.Authorization != "Bearer "+testKey || got.Stream ||
		!reflect.DeepEqual(got.Messages, msgs) {
		t.Fatalf("recorded %+v", got)
	}

	// A reply can fail, or play a slow model that notices the caller leaving.
	failing := llmtest.NewServer(t, func(llmtest.Request) (int, string) { return 503, `{"error":{}}` })
	_, err = newClient(t, failing.URL, "", patient).Complete(context.Background(), msgs)
	if e := wantKind(t, err, llm.KindStatus); e.Status != 503 {
		t.Fatalf("status %d", e.Status)
	}
	if got := failing.Requests(); len(got) != 1 || got[0].Authorization != "" {
		t.Fatalf("recorded %+v", got)
	}
	slow := llmtest.NewServer(t, func(r llmtest.Request) (int, string) {
		<-r.Context.Done()
		return 200, llmtest.Answer("too late")
	})
	_, err = newClient(t, slow.URL, "", 100*time.Millisecond).Complete(context.Background(), msgs)
	wantKind(t, err, llm.KindTimeout)
}
