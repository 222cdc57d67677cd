package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
)

type ctxKey int

const (
	ctxRequestID ctxKey = iota
	ctxAuth
	ctxLogAttrs
)

// requestID is the id observe gave the request of ctx ("" outside one).
func requestID(ctx context.Context) string {
	if rec, _ := ctx.Value(ctxLogAttrs).(*recorder); rec != nil {
		return rec.id
	}
	id, _ := ctx.Value(ctxRequestID).(string)
	return id
}

// newRequestID is "req_" and 24 hex digits of randomness, built in place.
func newRequestID() string {
	var raw [12]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24+)
	var b [4 + 2*len(raw)]byte
	copy(b[:], "req_")
	hex.Encode(b[4:], raw[:])
	return string(b[:])
}

// recorder remembers what a handler wrote, for the request log and for
// panic recovery (a 500 can only be sent if nothing was). It is also the
// request's one context value: its id and, once authenticated, its key, so
// that a request is copied (WithContext) as few times as possible.
type recorder struct {
	http.ResponseWriter
	status  int
	written int64
	keyPfx  string
	route   string // the matched pattern, for metrics
	id      string
	auth    auth // the authenticated key, when authed
	authed  bool
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
// credential: only the key's public prefix.
//
// Every request is bounded by requestTimeout: nothing it does may outlive
// it, even when a store or model stops answering without closing the
// connection. The bound is set here, with the request's one context value,
// so that the request is copied once.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, id: newRequestID()}
		id := rec.id
		w.Header()["X-Request-Id"] = []string{id} // canonical already: no Set
		ctx := newBoundCtx(r.Context(), rec, start.Add(requestTimeout))
		defer ctx.stop()
		r = r.WithContext(ctx)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic", "request_id", id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, r, s.log, domain.Errorf(domain.CodeServerError,
						"The service failed to handle this request; it is safe to retry with backoff (request id %s).", id))
				}
			}
			if rec.route == "" {
				rec.route = r.Pattern
			}
			if rec.route == "" {
				rec.route = "unmatched"
			}
			d := time.Since(start)
			s.metrics.Request(rec.route, r.Method, rec.status, d)
			s.logRequest(r, rec, d)
		}()
		next.ServeHTTP(rec, r)
	})
}

// boundCtx is a request's context: net/http's (cancelled when the client
// goes away), the request's recorder as its one value, and the deadline of
// requestTimeout. The deadline's timer is set up (armed) only when
// something asks for Done or Err, which a request answered from memory
// never does: with context.WithTimeout it was 17 % of the allocations of a
// GET /v1/me and 3.6 % of its CPU.
type boundCtx struct {
	parent   context.Context
	rec      *recorder
	deadline time.Time

	armed   atomic.Pointer[context.Context]
	mu      sync.Mutex // arming
	cancel  context.CancelFunc
	stopped bool
}

func newBoundCtx(parent context.Context, rec *recorder, deadline time.Time) *boundCtx {
	return &boundCtx{parent: parent, rec: rec, deadline: deadline}
}

// arm returns the context carrying the deadline, making it on first use.
// After stop it is made cancelled, as the request it belonged to is over.
func (c *boundCtx) arm() context.Context {
	if a := c.armed.Load(); a != nil {
		return *a
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.armed.Load(); a != nil {
		return *a
	}
	a, cancel := context.WithDeadline(c.parent, c.deadline)
	c.cancel = cancel
	if c.stopped {
		cancel()
	}
	c.armed.Store(&a)
	return a
}

// stop ends the request's context: cancelled from now on, timer released.
func (c *boundCtx) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
}

func (c *boundCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *boundCtx) Done() <-chan struct{} { return c.arm().Done() }

func (c *boundCtx) Err() error { return c.arm().Err() }

// Value answers for the recorder itself; anything else goes to the armed
// context once there is one, so that contexts derived from this one find
// its cancellation the way they find a plain context's, without a
// goroutine each.
func (c *boundCtx) Value(key any) any {
	if key == ctxLogAttrs {
		return c.rec
	}
	if a := c.armed.Load(); a != nil {
		return (*a).Value(key)
	}
	return c.parent.Value(key)
}

func (c *boundCtx) String() string { return "api.boundCtx" }

// logRequest writes the request's log line. The attributes are typed (no
// reflection, no fmt), and the record goes straight to the handler: through
// Logger.LogAttrs, slog would walk the stack for a source position that the
// handler never prints. The line is the one slog's Info with these
// key-value pairs wrote.
func (s *Server) logRequest(r *http.Request, rec *recorder, d time.Duration) {
	ctx := context.Background()
	h := s.log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	lr := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	lr.AddAttrs(
		slog.String("request_id", rec.id),
		slog.String("method", logMethod(r.Method)),
		slog.String("path", logPath(r.URL.Path)),
		slog.String("route", rec.route),
		slog.Int("status", rec.status),
		slog.Int64("bytes", rec.written),
		// A float, as before, for the readers of the logs; slog formats it
		// through encoding/json, the one costly attribute left (~2 % of a
		// GET /v1/me).
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("key_prefix", rec.keyPfx),
		slog.String("remote", s.clients.Addr(r)),
	)
	_ = h.Handle(ctx, lr)
}

// logPath keeps a credential pasted into a URL path out of the log.
func logPath(p string) string {
	if !strings.Contains(p, "agk_") {
		return p
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.Contains(part, "agk_") {
			parts[i] = "[redacted]"
		}
	}
	return strings.Join(parts, "/")
}

// queryCredentialNames are refused in the query string before anything else.
var queryCredentialNames = []string{"authorization", "access_token", "api_key", "apikey", "token"}

func hasQueryCredential(raw string) bool {
	for raw != "" {
		var piece string
		// "&" and ";" both end a parameter here: a server or proxy that
		// splits on ";" must not see a credential this check missed.
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			piece, raw = raw[:i], raw[i+1:]
		} else {
			piece, raw = raw, ""
		}
		name, _, _ := strings.Cut(piece, "=")
		if n, err := unescapeLoose(name); err == nil {
			name = n
		}
		for _, c := range queryCredentialNames {
			if strings.EqualFold(name, c) {
				return true
			}
		}
	}
	return false
}

func unescapeLoose(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// requestTimeout bounds a /v1 request: above a question's 30 s model
// time-out, below the server's 60 s write timeout.
const requestTimeout = 45 * time.Second

// auth is what the authentication step learned about a request.
type auth struct {
	key domain.APIKey
	now time.Time
}

func authFrom(ctx context.Context) auth {
	if rec, _ := ctx.Value(ctxLogAttrs).(*recorder); rec != nil && rec.authed {
		return rec.auth
	}
	a, _ := ctx.Value(ctxAuth).(auth)
	return a
}

// serveV1 runs the order of checks (docs/api.md) up to routing.
func (s *Server) serveV1(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rec, _ := ctx.Value(ctxLogAttrs).(*recorder)
	if rec == nil { // not under observe (which also bounds the request)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		rec = &recorder{}
		ctx = context.WithValue(ctx, ctxLogAttrs, rec)
		r = r.WithContext(ctx)
	}
	// 1. A credential in the query string is refused before anything else.
	rec.route = "/v1 (refused before routing)"
	// The contract refuses it "before anything else is done": it carries
	// the per-address limiter's headers, but past that limit it is still
	// 403, never 429 (docs/api.md, Authentication).
	if hasQueryCredential(r.URL.RawQuery) {
		s.metrics.AuthFailure("query_credential")
		if s.limitAnonymous(w, r, false) {
			writeError(w, r, s.log, domain.Errorf(domain.CodeAccessDenied,
				"API keys are accepted only in the Authorization header, never in the query string; this request was refused and the key should be considered exposed."))
		}
		return
	}
	// 2. Exactly one Authorization header with a Bearer token.
	headers := r.Header["Authorization"] // canonical key: no Values lookup
	token, ok := "", len(headers) == 1
	if ok {
		token, ok = credential.ParseBearer(headers[0])
	}
	if !ok {
		s.metrics.AuthFailure("header")
		s.refuseAnonymous(w, r, domain.Errorf(domain.CodeInvalidCredentials,
			"The Authorization header is missing or malformed; send Authorization: Bearer <API key>."))
		return
	}
	// 3. The key itself.
	now := s.now().UTC()
	key, reason, err := s.authenticate(ctx, token, now)
	if err != nil {
		// The store failed before any key was identified: the answer is
		// the 500, with the per-address limiter's headers, as every /v1
		// response carries rate-limit headers.
		if s.limitAnonymous(w, r, false) {
			writeError(w, r, s.log, err)
		}
		return
	}
	if reason != "" {
		s.metrics.AuthFailure(reason)
		s.refuseAnonymous(w, r, domain.Errorf(domain.CodeInvalidCredentials, "The API key is invalid."))
		return
	}
	rec.keyPfx = key.Prefix
	// 4. The key's rate limit; refused requests are not counted.
	res, err := s.limiter.Allow(ctx, key.ID, key.RateLimitPerMinute)
	if err != nil {
		writeError(w, r, s.log, fmt.Errorf("rate limit: %w", err))
		return
	}
	setRateHeaders(w.Header(), res, now, "per-key")
	if !res.Allowed {
		s.metrics.RateLimited("key")
		s.writeRateLimited(w, r, res)
		return
	}
	s.toucher.Touch(key.ID, now)
	// 5. Routing: an unclean path is no endpoint (a mux would redirect it),
	// and HEAD is a method no /v1 route has (a mux would answer it as GET;
	// docs/api.md: a method the path does not have is 404).
	if p := r.URL.Path; r.Method == http.MethodHead || p != "/v1/" && path.Clean(p) != p {
		rec.route = "unmatched"
		writeError(w, r, s.log, notFoundRoute(r))
		return
	}
	// The key reaches the handlers through the request's recorder, which
	// its context already holds (authFrom): no second copy of the request.
	rec.auth, rec.authed = auth{key: key, now: now}, true
	s.mux.ServeHTTP(w, r)
	rec.route = r.Pattern
}

// authenticate returns the key for token, or the reason it is unusable
// (for metrics only: the client gets one answer whatever the reason). An
// unknown prefix costs the same hash comparison as a known one, so timing
// does not tell them apart either. Malformed tokens (failed checksum) are
// refused before any lookup.
//
// Keys usually come from the store's memory, which an unknown prefix never
// does: it needs a database read that finds nothing. So a refusal of a key
// answered from memory makes that same read, for a prefix no key has
// (absentPrefix): every refusal, whatever its reason, costs one read that
// finds no row, as an unknown prefix does. Reading the refused key's own
// row instead cost ~10 µs more on SQLite and ~25 µs more on PostgreSQL
// (scanning and decoding the row), enough for a median to tell a known
// prefix from an unknown one (BenchmarkAuthRefusalTiming). Only admitted
// requests are spared the read.
func (s *Server) authenticate(ctx context.Context, token string, now time.Time) (domain.APIKey, string, error) {
	cred, err := credential.Parse(token)
	if err != nil {
		return domain.APIKey{}, "malformed", nil
	}
	start := time.Now()
	k, accountActive, fromMemory, err := s.store.LookupKey(ctx, cred.Prefix)
	s.metrics.Store("key_by_prefix", time.Since(start))
	if errors.Is(err, domain.ErrNotFound) {
		credential.Equal(credential.DummyHash[:], token)
		return domain.APIKey{}, "unknown", nil
	}
	if err != nil {
		return domain.APIKey{}, "", fmt.Errorf("look up key: %w", err)
	}
	reason := ""
	switch {
	case !credential.Equal(k.Hash, token):
		reason = "wrong_secret"
	case k.Env != cred.Env:
		reason = "env_mismatch"
	case !accountActive:
		reason = "account_inactive"
	default:
		switch k.Status(now) {
		case domain.KeyRevoked:
			reason = "revoked"
		case domain.KeyExpired:
			s.expiredInUse(ctx, k, now)
			reason = "expired"
		}
	}
	if reason != "" && fromMemory {
		if _, _, err := s.store.ReadKeyByPrefix(ctx, absentPrefix); err != nil && !errors.Is(err, domain.ErrNotFound) {
			return domain.APIKey{}, "", fmt.Errorf("look up key: %w", err)
		}
	}
	return k, reason, nil
}

// absentPrefix has a prefix's length and a character no prefix has
// (credential.Parse accepts only 0-9 and a-z), so no key is ever found by
// it: reading it costs what reading an unknown prefix costs.
const absentPrefix = "------------"

// refuseAnonymous answers a request that identified no key. Such requests
// are limited per client address; past the limit they get 429 instead.
func (s *Server) refuseAnonymous(w http.ResponseWriter, r *http.Request, refusal *domain.Error) {
	if s.limitAnonymous(w, r, true) {
		writeError(w, r, s.log, refusal)
	}
}

// limitAnonymous counts a request that identifies no key against its client
// address's limit and sets that limiter's headers. Past the limit it
// answers 429 itself when refuse is set, and reports false; it also
// answers, and reports false, when the limiter fails.
func (s *Server) limitAnonymous(w http.ResponseWriter, r *http.Request, refuse bool) bool {
	res, err := s.unauth.Allow(r.Context(), "addr:"+s.clients.Addr(r), s.unauthLimit)
	if err != nil {
		writeError(w, r, s.log, fmt.Errorf("rate limit: %w", err))
		return false
	}
	setRateHeaders(w.Header(), res, s.now(), "per-address")
	if !res.Allowed && refuse {
		s.metrics.RateLimited("address")
		s.writeRateLimited(w, r, res)
		return false
	}
	return true
}

// setRateHeaders writes the contract's X-RateLimit-* fields and, consistent
// with them, the IETF httpapi RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers: q quota, w window, r remaining,
// t seconds until reset).
func setRateHeaders(h http.Header, res ratelimit.Result, now time.Time, policy string) {
	reset := res.Reset.Unix()
	secs := max(reset-now.Unix(), 0)
	// One buffer for the values and one slice for the fields, assigned
	// under their canonical keys (what Set would do, without its copies).
	var buf [160]byte
	b := buf[:0]
	mark := func() int { return len(b) }
	i0 := mark()
	b = strconv.AppendInt(b, int64(res.Limit), 10)
	i1 := mark()
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	i2 := mark()
	b = strconv.AppendInt(b, reset, 10)
	i3 := mark()
	b = append(b, '"')
	b = append(b, policy...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, int64(res.Limit), 10)
	b = append(b, ";w=60"...)
	i4 := mark()
	b = append(b, '"')
	b = append(b, policy...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, secs, 10)
	i5 := mark()
	all := string(b)
	vals := []string{all[i0:i1], all[i1:i2], all[i2:i3], all[i3:i4], all[i4:i5]}
	h["X-Ratelimit-Limit"] = vals[0:1:1]
	h["X-Ratelimit-Remaining"] = vals[1:2:2]
	h["X-Ratelimit-Reset"] = vals[2:3:3]
	h["Ratelimit-Policy"] = vals[3:4:4]
	h["Ratelimit"] = vals[4:5:5]
}

func retrySeconds(res ratelimit.Result) int {
	secs := int((res.RetryAfter + time.Second - 1) / time.Second)
	return max(secs, 1)
}

// writeRateLimited answers 429 for a refused res, with Retry-After, which
// goes with 429 only.
func (s *Server) writeRateLimited(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
	secs := retrySeconds(res)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, domain.Errorf(domain.CodeRateLimitExceeded,
		"Rate limit of %d requests per minute exceeded; retry after %d seconds.", res.Limit, secs))
}

func notFoundRoute(r *http.Request) error {
	if m := knownMethod(r.Method); m != "" {
		return domain.Errorf(domain.CodeNotFound, "No endpoint %s %s.", m, logPath(r.URL.Path))
	}
	return domain.Errorf(domain.CodeNotFound, "No endpoint takes this method at %s.", logPath(r.URL.Path))
}

// scoped refuses the route unless the key holds scope (no inheritance).
func (s *Server) scoped(scope domain.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authFrom(r.Context()).key.HasScope(scope) {
			writeError(w, r, s.log, domain.Errorf(domain.CodeAccessDenied,
				"This API key lacks the %s scope, which this endpoint requires.", scope))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// agentRoute enforces a key's agent restriction on routes naming an agent:
// an agent of the caller's account outside the list is 403, and an id not in
// the caller's account is 404 for every key, never 403.
func (s *Server) agentRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		id := r.PathValue("agent_id")
		if !a.key.AllowsAgent(id) {
			if _, err := s.store.GetAgent(r.Context(), a.key.AccountID, id); err != nil {
				if errors.Is(err, domain.ErrNotFound) {
					err = agentNotFound(id)
				}
				writeError(w, r, s.log, err)
				return
			}
			writeError(w, r, s.log, domain.Errorf(domain.CodeAccessDenied,
				"This API key is restricted to other AI agents."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func agentNotFound(id string) error {
	if r := []rune(id); len(r) > 64 {
		id = string(r[:64]) + "…"
	}
	return domain.Errorf(domain.CodeNotFound, "No AI agent %q in this account.", id)
}

// expiredInUse puts the first use of an expired key into the account's
// audit trail (the console shows it), once per key per process; the store
// write happens off the request path.
func (s *Server) expiredInUse(ctx context.Context, k domain.APIKey, now time.Time) {
	if _, seen := s.expired.LoadOrStore(k.ID, true); seen {
		return
	}
	ev := domain.AuditEvent{
		ID: domain.NewID(domain.PrefixEvent, now), AccountID: k.AccountID, KeyID: k.ID,
		Action: "expired_in_use", Actor: "system", Detail: "a request used the key after it expired",
		CreatedAt: now.Truncate(time.Millisecond),
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.store.AddAuditEvent(ctx, ev); err != nil {
			s.log.Warn("audit expired key use", "key_prefix", k.Prefix, "err", err)
			s.expired.Delete(k.ID)
		}
	}()
}
