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
// request's recorder as a context value and a deadline of requestTimeout,
// and its context is over once the request is answered, so that nothing it
// started outlives it.
func TestObserveBoundsTheRequest(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
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
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/me", nil))
	after := time.Now()
	if !hasDeadline || deadline.Before(before.Add(requestTimeout)) || deadline.After(after.Add(requestTimeout)) {
		t.Errorf("deadline %v (set %v); want requestTimeout (%v) after the request began", deadline, hasDeadline, requestTimeout)
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
