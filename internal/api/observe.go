package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// Every /v1 request is bounded (observe): a store or a model that stops
// answering without closing its connection costs a request a 500 after at
// most this long. A question waits for the model (30 s) and is given
// questionTimeout, below the server's 60 s write timeout; anything else
// needs only the store, which answers in milliseconds when it answers.
const (
	requestTimeout  = 10 * time.Second
	questionTimeout = 45 * time.Second
)

// timeoutOf is the bound of r: questionTimeout for a question (the only
// POST whose path ends in /questions), requestTimeout for the rest.
func timeoutOf(r *http.Request) time.Duration {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/questions") {
		return questionTimeout
	}
	return requestTimeout
}

// recorder remembers what a handler wrote, for the request log and for
// panic recovery (a 500 can only be sent if nothing was). It is also the
// request's one context value: its id and, once authenticated, its key.
type recorder struct {
	http.ResponseWriter
	status  int
	written int64
	keyPfx  string
	route   string // the matched pattern, for metrics
	id      string
	auth    auth // the authenticated key, once serveV1 admitted it
	// The identified key (even when its rate limit then refused the
	// request) and the error code answered, for the usage recorder.
	keyID, acctID, code string
	// gone is a 5xx answered to a client that had gone away
	// (clientWentAway): finish records it as statusClientClosed.
	gone bool
	// client is the client's address (--trusted-proxies applied), resolved
	// once for the log line, the per-address limiter, the IP allowlist and
	// the usage recorder.
	client string
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.written += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observe gives every response an X-Request-Id, turns a panic into a 500
// server_error naming that id (the stack goes only to the log), and writes
// one JSON log line per request. The line carries no query string and no
// credential: only the key's public prefix. Every request is bounded here
// (timeoutOf), with the request's one context value.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, id: domain.NewRequestID(start), client: s.clients.Addr(r)}
		w.Header().Set("X-Request-Id", rec.id)
		ctx, cancel := context.WithDeadline(r.Context(), start.Add(timeoutOf(r)))
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, ctxLogAttrs, rec))
		defer func() {
			if v := recover(); v != nil {
				s.recovered(rec, r, v)
			}
			s.finish(rec, r, start)
		}()
		next.ServeHTTP(rec, r)
	})
}

// recovered answers a request whose handler panicked with v: a 500 naming
// the request id, when nothing was sent yet; the stack goes only to the log.
func (s *Server) recovered(rec *recorder, r *http.Request, v any) {
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("panic", "request_id", rec.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if rec.status == 0 {
		writeError(rec, r, s.log, domain.Errorf(domain.CodeServerError,
			"The service failed to handle this request; it is safe to retry with backoff (request id %s).", rec.id))
	}
}

// statusClientClosed is what the request log, its line and the metrics
// record for a request whose client went away before its answer (nginx's
// 499, "client closed request"): no client saw the 5xx the service wrote,
// and no client can make the service's 5xx count grow by hanging up.
const statusClientClosed = 499

// finish counts, logs and records the request once answered.
func (s *Server) finish(rec *recorder, r *http.Request, start time.Time) {
	rec.route = cmp.Or(rec.route, r.Pattern, "unmatched")
	if rec.gone {
		rec.status = statusClientClosed
	}
	d := time.Since(start)
	s.metrics.Request(rec.route, r.Method, rec.status, d)
	s.logRequest(r, rec, d)
	if s.usage != nil && rec.keyID != "" {
		s.recordUsage(r, rec, start, d)
	}
}
