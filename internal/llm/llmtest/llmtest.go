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
	"testing"

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
	mu     sync.Mutex
	reqs   []Request
	stream func(Request, func(token string) bool)
}

// NewServer starts a peer that answers each completion request with the
// status and JSON body reply returns; nil reply means Echo. A reply that
// blocks must return once req.Context is done, or closing the server waits.
func NewServer(t testing.TB, reply func(req Request) (status int, body string)) *Server {
	t.Helper()
	if reply == nil {
		reply = Echo
	}
	s := &Server{reply: reply}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handle)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string        `json:"model"`
		Messages []llm.Message `json:"messages"`
		Stream   bool          `json:"stream"`
	}
	// Read to the end: only then does the server watch the connection, and
	// Request.Context end when the client goes away.
	data, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(data, &body)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"request body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	req := Request{
		Model: body.Model, Messages: body.Messages, Stream: body.Stream,
		Authorization: r.Header.Get("Authorization"), Context: r.Context(),
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
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

// Echo answers "echo: " followed by the last user message.
func Echo(req Request) (int, string) {
	last := ""
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == "user" {
			last = m.Content
			break
		}
	}
	return http.StatusOK, Answer("echo: " + last)
}

// Answer is a successful Chat Completions body whose reply is content.
func Answer(content string) string {
	return completion("chat.completion", "message", map[string]string{"role": "assistant", "content": content}, "stop")
}

// completion is a Chat Completions object of the given kind with one
// choice, which holds part under key.
func completion(object, key string, part map[string]string, finish any) string {
	b, err := json.Marshal(map[string]any{
		"id":      "chatcmpl-llmtest",
		"object":  object,
		"created": 0,
		"model":   "llmtest",
		"choices": []any{map[string]any{"index": 0, key: part, "finish_reason": finish}},
	})
	if err != nil {
		panic(err) // only strings and numbers above: cannot happen
	}
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
		play = words(contentOf(out))
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
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

// words plays content one word (with its following space) at a time.
func words(content string) func(Request, func(string) bool) {
	return func(_ Request, send func(string) bool) {
		for _, tok := range strings.SplitAfter(content, " ") {
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
	return completion("chat.completion.chunk", "delta", map[string]string{"content": token}, nil)
}
