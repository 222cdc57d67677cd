package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/questions"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// DefaultStreamKeepAlive is how long a streamed answer may stay silent
// before a ": keep-alive" comment goes out (decisions.md, "Streaming
// answers").
const DefaultStreamKeepAlive = 15 * time.Second

// recordAnswer tells the idempotency layer, when w is its recorder, how a
// streamed question ended, as the response the same question would have
// had without "stream": status 201 and the body {"data":<answer>} once
// answer.completed went out, or the error status and envelope the error
// event carried. It stores that response, and a replay is written by
// writeStreamReplay. A refusal before the stream begins is a plain JSON
// response, recorded as such.
func recordAnswer(w http.ResponseWriter, status int, body []byte) {
	if rec, ok := w.(*idemRecorder); ok {
		rec.streamed = &store.IdemResponse{Status: status, Body: bytes.Clone(body), Streamed: true}
	}
}

// sse writes server-sent events. Events and keep-alive comments come from
// two goroutines, so every write holds mu; each write is flushed at once.
type sse struct {
	mu     sync.Mutex
	w      io.Writer
	rc     *http.ResponseController
	err    error         // the first write failure: the client went away
	active chan struct{} // a signal per event, to restart the silence timer
}

// startSSE sends the 200 and the event-stream headers (the rate-limit and
// request id headers already set stay).
func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w), active: make(chan struct{}, 1)}
	_ = s.rc.Flush()
	return s
}

// event writes one event whose data is v as JSON. Every v is strings
// and numbers, which json.Marshal cannot fail to encode.
func (s *sse) event(name string, v any) error {
	data, _ := json.Marshal(v)
	return s.eventRaw(name, data)
}

// eventRaw writes one event whose data is compact JSON: no line breaks.
func (s *sse) eventRaw(name string, data []byte) error {
	select {
	case s.active <- struct{}{}:
	default:
	}
	return s.write([]byte("event: " + name + "\ndata: " + string(data) + "\n\n"))
}

func (s *sse) write(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(p); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// keepAlive sends ": keep-alive" after every interval without an event,
// until stop is closed.
func (s *sse) keepAlive(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.active:
			t.Reset(interval)
		case <-t.C:
			if s.write([]byte(": keep-alive\n\n")) != nil {
				return
			}
			t.Reset(interval)
		}
	}
}

type createdEvent struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	CreatedAt      string `json:"created_at"`
}

type deltaEvent struct {
	Delta string `json:"delta"`
}

// streamAnswer answers a prepared question as server-sent events:
// question.created, answer.delta per piece of the model's text, then
// answer.completed, or an error event when the answer failed after the
// stream began.
func streamAnswer(w http.ResponseWriter, r *http.Request, log *slog.Logger, p *questions.Pending, keepAlive time.Duration) {
	s := startSSE(w)
	// The keep-alive goroutine ends before the handler returns: a write
	// after that would race with the request log reading the recorder.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); s.keepAlive(keepAlive, stop) }()
	defer func() { close(stop); <-done }()
	pq := p.Question()
	_ = s.event("question.created", createdEvent{ID: pq.ID, ConversationID: pq.ConversationID, CreatedAt: wire.Time(pq.CreatedAt)})
	q, err := p.AnswerStream(r.Context(), func(delta string) error {
		return s.event("answer.delta", deltaEvent{Delta: delta})
	})
	if err != nil {
		// What writeError would send; an internal cause is logged with
		// the request id.
		de := asDomain(r, log, err)
		body, _ := json.Marshal(envelope(de))
		recordAnswer(w, statusOf(de.Code), body)
		_ = s.eventRaw("error", body)
		return
	}
	body, _ := json.Marshal(single{Data: toAnswerObject(q)}) // strings and numbers: cannot fail
	recordAnswer(w, http.StatusCreated, body)
	_ = s.eventRaw("answer.completed", body)
}

// writeStreamReplay answers a replay of a streamed question from the
// response recordAnswer got: a saved 201 becomes question.created, the
// whole answer as one answer.delta, and answer.completed; a saved error
// becomes the error event. It reports whether body was such a response.
func writeStreamReplay(w http.ResponseWriter, status int, body []byte) bool {
	var saved struct {
		Data wire.Answer `json:"data"`
	}
	if status == http.StatusCreated && json.Unmarshal(body, &saved) != nil {
		return false
	}
	s := startSSE(w)
	if status != http.StatusCreated {
		_ = s.eventRaw("error", compactJSON(body))
		return true
	}
	a := saved.Data
	_ = s.event("question.created", createdEvent{ID: a.ID, ConversationID: a.ConversationID, CreatedAt: a.CreatedAt})
	_ = s.event("answer.delta", deltaEvent{Delta: a.Answer})
	_ = s.eventRaw("answer.completed", compactJSON(body))
	return true
}

// compactJSON drops the line breaks a data line cannot hold.
func compactJSON(body []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, body) != nil {
		return body
	}
	return b.Bytes()
}
