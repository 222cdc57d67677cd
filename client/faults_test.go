package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/testenv"
)

// seen is one request as the fault server received it.
type seen struct {
	method, uri, body string
	header            http.Header
}

// faultServer answers each request with the next step of a script; past
// its end it repeats the last step. A step writes the response or, with
// drop, closes the connection without one.
type faultServer struct {
	*httptest.Server
	mu    sync.Mutex
	steps []step
	reqs  []seen
}

type step struct {
	status int
	header map[string]string
	body   string
	drop   bool
}

const meBody = `{"data":{"id":"key_1","name":"k","description":"","prefix":"abcdefabcdef","scopes":["aiagents:read"],"rate_limit_per_minute":120,"last_used_at":"2026-11-22T12:00:00.000Z","expires_at":null}}`

func serverError(id string) step {
	return step{status: 500, header: map[string]string{"X-Request-Id": id},
		body: `{"error":{"code":"server_error","message":"Something went wrong on our side (request ` + id + `)."}}`}
}

func ok(body string) step { return step{status: 200, body: body} }

func newFaultServer(t *testing.T, steps ...step) *faultServer {
	t.Helper()
	fs := &faultServer{steps: steps}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fs.mu.Lock()
		fs.reqs = append(fs.reqs, seen{method: r.Method, uri: r.RequestURI, body: string(b), header: r.Header.Clone()})
		st := fs.steps[min(len(fs.reqs), len(fs.steps))-1]
		fs.mu.Unlock()
		if st.drop {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range st.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st.status)
		io.WriteString(w, st.body)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *faultServer) requests() []seen {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]seen(nil), fs.reqs...)
}

func testKey(t *testing.T) string {
	t.Helper()
	c, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	return c.Text
}

// faultClient is a client on fs that sleeps on a fake clock.
func faultClient(t *testing.T, fs *faultServer, key string, opts ...client.Option) tclient {
	t.Helper()
	return newTClient(t, fs.URL+"/v1", key, testenv.NewClock(time.Time{}), opts...)
}

func TestServerErrorsBackOffExponentiallyWithFullJitter(t *testing.T) {
	fs := newFaultServer(t, serverError("r1"), step{status: 502, body: "<html>bad gateway</html>"}, serverError("r3"), ok(meBody))
	var asked []int64
	c := faultClient(t, fs, testKey(t),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}),
		// The largest draw: each sleep is then its cap minus 1 ns.
		client.WithJitter(func(n int64) int64 { asked = append(asked, n); return n - 1 }))
	me, err := c.Me(context.Background())
	if err != nil || me.ID != "key_1" {
		t.Fatalf("Me: %+v, %v", me, err)
	}
	wantCaps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} // 400 ms capped to MaxDelay
	if fmt.Sprint(asked) != fmt.Sprint([]int64{int64(wantCaps[0]), int64(wantCaps[1]), int64(wantCaps[2])}) {
		t.Fatalf("jitter drawn in [0, %v), want caps %v", asked, wantCaps)
	}
	got := c.sleeper.got()
	for i, d := range got {
		if d != wantCaps[i]-1 {
			t.Fatalf("sleep %d = %v, want %v", i, d, wantCaps[i]-1)
		}
	}
	if len(got) != 3 || len(fs.requests()) != 4 {
		t.Fatalf("%d sleeps, %d requests", len(got), len(fs.requests()))
	}
}

// With the real random source every sleep lies in [0, cap) and the sleeps
// are not all alike (full jitter, not a fixed schedule).
func TestJitterStaysWithinItsBounds(t *testing.T) {
	fs := newFaultServer(t, serverError("r"))
	c := faultClient(t, fs, testKey(t), client.WithRetry(client.RetryPolicy{MaxAttempts: 200, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}))
	_, err := c.Me(context.Background())
	e := wantAPIError(t, err, 500, client.CodeServerError)
	if e.RequestID != "r" {
		t.Fatalf("last error %+v", e)
	}
	got := c.sleeper.got()
	if len(got) != 199 || len(fs.requests()) != 200 {
		t.Fatalf("%d sleeps, %d requests", len(got), len(fs.requests()))
	}
	distinct := map[time.Duration]bool{}
	for i, d := range got {
		ceil := min(time.Millisecond<<min(i, 40), 50*time.Millisecond)
		if d < 0 || d >= ceil {
			t.Fatalf("sleep %d = %v, outside [0, %v)", i, d, ceil)
		}
		distinct[d] = true
	}
	if len(distinct) < 100 {
		t.Fatalf("only %d distinct sleeps in 199: not jittered", len(distinct))
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	fs := newFaultServer(t, serverError("r"))
	c := faultClient(t, fs, testKey(t))
	_, err := c.Me(context.Background())
	wantAPIError(t, err, 500, client.CodeServerError)
	if n := len(fs.requests()); n != client.DefaultRetryPolicy().MaxAttempts {
		t.Fatalf("%d requests, want %d", n, client.DefaultRetryPolicy().MaxAttempts)
	}
}

// A response without the API's envelope (a proxy's page) is still an
// *Error, retried when 5xx.
func TestForeignErrorPages(t *testing.T) {
	fs := newFaultServer(t, step{status: 503, header: map[string]string{"Retry-After": "2"}, body: "<html>down</html>"}, ok(meBody))
	c := faultClient(t, fs, testKey(t), client.WithJitter(func(int64) int64 { return 0 }))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Backoff drew 0; the proxy's Retry-After (2 s) is honoured.
	if s := c.sleeper.got(); len(s) != 1 || s[0] != 2*time.Second {
		t.Fatalf("sleeps %v", s)
	}
	fs = newFaultServer(t, step{status: 404, body: "not json"})
	c = faultClient(t, fs, testKey(t))
	_, err := c.Me(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "" || e.Message == "" || len(fs.requests()) != 1 {
		t.Fatalf("foreign 404: %+v", e)
	}
}

func TestContextCancelledMidBackoff(t *testing.T) {
	fs := newFaultServer(t, serverError("r1"))
	key := testKey(t)
	// The real sleep this time: a 10 s backoff that the context cuts short.
	c, err := client.New(fs.URL+"/v1", key, client.WithRetry(client.RetryPolicy{BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second}),
		client.WithJitter(func(n int64) int64 { return n - 1 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = c.Me(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("returned after %v", took)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not match context.Canceled", err)
	}
	e := wantAPIError(t, err, 500, client.CodeServerError)
	if e.RequestID != "r1" || len(fs.requests()) != 1 {
		t.Fatalf("last error %+v; %d requests", e, len(fs.requests()))
	}

	// A deadline sooner than the next backoff: the last error at once, no wait.
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	start = time.Now()
	_, err = c.Me(ctx)
	if took := time.Since(start); took > 900*time.Millisecond { // waiting would take the whole second
		t.Fatalf("waited %v for a backoff past the deadline", took)
	}
	wantAPIError(t, err, 500, client.CodeServerError)
}

func TestTransportErrors(t *testing.T) {
	fs := newFaultServer(t, step{drop: true}, step{drop: true}, ok(meBody))
	key := testKey(t)
	c := faultClient(t, fs, key)
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatalf("Me after two dropped connections: %v", err)
	}
	if n := len(fs.requests()); n != 3 || len(c.sleeper.got()) != 2 {
		t.Fatalf("%d requests, sleeps %v", n, c.sleeper.got())
	}

	// Exhausted: the transport error, without the key.
	fs = newFaultServer(t, step{drop: true})
	c = faultClient(t, fs, key)
	_, err := c.Me(context.Background())
	var e *client.Error
	if err == nil || errors.As(err, &e) || strings.Contains(err.Error(), key[22:]) {
		t.Fatalf("error %v", err)
	}

	// Ask sends an Idempotency-Key, so a dropped connection is retried
	// with the same key: the server answers a repeat from what it saved.
	fs = newFaultServer(t, step{drop: true}, step{status: 201, body: `{"data":{"id":"qst_1"}}`})
	c = faultClient(t, fs, key)
	if _, err := c.Ask(context.Background(), "agt_1", client.Question{Question: "hi"}); err != nil {
		t.Fatalf("Ask after a dropped connection: %v", err)
	}
	wantOneIdempotencyKey(t, fs.requests(), 2)
	// A 5xx is retried too.
	fs = newFaultServer(t, serverError("r"), step{status: 201, body: `{"data":{"id":"qst_1","conversation_id":"conv_1","question":"hi","answer":"hello","created_at":"2026-11-22T12:00:00.000Z","answer_ms":5}}`})
	c = faultClient(t, fs, key)
	a, err := c.Ask(context.Background(), "agt_1", client.Question{Question: "hi"})
	if err != nil || a.Answer != "hello" || a.AnswerMS != 5 || len(fs.requests()) != 2 {
		t.Fatalf("Ask after a 500: %+v, %v", a, err)
	}
}

// Every attempt sends the whole body again.
func TestBodiesAreResent(t *testing.T) {
	fs := newFaultServer(t, serverError("r"), step{drop: true},
		step{status: 201, body: `{"data":{"id":"agt_1","name":"Helpdesk","enabled":true,"created_at":"2026-11-22T12:00:00.000Z","instructions":"x","updated_at":"2026-11-22T12:00:00.000Z"}}`})
	c := faultClient(t, fs, testKey(t))
	a, err := c.CreateAgent(context.Background(), client.NewAgent{Name: "Helpdesk", Instructions: "x", AdoptExisting: true})
	if err != nil || a.ID != "agt_1" || a.Adopted {
		t.Fatalf("CreateAgent: %+v, %v", a, err)
	}
	reqs := fs.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.method != "POST" || r.uri != "/v1/ai-agents" || r.body != `{"name":"Helpdesk","instructions":"x"}` ||
			r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("request %+v", r)
		}
	}
}

// The contract's non-retryable statuses are answered after one request.
func TestNoRetryOnClientErrors(t *testing.T) {
	for _, st := range []int{400, 401, 403, 404, 409, 413, 415} {
		fs := newFaultServer(t, step{status: st, body: `{"error":{"code":"x","message":"no"}}`}, ok(meBody))
		c := faultClient(t, fs, testKey(t))
		if _, err := c.Me(context.Background()); err == nil {
			t.Fatalf("%d: no error", st)
		}
		if n := len(fs.requests()); n != 1 {
			t.Fatalf("%d retried: %d requests", st, n)
		}
	}
}

// The key travels only in the Authorization header: never in a URL, a
// query, a body or another header, and never to a redirect's target.
func TestKeyOnlyInTheAuthorizationHeader(t *testing.T) {
	key := testKey(t)
	secret := key[22:]
	other := newFaultServer(t, ok(meBody))
	fs := newFaultServer(t,
		ok(`{"data":[{"id":"agt_1","name":"a","enabled":true,"created_at":"2026-11-22T12:00:00.000Z"}],"meta":{"limit":1,"next":"c1","has_more":true}}`),
		ok(`{"data":[],"meta":{"limit":1,"next":null,"has_more":false}}`),
		ok(`{"data":{"id":"agt_1","name":"a","enabled":true,"created_at":"2026-11-22T12:00:00.000Z","instructions":"","updated_at":"2026-11-22T12:00:00.000Z"}}`),
		step{status: 302, header: map[string]string{"Location": other.URL + "/v1/me"}})
	c := faultClient(t, fs, key, client.WithUserAgent("probe/1"))
	ctx := context.Background()
	for _, err := range c.Agents(ctx, client.ListOptions{Limit: 1, UpdatedSince: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateAgent(ctx, client.NewAgent{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Me(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 302 {
		t.Fatalf("redirect: %v", err)
	}
	if n := len(other.requests()); n != 0 {
		t.Fatalf("the redirect was followed: %d requests reached its target", n)
	}
	reqs := fs.requests()
	if len(reqs) != 4 || reqs[0].uri != "/v1/ai-agents?limit=1&updated_since=2026-01-02T03%3A04%3A05Z" ||
		reqs[1].uri != "/v1/ai-agents?limit=1&next=c1&updated_since=2026-01-02T03%3A04%3A05Z" {
		t.Fatalf("requests %+v", reqs)
	}
	for _, r := range reqs {
		keyOnlyInAuthorizationCheck(t, r, key, secret)
	}
}

// keyOnlyInAuthorizationCheck: r carries key once, in its Authorization
// header, and secret nowhere else (URI, body, other headers); its
// User-Agent and Accept are the client's.
func keyOnlyInAuthorizationCheck(t *testing.T, r seen, key, secret string) {
	t.Helper()
	if got := r.header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+key {
		t.Fatalf("Authorization %q", got)
	}
	if strings.Contains(r.uri, secret) || strings.Contains(r.body, secret) {
		t.Fatalf("key in %s %s", r.uri, r.body)
	}
	for name, vs := range r.header {
		if name != "Authorization" && strings.Contains(strings.Join(vs, " "), secret) {
			t.Fatalf("key in header %s", name)
		}
	}
	if r.header.Get("User-Agent") != "probe/1" || r.header.Get("Accept") != "application/json" {
		t.Fatalf("headers %v", r.header)
	}
}

// No way of printing a Client shows the key; the public prefix is shown.
func TestClientNeverPrintsTheKey(t *testing.T) {
	key := testKey(t)
	secret, prefix := key[22:], key[9:21]
	c, err := client.New("http://127.0.0.1:8080/v1", key)
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%T %d"} {
		outs = append(outs, fmt.Sprintf(verb, c), fmt.Sprintf(verb, *c))
	}
	outs = append(outs, fmt.Sprint(c), fmt.Sprintln(*c), c.String())
	var text, js strings.Builder
	slog.New(slog.NewTextHandler(&text, nil)).Info("x", "client", c, "value", *c)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("x", "client", c, "value", *c)
	b, _ := json.Marshal(c)
	outs = append(outs, text.String(), js.String(), string(b))
	for _, o := range outs {
		if strings.Contains(o, secret) || strings.Contains(o, key) {
			t.Fatalf("printed the key: %s", o)
		}
	}
	if !strings.Contains(c.String(), prefix) || !strings.Contains(c.String(), "127.0.0.1:8080/v1") {
		t.Fatalf("String() = %q", c.String())
	}
}

// The iterator follows has_more, not the length of data: an empty page
// that says has_more goes on to the next one.
func TestAgentsStopsOnHasMoreNotOnEmptyData(t *testing.T) {
	fs := newFaultServer(t,
		ok(`{"data":[],"meta":{"limit":2,"next":"c1","has_more":true}}`),
		ok(`{"data":[{"id":"agt_1","name":"a","enabled":false,"created_at":"2026-11-22T12:00:00.000Z"}],"meta":{"limit":2,"next":null,"has_more":false}}`),
		ok(`{"data":[{"id":"agt_2","name":"b","enabled":true,"created_at":"2026-11-22T12:00:00.000Z"}],"meta":{"limit":2,"next":null,"has_more":false}}`))
	c := faultClient(t, fs, testKey(t))
	var ids []string
	for a, err := range c.Agents(context.Background(), client.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, ",") != "agt_1" || len(fs.requests()) != 2 {
		t.Fatalf("ids %v after %d requests", ids, len(fs.requests()))
	}
	// A cursor that does not move is reported, not followed for ever.
	fs = newFaultServer(t, ok(`{"data":[{"id":"agt_1","name":"a","enabled":true,"created_at":"2026-11-22T12:00:00.000Z"}],"meta":{"limit":1,"next":"same","has_more":true}}`))
	c = faultClient(t, fs, testKey(t))
	var errs []error
	for _, err := range c.Agents(context.Background(), client.ListOptions{Limit: 1}) {
		errs = append(errs, err)
	}
	if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] == nil || len(fs.requests()) != 2 {
		t.Fatalf("repeated cursor: %v after %d requests", errs, len(fs.requests()))
	}
	// has_more with a null next is a broken server, reported as an error.
	fs = newFaultServer(t, ok(`{"data":[],"meta":{"limit":2,"next":null,"has_more":true}}`))
	c = faultClient(t, fs, testKey(t))
	for _, err := range c.Agents(context.Background(), client.ListOptions{}) {
		if err == nil || !strings.Contains(err.Error(), "has_more") {
			t.Fatalf("error %v", err)
		}
	}
}

// A cursor that comes round again (A, B, A…) is reported too, not followed
// for ever.
func TestAgentsStopsOnACursorCycle(t *testing.T) {
	page := func(next string) step {
		return ok(`{"data":[],"meta":{"limit":1,"next":"` + next + `","has_more":true}}`)
	}
	fs := newFaultServer(t, page("A"), page("B"), page("A"), page("B"))
	c := faultClient(t, fs, testKey(t))
	var last error
	for _, err := range c.Agents(context.Background(), client.ListOptions{}) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "already given") || len(fs.requests()) != 3 {
		t.Fatalf("cursor cycle: %v after %d requests", last, len(fs.requests()))
	}
}

// Ask and CreateAgent are retried after a gateway's 502, 503 or 504 page
// like any call, every attempt with the one Idempotency-Key of the call; a
// new call has a new key.
func TestIdempotentCallsRetryWithOneKey(t *testing.T) {
	answer := ok(`{"data":{"id":"q_1","conversation_id":"c_1","question":"q","answer":"a","created_at":"2026-11-22T12:00:00.000Z","answer_ms":5}}`)
	var keys []string
	for _, gateway := range []int{502, 503, 504} {
		fs := newFaultServer(t, step{status: gateway, body: "<html>Gateway</html>"}, step{drop: true}, answer)
		c := faultClient(t, fs, testKey(t))
		if a, err := c.Ask(context.Background(), "agt_1", client.Question{Question: "q"}); err != nil || a.ID != "q_1" {
			t.Fatalf("Ask after a gateway's %d and a dropped connection: %+v, %v", gateway, a, err)
		}
		keys = append(keys, wantOneIdempotencyKey(t, fs.requests(), 3))
	}
	fs := newFaultServer(t, step{status: 504, body: "<html>Gateway Timeout</html>"}, step{status: 201, body: `{"data":{"id":"agt_1","name":"a"}}`})
	c := faultClient(t, fs, testKey(t))
	if a, err := c.CreateAgent(context.Background(), client.NewAgent{Name: "a"}); err != nil || a.ID != "agt_1" {
		t.Fatalf("CreateAgent after a 504: %+v, %v", a, err)
	}
	keys = append(keys, wantOneIdempotencyKey(t, fs.requests(), 2))
	for i := range keys {
		for j := range i {
			if keys[i] == keys[j] {
				t.Fatalf("two calls sent one key %q", keys[i])
			}
		}
	}
	// Other calls send none.
	fs = newFaultServer(t, ok(meBody))
	c = faultClient(t, fs, testKey(t))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := fs.requests()[0].header.Values("Idempotency-Key"); k != nil {
		t.Fatalf("GET /me sent Idempotency-Key %q", k)
	}
}

// wantOneIdempotencyKey checks that n requests came, all with one
// Idempotency-Key of 32 hex digits, and returns it.
func wantOneIdempotencyKey(t *testing.T, reqs []seen, n int) string {
	t.Helper()
	if len(reqs) != n {
		t.Fatalf("%d requests, want %d", len(reqs), n)
	}
	key := reqs[0].header.Get("Idempotency-Key")
	if len(key) != 32 || strings.Trim(key, "0123456789abcdef") != "" {
		t.Fatalf("Idempotency-Key %q, want 32 hex digits", key)
	}
	for i, r := range reqs {
		if got := r.header.Values("Idempotency-Key"); len(got) != 1 || got[0] != key {
			t.Fatalf("attempt %d sent Idempotency-Key %q, want %q", i+1, got, key)
		}
	}
	return key
}

// An answer over 8 MiB is an error, not retried: asking again would repeat
// a create that succeeded.
func TestOversizedAnswerIsNotRetried(t *testing.T) {
	fs := newFaultServer(t, step{status: 201, body: `{"data":{"id":"agt_1","name":"` + strings.Repeat("a", 9<<20) + `"}}`})
	c := faultClient(t, fs, testKey(t))
	_, err := c.CreateAgent(context.Background(), client.NewAgent{Name: "a"})
	if err == nil || !strings.Contains(err.Error(), "larger than") || len(fs.requests()) != 1 {
		t.Fatalf("oversized answer: %v after %d requests", err, len(fs.requests()))
	}
}

// A context cancelled with a cause: the error matches the cause, the
// context's own error and the last *Error.
func TestContextCauseAndErrorBothMatch(t *testing.T) {
	fs := newFaultServer(t, serverError("r1"))
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	// The jitter is drawn once the 500 has been read, before the wait:
	// cancelling there (not after a fixed 50 ms, which a loaded machine
	// could reach before the answer) makes the 500 the last attempt.
	c, err := client.New(fs.URL+"/v1", testKey(t), client.WithRetry(client.RetryPolicy{BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second}),
		client.WithJitter(func(n int64) int64 { cancel(cause); return n - 1 }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Me(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("error %v: Canceled %v, cause %v", err, errors.Is(err, context.Canceled), errors.Is(err, cause))
	}
	wantAPIError(t, err, 500, client.CodeServerError)
}

// The key stays out of New's errors even when it was pasted into the base
// URL, and out of a Client printed inside another value.
func TestKeyPastedIntoTheURLIsNotEchoed(t *testing.T) {
	key := testKey(t)
	secret := key[22:]
	for _, base := range []string{
		"https://api.example.com/v1?api_key=" + key,
		"https://" + key + "@api.example.com/v1",
		"https://api.example.com/v1#" + key,
		"https://api.example.com/" + key,
		"https://api.example.com/v1/%zz" + key,
	} {
		if _, err := client.New(base, key); err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("New(%q): %v", base, err)
		}
	}
	c, err := client.New("https://api.example.com/v1", key)
	if err != nil {
		t.Fatal(err)
	}
	type holder struct{ c client.Client }
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if out := fmt.Sprintf(verb, holder{*c}); strings.Contains(out, secret) {
			t.Fatalf("%s of a value holding a Client: %s", verb, out)
		}
	}
	var js strings.Builder
	slog.New(slog.NewJSONHandler(&js, nil)).Info("x", "h", holder{*c})
	if strings.Contains(js.String(), secret) {
		t.Fatalf("slog of a value holding a Client: %s", js.String())
	}
}
