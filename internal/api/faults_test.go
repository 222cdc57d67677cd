package api

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestPostgresOutage cuts the connection to PostgreSQL mid-run: requests
// get 500 server_error naming the request id, /readyz fails, nothing hangs,
// and service resumes by itself when the database returns.
func TestPostgresOutage(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	st, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
