package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

type otherKey struct{}

// TestObserveContextKeepsTheParent: the request's context, which holds the
// recorder without context.WithValue, still answers the parent's values,
// and what a handler derives from it ends when the client goes away (the
// parent is cancelled) mid-request.
func TestObserveContextKeepsTheParent(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	parent, gone := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "kept"))
	defer gone()
	h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if v, _ := ctx.Value(otherKey{}).(string); v != "kept" {
			t.Errorf("parent's value %q", v)
		}
		if rec, _ := ctx.Value(ctxLogAttrs).(*recorder); rec == nil || rec.id != w.Header().Get("X-Request-Id") {
			t.Errorf("recorder %v", rec)
		}
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		gone()
		select {
		case <-child.Done():
		default:
			t.Error("a context derived in the handler outlived the client")
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/me", nil).WithContext(parent))
}

// TestObserveAllocations bounds what observe allocates around a handler:
// the recorder (which holds the X-Request-Id value and the request's
// context value), the id, the deadline's context and the request's copy.
// It was 2 more before those two were held in the recorder.
func TestObserveAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	r := httptest.NewRequest("GET", "/v1/me", nil)
	w := &headerOnly{h: http.Header{}}
	n := testing.AllocsPerRun(200, func() {
		clear(w.h)
		h.ServeHTTP(w, r)
	})
	t.Logf("%v allocations", n)
	if n > maxObserveAllocs {
		t.Errorf("observe allocates %v times a request; want at most %d", n, maxObserveAllocs)
	}
}

const maxObserveAllocs = 7

// headerOnly is a ResponseWriter that allocates nothing of its own.
type headerOnly struct{ h http.Header }

func (w *headerOnly) Header() http.Header         { return w.h }
func (w *headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerOnly) WriteHeader(int)             {}
