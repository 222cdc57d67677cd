package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestObserveBoundsTheRequest: a handler under observe runs with the
// request's recorder as a context value and a deadline of its bound
// (questionTimeout for a question, requestTimeout for anything else), and
// its context is over once the request is answered, so that nothing it
// started outlives it.
func TestObserveBoundsTheRequest(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		method, path string
		bound        time.Duration
	}{
		{"GET", "/v1/me", requestTimeout},
		{"POST", "/v1/ai-agents", requestTimeout},
		{"GET", "/v1/ai-agents/agt_1/questions", requestTimeout}, // no such route: the store's bound
		{"POST", "/v1/ai-agents/agt_1/questions", questionTimeout},
	} {
		var got context.Context
		var deadline time.Time
		var hasDeadline bool
		before := time.Now()
		h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.Context()
			deadline, hasDeadline = got.Deadline()
			if requestID(got) == "" || requestID(got) != w.Header().Get("X-Request-Id") {
				t.Errorf("request id in context %q, header %q", requestID(got), w.Header().Get("X-Request-Id"))
			}
			if got.Err() != nil {
				t.Errorf("context over during the request: %v", got.Err())
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		after := time.Now()
		if !hasDeadline || deadline.Before(before.Add(c.bound)) || deadline.After(after.Add(c.bound)) {
			t.Errorf("%s %s: deadline %v (set %v); want %v after the request began", c.method, c.path, deadline.Sub(before), hasDeadline, c.bound)
		}
		select {
		case <-got.Done():
		default:
			t.Fatal("the request's context is not done after its answer")
		}
		if !errors.Is(got.Err(), context.Canceled) {
			t.Errorf("err %v after the answer; want context.Canceled", got.Err())
		}
	}
}
