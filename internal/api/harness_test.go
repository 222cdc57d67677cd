package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// clock is a test's time: it moves only when told to.
type clock = testenv.Clock

// fixture is the real handler stack on a real store, with a fake clock.
type fixture struct {
	t       *testing.T
	st      *store.Store
	h       http.Handler
	bare    http.Handler // h without the OpenAPI check
	clock   *clock
	keys    *keys.Service
	toucher *keys.Toucher
	account domain.Account
	owner   domain.User
	logs    *syncBuffer
	issued  []string // every credential this fixture minted
}

type syncBuffer = testenv.SyncBuffer

func newFixture(t *testing.T, engine string, opts ...func(*Config)) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.Open(t, engine), opts...)
}

// newFixtureOn builds the fixture on an already open store.
func newFixtureOn(t *testing.T, st *store.Store, opts ...func(*Config)) *fixture {
	t.Helper()
	c := testenv.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	logs := &syncBuffer{}
	log := slog.New(JSONLog(logs))
	mem := ratelimit.NewMemory(c.Now)
	t.Cleanup(mem.Close)
	toucher := keys.NewToucher(st.TouchKeys, log, time.Second)
	cursorKey, err := st.Secret(context.Background(), "cursor")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Store: st, Limiter: mem, UnauthLimiter: mem, UnauthRateLimit: 1000,
		Toucher: toucher, Log: log, Now: c.Now, CursorKey: cursorKey,
	}
	for _, o := range opts {
		o(&cfg)
	}
	// Every exchange with this handler is checked against openapi.json.
	raw := mustNew(t, cfg)
	h := openAPIChecked(t, raw, cfg.Now)
	f := &fixture{t: t, st: st, h: h, bare: raw, clock: c, keys: keys.New(st, c.Now), toucher: toucher, logs: logs}
	f.account, f.owner = f.newAccount("Acme")
	// No credential may ever reach a log line: check everything this
	// fixture logged against everything it issued.
	t.Cleanup(func() {
		logs := f.logs.String()
		for _, c := range f.issued {
			if strings.Contains(logs, c) || strings.Contains(logs, c[len(c)-38:]) {
				t.Errorf("a credential (prefix %s) reached the log", c[9:21])
			}
		}
	})
	return f
}

// newAccount creates an account with an Owner.
func (f *fixture) newAccount(name string) (domain.Account, domain.User) {
	f.t.Helper()
	ctx := context.Background()
	now := f.clock.Now()
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
	if err := f.st.CreateAccount(ctx, a); err != nil {
		f.t.Fatal(err)
	}
	u := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: strings.ToLower(name) + "-" + a.ID[len(a.ID)-6:] + "@example.com",
		Role: domain.RoleOwner, PasswordHash: "x", Active: true, CreatedAt: now,
	}
	if err := f.st.CreateUser(ctx, u); err != nil {
		f.t.Fatal(err)
	}
	return a, u
}

// keyIn creates a key in account a with the given scopes.
func (f *fixture) keyIn(a domain.Account, owner domain.User, mod func(*keys.CreateParams), scopes ...domain.Scope) keys.Created {
	f.t.Helper()
	p := keys.CreateParams{AccountID: a.ID, Name: "test key", Scopes: scopes}
	if mod != nil {
		mod(&p)
	}
	c, err := f.keys.Create(context.Background(), keys.Actor{User: &owner}, p)
	if err != nil {
		f.t.Fatal(err)
	}
	f.issued = append(f.issued, c.Credential)
	return c
}

// key creates a key in the fixture's account.
func (f *fixture) key(scopes ...domain.Scope) string {
	f.t.Helper()
	return f.keyIn(f.account, f.owner, nil, scopes...).Credential
}

var allAgentScopes = []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery}

type response struct {
	*httptest.ResponseRecorder
	body map[string]any
}

// req is one request; headers are "Name: value" strings.
type req struct {
	method, path, key, body string
	headers                 []string
	remote                  string
	// unchecked skips the OpenAPI check, for an answer the document does
	// not describe yet.
	unchecked bool
}

func (f *fixture) do(r req) *response {
	f.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, "http://api.test"+r.path, body)
	if r.remote != "" {
		hr.RemoteAddr = r.remote
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for _, h := range r.headers {
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		if value == "<delete>" {
			hr.Header.Del(name)
			continue
		}
		if strings.HasPrefix(value, "+") { // "+value" adds a second field line
			hr.Header.Add(name, value[1:])
			continue
		}
		hr.Header.Set(name, value)
	}
	rec := httptest.NewRecorder()
	if r.unchecked {
		f.bare.ServeHTTP(rec, hr)
	} else {
		f.h.ServeHTTP(rec, hr)
	}
	resp := &response{ResponseRecorder: rec}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		f.t.Fatalf("%s %s: Content-Type %q, body %q", r.method, r.path, ct, rec.Body.String())
	}
	if r.method == http.MethodHead { // the headers of a JSON answer, no body
		if rec.Body.Len() != 0 {
			f.t.Fatalf("HEAD %s: a body of %d bytes", r.path, rec.Body.Len())
		}
		return resp
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp.body); err != nil {
		f.t.Fatalf("%s %s: body is not a JSON object: %q", r.method, r.path, rec.Body.String())
	}
	return resp
}

func (f *fixture) get(path, key string) *response {
	return f.do(req{method: "GET", path: path, key: key})
}

func (f *fixture) send(method, path, key, body string) *response {
	return f.do(req{method: method, path: path, key: key, body: body})
}

// wantError asserts the contract's error envelope: status, code and, when
// given, the errors entries as field:code pairs in order.
func (r *response) wantError(t *testing.T, status int, code domain.Code, fields ...string) {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status %d, want %d; body %s", r.Code, status, r.Body.String())
	}
	e, ok := r.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", r.Body.String())
	}
	for k := range r.body {
		if k != "error" {
			t.Fatalf("error envelope has extra key %q: %s", k, r.Body.String())
		}
	}
	for k := range e {
		switch k {
		case "code", "message", "errors", "existing_id":
		default:
			t.Fatalf("error has unexpected field %q: %s", k, r.Body.String())
		}
	}
	if e["code"] != string(code) {
		t.Fatalf("code %v, want %s; body %s", e["code"], code, r.Body.String())
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("empty message: %s", r.Body.String())
	}
	got := wantErrorEntries(t, r, e)
	if len(fields) > 0 || got != nil {
		if strings.Join(got, ",") != strings.Join(fields, ",") {
			t.Fatalf("errors %v, want %v; body %s", got, fields, r.Body.String())
		}
	}
}

// wantErrorEntries returns the error's errors entries as field:code pairs
// in order, nil when there are none; every entry must have a message.
func wantErrorEntries(t *testing.T, r *response, e map[string]any) []string {
	t.Helper()
	var got []string
	if list, ok := e["errors"].([]any); ok {
		for _, it := range list {
			m := it.(map[string]any)
			if m["message"] == "" || m["message"] == nil {
				t.Fatalf("errors entry without message: %s", r.Body.String())
			}
			got = append(got, m["field"].(string)+":"+m["code"].(string))
		}
	} else if _, present := e["errors"]; present {
		t.Fatalf("errors is not an array: %s", r.Body.String())
	}
	return got
}

func (r *response) message() string {
	e, _ := r.body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (r *response) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

func (r *response) wantStatus(t *testing.T, status int) {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status %d, want %d; body %s", r.Code, status, r.Body.String())
	}
}

// createAgent creates an agent through the API and returns its id.
func (f *fixture) createAgent(key, name string) string {
	f.t.Helper()
	r := f.send("POST", "/v1/ai-agents", key, `{"name":`+quote(name)+`}`)
	r.wantStatus(f.t, http.StatusCreated)
	return r.data()["id"].(string)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// forEachEngine runs fn against SQLite and, where available, PostgreSQL.
func forEachEngine(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

var _ = llm.Message{}

func (f *fixture) logsLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(f.logs, nil)) }

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
