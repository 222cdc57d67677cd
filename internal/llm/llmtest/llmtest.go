// Package llmtest is a fake Chat Completions peer for tests: a real HTTP
// server on loopback that records what it was asked and answers as told,
// streamed or not, so tests exercise the same client, wire format and
// failure paths as production.
package llmtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/llm"
)

// Request is what the peer received at /v1/chat/completions.
type Request struct {
	Model         string
	Messages      []llm.Message
	Stream        bool
	Authorization string // the header as sent, e.g. "Bearer sk-…"; empty when absent
	// Context ends when the client aborts the request, so a reply can play
	// a slow model that still notices the caller going away.
	Context context.Context
}

// Server is the fake peer. It is closed when the test ends.
type Server struct {
	// URL is the base URL to configure the client with; it ends in /v1.
	URL string

	reply  func(Request) (int, string)
	delay  time.Duration // between the words of a streamed reply
	record bool
	mu     sync.Mutex
	reqs   []Request
	stream func(Request, func(token string) bool)
}

// TB is the part of testing.TB that NewServer uses; naming it here keeps
// package testing out of the agentapi binary, which serves Handler.
type TB interface {
	Helper()
	Cleanup(func())
}

// NewServer starts a peer that answers each completion request with the
// status and JSON body reply returns; nil reply means Echo. A reply that
// blocks must return once req.Context is done, or closing the server waits.
func NewServer(t TB, reply func(req Request) (status int, body string)) *Server {
	t.Helper()
	if reply == nil {
		reply = Echo
	}
	s := &Server{reply: reply, record: true}
	srv := httptest.NewServer(s.mux())
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// Handler is the peer's POST /v1/chat/completions without a test: it
// records nothing, and streams reply's answer a word at a time, delay
// apart. agentapi fake-model serves it.
func Handler(reply func(req Request) (status int, body string), delay time.Duration) http.Handler {
	return (&Server{reply: reply, delay: delay}).mux()
}

func (s *Server) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handle)
	return mux
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string        `json:"model"`
		Messages []llm.Message `json:"messages"`
		Stream   bool          `json:"stream"`
	}
	// Read to the end: only then does the server watch the connection, and
	// Request.Context end when the client goes away.
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &body)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"the body is not a chat completions request"}}`, http.StatusBadRequest)
		return
	}
	req := Request{
		Model: body.Model, Messages: body.Messages, Stream: body.Stream,
		Authorization: r.Header.Get("Authorization"), Context: r.Context(),
	}
	if s.record {
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		s.mu.Unlock()
	}
	if req.Stream {
		s.serveStream(w, req)
		return
	}
	status, out := s.reply(req)
	writeJSON(w, status, out)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Requests returns the completion requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Question is the last user message of req.
func (req Request) Question() string {
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Echo answers "echo: " followed by the last user message.
func Echo(req Request) (int, string) {
	return http.StatusOK, Answer("echo: " + req.Question())
}

// Answer is a successful Chat Completions body whose reply is content,
// ending in a newline as json.Encoder ends it.
func Answer(content string) string {
	message := map[string]string{"role": "assistant", "content": content}
	return completion("chat.completion", map[string]any{"index": 0, "message": message, "finish_reason": "stop"}) + "\n"
}

// completion is a Chat Completions object of the given kind with one
// choice.
func completion(object string, choice map[string]any) string {
	b, _ := json.Marshal(map[string]any{"object": object, "choices": []any{choice}}) // strings and numbers: cannot fail
	return string(b)
}

// StreamWith makes the peer answer streamed requests ("stream": true) by
// running play, which sends the reply token by token; send returns false
// once the client went away (play should then return). Without StreamWith,
// a streamed request gets the reply function's answer cut into words, or
// its status and body as they are when the status is not 200.
func (s *Server) StreamWith(play func(req Request, send func(token string) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream = play
}

func (s *Server) serveStream(w http.ResponseWriter, req Request) {
	s.mu.Lock()
	play := s.stream
	s.mu.Unlock()
	if play == nil {
		status, out := s.reply(req)
		if status != http.StatusOK {
			writeJSON(w, status, out)
			return
		}
		play = words(contentOf(out), s.delay)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	send := func(token string) bool {
		if req.Context.Err() != nil {
			return false
		}
		if _, err := io.WriteString(w, "data: "+Chunk(token)+"\n\n"); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	play(req, send)
	if req.Context.Err() == nil {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		_ = rc.Flush()
	}
}

// words plays content one word (with its following space) at a time,
// delay apart.
func words(content string, delay time.Duration) func(Request, func(string) bool) {
	return func(req Request, send func(string) bool) {
		for i, tok := range strings.SplitAfter(content, " ") {
			if i > 0 {
				select {
				case <-req.Context.Done():
					return
				case <-time.After(delay):
				}
			}
			if tok != "" && !send(tok) {
				return
			}
		}
	}
}

// contentOf is the reply text of a Chat Completions body made by Answer.
func contentOf(body string) string {
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(body), &out) != nil || len(out.Choices) == 0 {
		return ""
	}
	return out.Choices[0].Message.Content
}

// Chunk is one streamed Chat Completions chunk (without the "data: " of
// its event) carrying token.
func Chunk(token string) string {
	return completion("chat.completion.chunk", map[string]any{"index": 0, "delta": map[string]string{"content": token}})
}
