package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

const wantExpose = "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, " +
	"RateLimit, RateLimit-Policy, Retry-After, Location, Idempotent-Replayed"

// corsProblem checks the CORS fields of one /v1 response (openAPIProblem
// runs it on every exchange of every test): Allow-Origin * and the exposed
// fields, never Allow-Credentials, and the preflight fields only on a
// preflight's 204.
func corsProblem(h http.Header, preflight204 bool) string {
	if got := h.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "*" {
		return "Access-Control-Allow-Origin " + strings.Join(got, "|") + ", want *"
	}
	if got := h.Values("Access-Control-Expose-Headers"); len(got) != 1 || got[0] != wantExpose {
		return "Access-Control-Expose-Headers " + strings.Join(got, "|")
	}
	if _, ok := h["Access-Control-Allow-Credentials"]; ok {
		return "Access-Control-Allow-Credentials sent"
	}
	if !preflight204 && h.Get("Access-Control-Allow-Methods")+h.Get("Access-Control-Allow-Headers")+h.Get("Access-Control-Max-Age") != "" {
		return "preflight fields on a response that answers no preflight"
	}
	return ""
}

func wantCORS(t *testing.T, what string, h http.Header) {
	t.Helper()
	if p := corsProblem(h, false); p != "" {
		t.Fatalf("%s: %s", what, p)
	}
}

// TestCORSOnEveryV1Response: successes and every kind of refusal carry the
// fields, the key-less document too.
func TestCORSOnEveryV1Response(t *testing.T) {
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = 3 })
	key := f.key(allAgentScopes...)
	slow := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1 }, allAgentScopes...).Credential
	created := f.send("POST", "/v1/ai-agents", key, `{"name":"Support bot"}`)
	created.wantStatus(t, 201)
	wantCORS(t, "201", created.Header())
	if created.Header().Get("Location") == "" {
		t.Fatal("201 without Location")
	}
	f.get("/v1/me", slow).wantStatus(t, 200)
	for _, c := range []struct {
		what   string
		r      req
		status int
	}{
		{"200", req{method: "GET", path: "/v1/me", key: key}, 200},
		{"401", req{method: "GET", path: "/v1/me", remote: "192.0.2.9:1"}, 401},
		{"403 query credential", req{method: "GET", path: "/v1/me?api_key=x", key: key}, 403},
		{"404", req{method: "GET", path: "/v1/nowhere", key: key}, 404},
		{"404 unclean", req{method: "GET", path: "/v1//me", key: key}, 404},
		{"413", req{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"` + strings.Repeat("a", MaxBodyBytes) + `"}`}, 413},
		{"429 per key", req{method: "GET", path: "/v1/me", key: slow}, 429},
		{"OPTIONS without Origin is no preflight", req{method: "OPTIONS", path: "/v1/me", headers: []string{"Access-Control-Request-Method: GET"}}, 401},
	} {
		r := f.do(c.r)
		r.wantStatus(t, c.status)
		wantCORS(t, c.what, r.Header())
	}
	for i := 0; i < 3; i++ {
		f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.7:1"})
	}
	r := f.do(req{method: "GET", path: "/v1/me", remote: "192.0.2.7:1"})
	r.wantError(t, 429, domain.CodeRateLimitExceeded)
	wantCORS(t, "429 per address", r.Header())

	doc := httptest.NewRecorder()
	f.h.ServeHTTP(doc, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if doc.Code != 200 {
		t.Fatalf("openapi.json: %d", doc.Code)
	}
	wantCORS(t, "openapi.json", doc.Header())
}

// TestCORSNotOutsideV1: the console, the health endpoints and the root's
// 404 send no CORS field.
func TestCORSNotOutsideV1(t *testing.T) {
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	f := newFixture(t, "sqlite", func(c *Config) { c.Console = console })
	for _, p := range []string{"/healthz", "/readyz", "/console/", "/", "/v2/me", "/v1x"} {
		for _, m := range []string{"GET", "OPTIONS"} {
			rr := httptest.NewRecorder()
			hr := httptest.NewRequest(m, p, nil)
			hr.Header.Set("Origin", "http://elsewhere.test")
			hr.Header.Set("Access-Control-Request-Method", "GET")
			f.h.ServeHTTP(rr, hr)
			for name := range rr.Header() {
				if strings.HasPrefix(name, "Access-Control-") {
					t.Fatalf("%s %s: %s sent", m, p, name)
				}
			}
		}
	}
}

func preflight(f *fixture, path, remote string) *httptest.ResponseRecorder {
	f.t.Helper()
	hr := httptest.NewRequest("OPTIONS", "http://api.test"+path, nil)
	hr.RemoteAddr = remote
	hr.Header.Set("Origin", "http://127.0.0.1:8081")
	hr.Header.Set("Access-Control-Request-Method", "POST")
	hr.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
	rr := httptest.NewRecorder()
	f.h.ServeHTTP(rr, hr)
	return rr
}

// TestCORSPreflight: any /v1 path, no key, 204 with the preflight fields;
// refused only for a query credential (403) and past the address's limit
// (429), both with the CORS fields.
func TestCORSPreflight(t *testing.T) {
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = 3 })
	for i, p := range []string{"/v1/ai-agents/agt_x/questions", "/v1/no/such/path"} {
		rr := preflight(f, p, "192.0.2.1:1")
		if rr.Code != 204 || rr.Body.Len() != 0 {
			t.Fatalf("preflight %s: %d %q", p, rr.Code, rr.Body.String())
		}
		h := rr.Header()
		if p := corsProblem(h, true); p != "" {
			t.Fatal(p)
		}
		for name, want := range map[string]string{
			"Access-Control-Allow-Methods": "GET, POST, PUT, PATCH, DELETE",
			"Access-Control-Allow-Headers": "Authorization, Content-Type, Idempotency-Key",
			"Access-Control-Max-Age":       "600",
			"RateLimit-Policy":             `"per-address";q=3;w=60`,
			"X-RateLimit-Remaining":        []string{"2", "1"}[i],
			"WWW-Authenticate":             "",
		} {
			if got := h.Get(name); got != want {
				t.Fatalf("%s = %q, want %q", name, got, want)
			}
		}
	}
	q := preflight(f, "/v1/me?token=abc", "192.0.2.1:1")
	if q.Code != 403 || !strings.Contains(q.Body.String(), `"access_denied"`) {
		t.Fatalf("preflight with a query credential: %d %s", q.Code, q.Body.String())
	}
	wantCORS(t, "preflight 403", q.Header())
	preflight(f, "/v1/me", "192.0.2.1:1") // the third
	over := preflight(f, "/v1/me", "192.0.2.1:1")
	if over.Code != 429 || over.Header().Get("Retry-After") == "" {
		t.Fatalf("past the limit: %d %v", over.Code, over.Header())
	}
	wantCORS(t, "preflight 429", over.Header())
	if rr := preflight(f, "/v1/me", "192.0.2.2:1"); rr.Code != 204 {
		t.Fatalf("another address: %d", rr.Code)
	}
}

// TestBrowserCORS: a page on another loopback origin (another port) calls
// the API from headless Chromium with a key, through the browser's real
// preflight, and reads the bodies and the exposed rate-limit field.
func TestBrowserCORS(t *testing.T) {
	bctx := testenv.Browser(t, 1360, 900, 90*time.Second)
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	var preflights atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			preflights.Add(1)
		}
		f.h.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>explorer</title><p>API explorer</p>"))
	}))
	t.Cleanup(page.Close)
	if err := chromedp.Do(bctx, chromedp.Navigate(page.URL+"/")); err != nil {
		t.Fatal(err)
	}
	script := `(async () => {
	const api = ` + jsString(api.URL) + `, auth = {Authorization: "Bearer " + ` + jsString(key) + `};
	const call = async (method, path, body) => {
		const r = await fetch(api + path, {method, body, headers: body ? {...auth, "Content-Type": "application/json"} : auth});
		return {status: r.status, body: await r.json(), remaining: r.headers.get("X-RateLimit-Remaining"),
			location: r.headers.get("Location"), request_id: r.headers.get("X-Request-Id")};
	};
	return JSON.stringify([await call("GET", "/v1/me"), await call("POST", "/v1/ai-agents", JSON.stringify({name: "From the browser"}))]);
})()`
	out, err := chromedp.Run(bctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the page's fetch: %v", err)
	}
	var got []struct {
		Status    int
		Body      map[string]map[string]any
		Remaining *string
		Location  *string
		RequestID *string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	me, made := got[0], got[1]
	if me.Status != 200 || me.Body["data"]["prefix"] == nil || me.Remaining == nil || *me.Remaining == "" || me.RequestID == nil {
		t.Fatalf("GET /v1/me from the page: %s", out)
	}
	if made.Status != 201 || made.Body["data"]["name"] != "From the browser" || made.Remaining == nil ||
		made.Location == nil || *made.Location != "/v1/ai-agents/"+made.Body["data"]["id"].(string) {
		t.Fatalf("POST /v1/ai-agents from the page: %s", out)
	}
	if a, b := atoi(t, *me.Remaining), atoi(t, *made.Remaining); b != a-1 {
		t.Fatalf("X-RateLimit-Remaining did not go down: %s then %s", *me.Remaining, *made.Remaining)
	}
	if preflights.Load() == 0 {
		t.Fatal("the browser sent no preflight")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("X-RateLimit-Remaining %q", s)
	}
	return n
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
