package api

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

func TestQueryCredentialIsRefusedBeforeAnythingElse(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	for _, q := range []string{
		"?api_key=x", "?API_KEY=x", "?token=abc", "?access_token=", "?authorization=Bearer%20x",
		"?apikey=1&limit=5", "?limit=5&ApiKey=1", "?Token", "?a%70i_key=x", "?x=1;token=2",
	} {
		t.Run(q, func(t *testing.T) {
			// With a valid key, without one, on an unknown path, with a bad body: always 403.
			f.get("/v1/ai-agents"+q, key).wantError(t, 403, domain.CodeAccessDenied)
			f.get("/v1/ai-agents"+q, "").wantError(t, 403, domain.CodeAccessDenied)
			f.get("/v1/nowhere"+q, "").wantError(t, 403, domain.CodeAccessDenied)
			f.send("POST", "/v1/ai-agents"+q, key, `{`).wantError(t, 403, domain.CodeAccessDenied)
		})
	}
	// Similar names are not credentials; they are unknown parameters.
	f.get("/v1/ai-agents?tokens=1", key).wantError(t, 400, domain.CodeInvalidField, "tokens:invalid_field")
}

func TestAuthorizationHeader(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	malformed := []struct {
		name    string
		headers []string
	}{
		{"missing", nil},
		{"empty", []string{"Authorization: "}},
		{"basic", []string{"Authorization: Basic dXNlcjpwYXNz"}},
		{"no token", []string{"Authorization: Bearer"}},
		{"blank token", []string{"Authorization: Bearer "}},
		{"scheme glued", []string{"Authorization: Bearer" + key}},
		{"token with space", []string{"Authorization: Bearer " + key + " extra"}},
		{"repeated", []string{"Authorization: Bearer " + key, "Authorization: +Bearer " + key}},
	}
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(req{method: "GET", path: "/v1/me", headers: c.headers})
			r.wantError(t, 401, domain.CodeInvalidCredentials)
			if !strings.Contains(r.message(), "missing or malformed") {
				t.Errorf("message %q does not say missing or malformed", r.message())
			}
			if !strings.HasPrefix(r.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", r.Header().Get("WWW-Authenticate"))
			}
		})
	}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		f.do(req{method: "GET", path: "/v1/me", headers: []string{"Authorization: " + scheme + " " + key}}).wantStatus(t, 200)
	}
}

func TestInvalidKeysAllGetOneAnswer(t *testing.T) {
	f := newFixture(t, "sqlite")
	ctx := context.Background()
	good := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	revoked := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	if err := f.keys.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	exp := f.clock.Now().Add(time.Hour)
	expiring := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.ExpiresAt = &exp }, allAgentScopes...)
	testEnv := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.Env = domain.EnvTest }, allAgentScopes...)
	other, otherOwner := f.newAccount("Other")
	deactivated := f.keyIn(other, otherOwner, nil, allAgentScopes...)
	if err := f.st.SetAccountActive(ctx, other.ID, false); err != nil {
		t.Fatal(err)
	}
	unknown, _ := credential.Generate(domain.EnvLive)
	// The same prefix with another (valid-checksum) secret.
	forged, _ := credential.Generate(domain.EnvLive)
	wrongSecret := strings.Replace(forged.Text, forged.Prefix, good.Key.Prefix, 1)
	wrongSecret = rechecksum(t, wrongSecret)
	// The test key's text presented as live: env mismatch with a valid checksum.
	envSwapped := rechecksum(t, strings.Replace(testEnv.Credential, "agk_test_", "agk_live_", 1))
	badChecksum := good.Credential[:len(good.Credential)-1] + flip(good.Credential[len(good.Credential)-1])

	f.get("/v1/me", good.Credential).wantStatus(t, 200)
	f.get("/v1/me", testEnv.Credential).wantStatus(t, 200)
	f.get("/v1/me", expiring.Credential).wantStatus(t, 200)
	f.clock.Advance(time.Hour) // expires_at reached: expired from that instant on

	cases := map[string]string{
		"unknown": unknown.Text, "revoked": revoked.Credential, "expired": expiring.Credential,
		"env mismatch": envSwapped, "account deactivated": deactivated.Credential,
		"wrong secret": wrongSecret, "bad checksum": badChecksum, "garbage": "not-a-key",
		"truncated": good.Credential[:20],
	}
	var messages []string
	for name, cred := range cases {
		t.Run(name, func(t *testing.T) {
			r := f.get("/v1/me", cred)
			r.wantError(t, 401, domain.CodeInvalidCredentials)
			if !strings.Contains(r.message(), "API key is invalid") {
				t.Errorf("message %q", r.message())
			}
			messages = append(messages, r.message())
		})
	}
	for _, m := range messages {
		if m != messages[0] {
			t.Fatalf("messages differ between reasons: %q vs %q", m, messages[0])
		}
	}
	// Reactivating the account restores its keys that are neither revoked nor expired.
	if err := f.st.SetAccountActive(ctx, other.ID, true); err != nil {
		t.Fatal(err)
	}
	f.get("/v1/me", deactivated.Credential).wantStatus(t, 200)
}

// rechecksum recomputes the checksum of an edited credential, so that the
// test reaches the store rather than being refused by the format check.
func rechecksum(t *testing.T, text string) string {
	t.Helper()
	body := text[:len(text)-6]
	return body + credential.Checksum(body)
}

func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestRevocationIsImmediate(t *testing.T) {
	f := newFixture(t, "sqlite")
	c := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	f.get("/v1/me", c.Credential).wantStatus(t, 200)
	if err := f.keys.Revoke(context.Background(), keys.Actor{User: &f.owner}, f.account.ID, c.Key.ID); err != nil {
		t.Fatal(err)
	}
	f.get("/v1/me", c.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, "sqlite")
	c := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 3 }, allAgentScopes...)
	other := f.key(allAgentScopes...)
	start := f.clock.Now()
	for i := 0; i < 3; i++ {
		r := f.get("/v1/me", c.Credential)
		r.wantStatus(t, 200)
		wantHeader(t, r, "X-RateLimit-Limit", "3")
		wantHeader(t, r, "X-RateLimit-Remaining", strconv.Itoa(2-i))
		wantHeader(t, r, "X-RateLimit-Reset", strconv.FormatInt(start.Add(time.Minute).Unix(), 10))
		wantHeader(t, r, "RateLimit-Policy", `"per-key";q=3;w=60`)
		wantHeader(t, r, "RateLimit", fmt.Sprintf(`"per-key";r=%d;t=%d`, 2-i, 60-10*i))
		if r.Header().Get("Retry-After") != "" {
			t.Fatal("Retry-After on an admitted request")
		}
		f.clock.Advance(10 * time.Second)
	}
	// Now at +30s: the first admission leaves the window at +60s.
	for i := 0; i < 3; i++ { // refused requests are not counted
		r := f.get("/v1/me", c.Credential)
		r.wantError(t, 429, domain.CodeRateLimitExceeded)
		wantHeader(t, r, "Retry-After", "30")
		wantHeader(t, r, "X-RateLimit-Remaining", "0")
	}
	// Even a request to an unknown path is limited (rate limit precedes routing).
	f.get("/v1/nowhere", c.Credential).wantError(t, 429, domain.CodeRateLimitExceeded)
	// Another key's traffic is its own.
	f.get("/v1/me", other).wantStatus(t, 200)
	f.clock.Advance(30 * time.Second)
	r := f.get("/v1/me", c.Credential)
	r.wantStatus(t, 200)
	wantHeader(t, r, "X-RateLimit-Remaining", "0")

	// A support change of the ceiling applies on the next request.
	if err := f.keys.SetRateLimit(context.Background(), c.Key.ID, 10); err != nil {
		t.Fatal(err)
	}
	r = f.get("/v1/me", c.Credential)
	r.wantStatus(t, 200)
	wantHeader(t, r, "X-RateLimit-Limit", "10")
	wantHeader(t, r, "X-RateLimit-Remaining", "6") // admissions at +10s, +20s, +60s and now
}

func TestRateLimitHeadersOnEveryV1Response(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(domain.ScopeAgentsRead)
	for _, r := range []*response{
		f.get("/v1/me", key), f.get("/v1/nowhere", key), f.send("POST", "/v1/ai-agents", key, `{}`),
		f.get("/v1/ai-agents?bogus=1", key), f.get("/v1/me", ""), f.get("/v1/me?token=x", ""),
	} {
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if r.Header().Get(h) == "" {
				t.Errorf("%d response lacks %s", r.Code, h)
			}
		}
		if r.Header().Get("X-Request-Id") == "" {
			t.Errorf("%d response lacks X-Request-Id", r.Code)
		}
	}
	h := f.do(req{method: "GET", path: "/healthz"})
	h.wantStatus(t, 200)
	if h.Header().Get("X-RateLimit-Limit") != "" {
		t.Error("/healthz carries rate-limit headers")
	}
}

func TestUnidentifiedRequestsAreLimitedPerAddress(t *testing.T) {
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = 2 })
	for i := 0; i < 2; i++ {
		r := f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.1:1234"})
		r.wantError(t, 401, domain.CodeInvalidCredentials)
		wantHeader(t, r, "X-RateLimit-Limit", "2")
	}
	f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.1:999"}).wantError(t, 429, domain.CodeRateLimitExceeded)
	// A credential in the query string is refused "before anything else is
	// done" (the contract): 403 even past the limit, with its headers and
	// no Retry-After.
	r := f.do(req{method: "GET", path: "/v1/me?token=1", remote: "192.0.2.1:999"})
	r.wantError(t, 403, domain.CodeAccessDenied)
	wantHeader(t, r, "X-RateLimit-Remaining", "0")
	wantHeader(t, r, "Retry-After", "")
	// Another address has its own allowance, and a valid key is not affected.
	f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.2:1"}).wantError(t, 401, domain.CodeInvalidCredentials)
	f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.1:1", key: f.key(domain.ScopeStaffRead)}).wantStatus(t, 200)
}

// TestPerAddressLimitBehindAProxy: behind a trusted proxy each client has
// its own allowance, read from X-Forwarded-For, and the log names the client;
// a client connecting directly cannot choose its address with the header.
func TestPerAddressLimitBehindAProxy(t *testing.T) {
	proxies, err := clientaddr.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = 2; c.ClientAddr = proxies })
	via := func(client string) req {
		return req{method: "GET", path: "/v1/me", remote: "10.0.0.1:443", headers: []string{"X-Forwarded-For: " + client}}
	}
	f.do(via("203.0.113.1")).wantError(t, 401, domain.CodeInvalidCredentials)
	f.do(via("203.0.113.1")).wantError(t, 401, domain.CodeInvalidCredentials)
	f.do(via("203.0.113.1")).wantError(t, 429, domain.CodeRateLimitExceeded)
	f.do(via("203.0.113.2")).wantError(t, 401, domain.CodeInvalidCredentials)
	if !strings.Contains(f.logs.String(), `"remote":"203.0.113.2"`) {
		t.Fatal("the log does not name the client behind the proxy")
	}
	direct := func(spoof string) req {
		return req{method: "GET", path: "/v1/me", remote: "198.51.100.7:1", headers: []string{"X-Forwarded-For: " + spoof}}
	}
	f.do(direct("192.0.2.1")).wantError(t, 401, domain.CodeInvalidCredentials)
	f.do(direct("192.0.2.2")).wantError(t, 401, domain.CodeInvalidCredentials)
	f.do(direct("192.0.2.3")).wantError(t, 429, domain.CodeRateLimitExceeded)
}

func wantHeader(t *testing.T, r *response, name, want string) {
	t.Helper()
	if got := r.Header().Get(name); got != want {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

func TestUnknownRoutesAreNotFoundAfterAuth(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(domain.ScopeStaffRead) // no callable scope: 404 precedes the scope check
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/nowhere"}, {"GET", "/v1"}, {"GET", "/v1/"}, {"DELETE", "/v1/ai-agents"},
		{"POST", "/v1/me"}, {"PUT", "/v1/ai-agents"}, {"GET", "/v1/ai-agents/x/enabled"},
		{"POST", "/v1/ai-agents/x/enabled"}, {"DELETE", "/v1/ai-agents/x"}, {"GET", "/v1//me"},
		{"GET", "/v1/me/"}, {"GET", "/v1/./me"}, {"GET", "/v1/ai-agents/../me"}, {"GET", "/v2/me"},
		{"GET", "/v1/AI-AGENTS"}, {"OPTIONS", "/v1/me"}, {"HEAD", "/v1/me"}, {"HEAD", "/v1/ai-agents"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			want := func(r *response, status int, code domain.Code) {
				t.Helper()
				if c.method != "HEAD" {
					r.wantError(t, status, code)
					return
				}
				// HEAD: the error's status and headers, the length GET's body
				// would have (the fixture checked there is no body).
				if n, err := strconv.Atoi(r.Header().Get("Content-Length")); r.Code != status || err != nil || n <= 0 ||
					r.Header().Get("Content-Type") != "application/json" || r.Header().Get("X-Request-Id") == "" {
					t.Fatalf("HEAD: %d, %v", r.Code, r.Header())
				}
			}
			want(f.do(req{method: c.method, path: c.path, key: key}), 404, domain.CodeNotFound)
			if strings.HasPrefix(c.path, "/v1") {
				want(f.do(req{method: c.method, path: c.path}), 401, domain.CodeInvalidCredentials)
			}
		})
	}
}

func TestScopes(t *testing.T) {
	f := newFixture(t, "sqlite")
	writer := f.key(domain.ScopeAgentsWrite)
	reader := f.key(domain.ScopeAgentsRead)
	id := f.createAgent(writer, "Scoped")
	cases := []struct {
		key, method, path, body string
		missing                 domain.Scope
	}{
		{writer, "GET", "/v1/ai-agents", "", domain.ScopeAgentsRead}, // write does not imply read
		{writer, "GET", "/v1/ai-agents/" + id, "", domain.ScopeAgentsRead},
		{writer, "GET", "/v1/ai-agents/" + id + "/stats", "", domain.ScopeAgentsRead},
		{reader, "POST", "/v1/ai-agents", `{"name":"x"}`, domain.ScopeAgentsWrite},
		{reader, "PUT", "/v1/ai-agents/" + id + "/enabled", `{"enabled":false}`, domain.ScopeAgentsWrite},
		{reader, "PATCH", "/v1/ai-agents/" + id, `{"name":"y"}`, domain.ScopeAgentsWrite},
		{reader, "POST", "/v1/ai-agents/" + id + "/questions", `{"question":"hi"}`, domain.ScopeAgentsQuery},
		// Scope precedes validation.
		{reader, "POST", "/v1/ai-agents?bogus=1", `{`, domain.ScopeAgentsWrite},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := f.send(c.method, c.path, c.key, c.body)
			r.wantError(t, 403, domain.CodeAccessDenied)
			if !strings.Contains(r.message(), string(c.missing)) {
				t.Errorf("message %q does not name %s", r.message(), c.missing)
			}
		})
	}
	// /me needs no scope at all.
	f.get("/v1/me", f.key(domain.ScopeWebhooksManage)).wantStatus(t, 200)
	// Scopes with no v1 endpoint grant nothing callable.
	f.get("/v1/ai-agents", f.key(domain.ScopeStaffRead, domain.ScopeHelpdeskRead)).wantError(t, 403, domain.CodeAccessDenied)
}

func TestAgentRestriction(t *testing.T) {
	f := newFixture(t, "sqlite")
	admin := f.key(allAgentScopes...)
	mine := f.createAgent(admin, "Mine")
	notMine := f.createAgent(admin, "Not mine")
	other, otherOwner := f.newAccount("Elsewhere")
	otherKey := f.keyIn(other, otherOwner, nil, allAgentScopes...).Credential
	foreign := f.createAgent(otherKey, "Foreign")

	restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{mine} }, allAgentScopes...).Credential

	f.get("/v1/ai-agents/"+mine, restricted).wantStatus(t, 200)
	f.send("PUT", "/v1/ai-agents/"+mine+"/enabled", restricted, `{"enabled":false}`).wantStatus(t, 200)
	f.get("/v1/ai-agents/"+notMine, restricted).wantError(t, 403, domain.CodeAccessDenied)
	f.send("PUT", "/v1/ai-agents/"+notMine+"/enabled", restricted, `{"enabled":false}`).wantError(t, 403, domain.CodeAccessDenied)
	// Restriction precedes validation.
	f.send("PUT", "/v1/ai-agents/"+notMine+"/enabled", restricted, `{"enabled":"no"}`).wantError(t, 403, domain.CodeAccessDenied)
	// Another account's agent, or no agent at all: 404 for every key, never 403.
	for _, key := range []string{restricted, admin} {
		f.get("/v1/ai-agents/"+foreign, key).wantError(t, 404, domain.CodeNotFound)
		f.send("PUT", "/v1/ai-agents/"+foreign+"/enabled", key, `{"enabled":false}`).wantError(t, 404, domain.CodeNotFound)
		f.send("PUT", "/v1/ai-agents/agt_nope/enabled", key, `{"enabled":false}`).wantError(t, 404, domain.CodeNotFound)
	}
	// A restricted key cannot create agents, and lists only its own.
	f.send("POST", "/v1/ai-agents", restricted, `{"name":"New"}`).wantError(t, 403, domain.CodeAccessDenied)
	list := f.get("/v1/ai-agents", restricted)
	list.wantStatus(t, 200)
	items := list.body["data"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != mine {
		t.Fatalf("restricted list = %v", items)
	}
	if n := len(f.get("/v1/ai-agents", admin).body["data"].([]any)); n != 2 {
		t.Fatalf("unrestricted list has %d agents, want 2 (never another account's)", n)
	}
}

func TestMe(t *testing.T) {
	f := newFixture(t, "sqlite")
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	c := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) {
		p.Name, p.Description, p.ExpiresAt, p.RateLimit = "CI key", "used by CI", &exp, 77
	}, domain.ScopeAgentsQuery, domain.ScopeAgentsRead)
	r := f.get("/v1/me", c.Credential)
	r.wantStatus(t, 200)
	if len(r.body) != 1 {
		t.Fatalf("single-resource envelope has extra keys: %s", r.Body.String())
	}
	d := r.data()
	want := map[string]any{
		"id": c.Key.ID, "name": "CI key", "description": "used by CI", "prefix": c.Key.Prefix,
		"scopes": []any{"aiagents:read", "aiagents:query"}, "rate_limit_per_minute": float64(77),
		"last_used_at": "2026-11-22T12:00:00.000Z", "expires_at": "2027-01-02T03:04:05.000Z",
		"allowed_ips": []any{},
	}
	if len(d) != len(want) {
		t.Fatalf("key object fields %v, want exactly %v", d, want)
	}
	for k, v := range want {
		if !equalJSON(d[k], v) {
			t.Errorf("%s = %v, want %v", k, d[k], v)
		}
	}
	if !strings.HasPrefix(c.Credential, "agk_live_"+c.Key.Prefix+"_") {
		t.Fatalf("credential %q does not carry prefix %q", c.Credential, c.Key.Prefix)
	}
	// Never-used keys show null in stored form; the request itself is a use.
	f.clock.Advance(1500 * time.Millisecond)
	if got := f.get("/v1/me", c.Credential).data()["last_used_at"]; got != "2026-11-22T12:00:01.500Z" {
		t.Fatalf("last_used_at %v", got)
	}
}

func equalJSON(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestLastUsedAtIsWrittenBehind(t *testing.T) {
	f := newFixture(t, "sqlite")
	ctx := context.Background()
	c := f.keyIn(f.account, f.owner, nil, domain.ScopeAgentsRead)
	k, _ := f.keys.Get(ctx, f.account.ID, c.Key.ID)
	if k.LastUsedAt != nil {
		t.Fatal("a new key has last_used_at")
	}
	for i := 0; i < 50; i++ {
		f.get("/v1/me", c.Credential).wantStatus(t, 200)
		f.clock.Advance(10 * time.Millisecond)
	}
	if f.toucher.Pending() != 1 {
		t.Fatalf("pending %d, want one write for 50 requests", f.toucher.Pending())
	}
	if err := f.toucher.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	k, _ = f.keys.Get(ctx, f.account.ID, c.Key.ID)
	want := f.clock.Now().Add(-10 * time.Millisecond)
	if k.LastUsedAt == nil || !k.LastUsedAt.Equal(want) {
		t.Fatalf("stored last_used_at %v, want %v", k.LastUsedAt, want)
	}
}

func TestResponsesCarryRequestIDAndJSON(t *testing.T) {
	f := newFixture(t, "sqlite")
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		r := f.get("/v1/me", "")
		id := r.Header().Get("X-Request-Id")
		if id == "" || seen[id] {
			t.Fatalf("request id %q missing or repeated", id)
		}
		seen[id] = true
	}
	r := f.do(req{method: "GET", path: "/nowhere"})
	r.wantError(t, 404, domain.CodeNotFound)
}

func TestPanicBecomesServerError(t *testing.T) {
	f := newFixture(t, "sqlite")
	s := &Server{log: f.logsLogger()}
	h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom: secret internals") }))
	f.h = h
	r := f.get("/v1/me", "")
	r.wantError(t, 500, domain.CodeServerError)
	id := r.Header().Get("X-Request-Id")
	if !strings.Contains(r.message(), id) {
		t.Fatalf("message %q does not name request id %s", r.message(), id)
	}
	if strings.Contains(r.Body.String(), "boom") || strings.Contains(r.Body.String(), "goroutine") {
		t.Fatalf("internals leaked: %s", r.Body.String())
	}
	if !strings.Contains(f.logs.String(), "boom") || !strings.Contains(f.logs.String(), id) {
		t.Fatal("the panic and its request id are not in the log")
	}
}

// The first use of an expired key goes into the audit trail, once per key,
// written off the request path but counted in Config.Background, which a
// graceful stop waits on. Another connection holds SQLite's write lock, so
// the write cannot finish until it lets go: until then, waiting on
// Background must not return.
func TestExpiredUseIsAuditedOnceAndCounted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentapi.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var bg sync.WaitGroup
	f := newFixtureOn(t, st, func(c *Config) { c.Background = &bg })
	exp := f.clock.Now().Add(time.Hour)
	k := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.ExpiresAt = &exp }, allAgentScopes...)
	f.get("/v1/me", k.Credential).wantStatus(t, 200)
	f.clock.Advance(2 * time.Hour)

	locker, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	conn, err := locker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.get("/v1/me", k.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
	}
	waited := make(chan struct{})
	go func() { bg.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Background did not count the audit write still in progress")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the audit write did not finish after the lock was released")
	}
	evs, err := f.st.ListAuditEvents(ctx, f.account.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.KeyID == k.Key.ID && ev.Action == "expired_in_use" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d expired_in_use events for the key, want 1: %+v", n, evs)
	}
}
