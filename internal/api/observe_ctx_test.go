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
