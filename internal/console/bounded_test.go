package console

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPagesAreBounded: every console request runs with a deadline of
// pageTimeout, so a store that hangs costs a page a 500 after that long,
// and its context is over once the page is answered.
func TestPagesAreBounded(t *testing.T) {
	var ctx context.Context
	before := time.Now()
	h := bounded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx = r.Context()
		w.WriteHeader(http.StatusNoContent)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/console/developers", nil))
	after := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok || deadline.Before(before.Add(pageTimeout)) || deadline.After(after.Add(pageTimeout)) {
		t.Errorf("deadline %v (set %v); want pageTimeout (%v) after the request began", deadline.Sub(before), ok, pageTimeout)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("the page's context after its answer: %v; want canceled", ctx.Err())
	}
}
