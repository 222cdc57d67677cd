package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// flushWriter is a buffered stdout: what is written shows only once
// flushed, and each flush is reported on flushed.
type flushWriter struct {
	mu             sync.Mutex
	pending, shown bytes.Buffer
	flushed        chan string // what shows after each flush
}

func (w *flushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending.Write(p)
}

func (w *flushWriter) Flush() error {
	w.mu.Lock()
	_, _ = w.pending.WriteTo(&w.shown)
	s := w.shown.String()
	w.mu.Unlock()
	select {
	case w.flushed <- s:
	default:
	}
	return nil
}

// askStream runs `agentapi api ask --stream` in the background.
func (s *apiService) askStream(key string, stdout *flushWriter, args ...string) (stderr *bytes.Buffer, code chan int) {
	stderr, code = &bytes.Buffer{}, make(chan int, 1)
	getenv := func(k string) string {
		return map[string]string{"AGENTAPI_KEY": key, "AGENTAPI_URL": s.url}[k]
	}
	go func() {
		code <- run(context.Background(), append([]string{"api", "ask", "--stream"}, args...), getenv, strings.NewReader(""), stdout, stderr)
	}()
	return stderr, code
}

func TestAPIAskStream(t *testing.T) {
	s := newAPIService(t)
	key := s.key(nil, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery).Credential
	id := mustAPI(t, key, s.url, "agents", "create", "--name", "Helpdesk")[0]["id"].(string)

	// Refused before any stream: the usual one line and exit 1.
	out := &flushWriter{flushed: make(chan string, 8)}
	errs, code := s.askStream(key, out, id, "hello?")
	if c := <-code; c != 1 || out.shown.String() != "" || !strings.HasPrefix(errs.String(), "agentapi: feature_not_enabled: ") {
		t.Fatalf("without the feature: exit %d, stdout %q, stderr %q", c, out.shown.String(), errs)
	}
	if err := s.st.SetAccountFeature(context.Background(), s.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}

	// The first token shows while the model still holds the second back.
	release := make(chan struct{})
	s.peer.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("Order 1042 ")
		select {
		case <-release:
		case <-r.Context.Done():
			return
		}
		send("left today.")
	})
	out = &flushWriter{flushed: make(chan string, 8)}
	errs, code = s.askStream(key, out, id, "Where", "is", "1042?")
	if shown := <-out.flushed; shown != "Order 1042 " {
		t.Fatalf("first flush %q", shown)
	}
	close(release)
	if c := <-code; c != 0 || out.shown.String() != "Order 1042 left today.\n" || errs.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", c, out.shown.String(), errs)
	}

	// The model failing after the first token: the text so far ends with a
	// newline, the error is the api commands' line, exit 1.
	s.peer.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("partial ")
		panic(http.ErrAbortHandler) // the connection drops, no [DONE]
	})
	out = &flushWriter{flushed: make(chan string, 8)}
	errs, code = s.askStream(key, out, id, "q")
	if c := <-code; c != 1 || out.shown.String() != "partial \n" || !strings.HasPrefix(errs.String(), "agentapi: server_error: ") ||
		strings.Count(errs.String(), "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", c, out.shown.String(), errs)
	}
}
