package api

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// postgresBehindProxy opens a store on the test's PostgreSQL through a
// proxy the test can cut or stall; both are restored and closed when the
// test ends.
func postgresBehindProxy(t *testing.T) (*store.Store, *testenv.Proxy) {
	t.Helper()
	u, err := url.Parse(storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	st, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Restore(); st.Close() })
	return st, proxy
}

// TestPostgresOutage cuts the connection to PostgreSQL mid-run: requests
// get 500 server_error naming the request id, /readyz fails, nothing hangs,
// and service resumes by itself when the database returns.
func TestPostgresOutage(t *testing.T) {
	st, proxy := postgresBehindProxy(t)
	f := newFixtureOn(t, st)
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "Before the outage")
	f.do(req{method: "GET", path: "/readyz"}).wantStatus(t, 200)

	proxy.Cut()
	for _, r := range []req{
		{method: "GET", path: "/v1/me", key: key},
		{method: "GET", path: "/v1/ai-agents", key: key},
		{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"During"}`},
		{method: "PUT", path: "/v1/ai-agents/" + id + "/enabled", key: key, body: `{"enabled":false}`},
	} {
		start := time.Now()
		resp := f.do(r)
		resp.wantError(t, 500, domain.CodeServerError)
		if rid := resp.Header().Get("X-Request-Id"); !strings.Contains(resp.message(), rid) {
			t.Fatalf("500 without its request id: %s", resp.Body.String())
		}
		if strings.Contains(strings.ToLower(resp.Body.String()), "connect") || strings.Contains(resp.Body.String(), proxy.Addr()) {
			t.Fatalf("internals leaked: %s", resp.Body.String())
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s %s took %v during the outage", r.method, r.path, d)
		}
		// Every /v1 response carries rate-limit headers: the key's when the
		// failure came after it was identified, else the address's.
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if resp.Header().Get(h) == "" {
				t.Fatalf("%s %s: 500 without %s: %v", r.method, r.path, h, resp.Header())
			}
		}
	}
	f.do(req{method: "GET", path: "/readyz"}).wantError(t, 503, domain.CodeServerError)

	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := f.get("/v1/me", key); r.Code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("service did not resume after the database returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.do(req{method: "GET", path: "/readyz"}).wantStatus(t, 200)
	f.send("POST", "/v1/ai-agents", key, `{"name":"After the outage"}`).wantStatus(t, 201)
	if !strings.Contains(f.logs.String(), "internal error") {
		t.Fatal("the outage's causes are not in the log")
	}
}

// TestPostgresHangs stalls the connection to PostgreSQL mid-run (every
// connection stays open and nothing passes, as with a stopped server or a
// hung host): with no Redis, every request needs the store to authenticate,
// and each answers 500 server_error within the store's bound
// (store.AuthReadTimeout, plus the driver's cancellation), not the request's;
// /readyz answers 503 within its bound; service resumes when bytes flow.
func TestPostgresHangs(t *testing.T) {
	st, proxy := postgresBehindProxy(t)
	f := newFixtureOn(t, st)
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "Before the stall")
	f.get("/v1/me", key).wantStatus(t, 200)

	proxy.Stall()
	bound := store.AuthReadTimeout + 2*time.Second // the driver gives up on a cancelled query within a second
	// Concurrent requests share the store's checks: those queued behind
	// one that gives up fail with it rather than each wait in turn.
	reqs := []req{
		{method: "GET", path: "/v1/ai-agents/" + id, key: key},
		{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"During"}`},
	}
	for range 6 {
		reqs = append(reqs, req{method: "GET", path: "/v1/me", key: key})
	}
	got := make([]*response, len(reqs))
	took := make([]time.Duration, len(reqs))
	done := make(chan int)
	for i, r := range reqs {
		go func() {
			start := time.Now()
			got[i] = f.do(r)
			took[i] = time.Since(start)
			done <- i
		}()
	}
	for range reqs {
		<-done
	}
	for i, r := range reqs {
		got[i].wantError(t, 500, domain.CodeServerError)
		if took[i] > bound {
			t.Errorf("%s %s took %v while the store hung; want at most %v", r.method, r.path, took[i], bound)
		}
	}
	start := time.Now()
	f.do(req{method: "GET", path: "/readyz"}).wantError(t, 503, domain.CodeServerError)
	if d := time.Since(start); d > bound {
		t.Errorf("/readyz took %v while the store hung", d)
	}

	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for f.get("/v1/me", key).Code != 200 {
		if time.Now().After(deadline) {
			t.Fatal("service did not resume after the store answered again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.send("POST", "/v1/ai-agents", key, `{"name":"After the stall"}`).wantStatus(t, 201)
}

// TestRedisOutage cuts the connection to Redis mid-run: the API keeps
// answering (the in-process fallback decides, at the full ceiling: degraded,
// never unlimited), every response keeps its rate-limit headers, nothing
// waits long on the dead connection, the change is logged, and decisions go
// back to Redis by itself when it returns.
func TestRedisOutage(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opts.Addr)
	opts.Addr = proxy.Addr()
	opts.MaxRetries = 0
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	var rl *ratelimit.Redis
	f := newFixture(t, "sqlite", func(c *Config) {
		fallback := ratelimit.NewMemory(nil)
		t.Cleanup(fallback.Close)
		rl = ratelimit.NewRedis(rc, fallback, c.Log)
		t.Cleanup(rl.Close)
		c.Limiter = rl
	})
	const ceiling = 5
	key := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = ceiling }, domain.ScopeAgentsRead).Credential

	// Redis decides: three admissions counted there.
	for i := range 3 {
		r := f.get("/v1/me", key)
		r.wantStatus(t, 200)
		if got, want := redisOutageRemaining(r), fmt.Sprint(ceiling-1-i); got != want {
			t.Fatalf("with Redis, request %d: remaining %s, want %s", i, got, want)
		}
	}

	// Redis goes away: the fallback starts its own window at the full
	// ceiling, so exactly `ceiling` more are admitted, then 429.
	proxy.Cut()
	for i := range ceiling + 1 {
		redisOutageDuringRequest(t, f, key, i, ceiling)
	}
	if rl.Fallbacks() < ceiling+1 {
		t.Fatalf("fallbacks %d, want at least %d", rl.Fallbacks(), ceiling+1)
	}
	if !strings.Contains(f.logs.String(), "redis unavailable") {
		t.Fatal("the fallback was not logged")
	}

	// Redis returns: the instance first adds its in-process admissions (5)
	// to the shared window, which then counts 3 + 5 and refuses, so the
	// bound holds even had Redis come back empty.
	proxy.Restore()
	redisOutageWaitBackOnRedis(t, f, rl, key)
	if !strings.Contains(f.logs.String(), "redis is back") {
		t.Fatal("the return to Redis was not logged")
	}
}

// redisOutageRemaining is a response's X-RateLimit-Remaining.
func redisOutageRemaining(r *response) string { return r.Header().Get("X-RateLimit-Remaining") }

// redisOutageDuringRequest sends request i while Redis is away: it answers
// quickly, with every rate-limit header, admitted below the ceiling and
// refused with Retry-After at it.
func redisOutageDuringRequest(t *testing.T, f *fixture, key string, i, ceiling int) {
	t.Helper()
	start := time.Now()
	r := f.get("/v1/me", key)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("request %d during the outage took %v", i, d)
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if r.Header().Get(h) == "" {
			t.Fatalf("request %d during the outage lacks %s", i, h)
		}
	}
	if i < ceiling {
		r.wantStatus(t, 200)
		return
	}
	r.wantError(t, 429, domain.CodeRateLimitExceeded)
	if r.Header().Get("Retry-After") == "" {
		t.Fatal("429 during the outage without Retry-After")
	}
}

// redisOutageWaitBackOnRedis sends requests until one is decided by Redis
// again (within 10 s), and checks that one is refused with nothing remaining.
func redisOutageWaitBackOnRedis(t *testing.T, f *fixture, rl *ratelimit.Redis, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := rl.Fallbacks()
		r := f.get("/v1/me", key)
		if rl.Fallbacks() == before {
			r.wantError(t, 429, domain.CodeRateLimitExceeded)
			if got := redisOutageRemaining(r); got != "0" {
				t.Fatalf("back on Redis: remaining %s, want 0", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the limiter did not go back to Redis after it returned")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
