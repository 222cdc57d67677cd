package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// apiService is the real /v1 handler on a fresh SQLite store, served over
// loopback, with one account and its Owner, for the `agentapi api` tests.
type apiService struct {
	t       *testing.T
	url     string
	st      *store.Store
	keys    *keys.Service
	account domain.Account
	owner   domain.User
	peer    *llmtest.Server // the model: echoes the question
	logs    bytes.Buffer
}

func newAPIService(t *testing.T) *apiService {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t, store.EngineSQLite)
	s := &apiService{t: t, st: st, keys: keys.New(st, time.Now)}
	log := slog.New(slog.NewJSONHandler(&s.logs, nil))
	mem := ratelimit.NewMemory(time.Now)
	t.Cleanup(mem.Close)
	cursorKey, err := st.Secret(ctx, "cursor")
	if err != nil {
		t.Fatal(err)
	}
	s.peer = llmtest.NewServer(t, llmtest.Echo)
	model, err := llm.New(llm.Config{BaseURL: s.peer.URL, Model: "m", APIKey: "sk-test", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{
		Store: st, Limiter: mem, UnauthLimiter: mem, UnauthRateLimit: 1000, LLM: model,
		Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), Log: log, CursorKey: cursorKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	s.url = hs.URL + "/v1"
	now := time.Now()
	s.account = domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Acme", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, s.account); err != nil {
		t.Fatal(err)
	}
	s.owner = domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: s.account.ID, Email: "ann@example.com",
		Role: domain.RoleOwner, PasswordHash: "x", Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, s.owner); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *apiService) key(mod func(*keys.CreateParams), scopes ...domain.Scope) keys.Created {
	s.t.Helper()
	p := keys.CreateParams{AccountID: s.account.ID, Name: "cli", Scopes: scopes}
	if mod != nil {
		mod(&p)
	}
	c, err := s.keys.Create(context.Background(), keys.Actor{User: &s.owner}, p)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// apiCLI runs `agentapi api …` in process with AGENTAPI_KEY and
// AGENTAPI_URL set (either may be empty), and checks that the key shows
// nowhere in its output.
func apiCLI(t *testing.T, key, url, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "AGENTAPI_KEY":
			return key
		case "AGENTAPI_URL":
			return url
		}
		return ""
	}
	code := run(context.Background(), append([]string{"api"}, args...), getenv, strings.NewReader(stdin), &out, &errb)
	if len(key) > 22 && (strings.Contains(out.String(), key[22:]) || strings.Contains(errb.String(), key[22:])) {
		t.Fatalf("agentapi api %s printed the key", strings.Join(args, " "))
	}
	return out.String(), errb.String(), code
}

// mustAPI runs a command that must succeed and decodes each stdout line.
func mustAPI(t *testing.T, key, url string, args ...string) []map[string]any {
	t.Helper()
	out, errs, code := apiCLI(t, key, url, "", args...)
	if code != 0 || errs != "" {
		t.Fatalf("agentapi api %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not a JSON object", line)
		}
		objs = append(objs, m)
	}
	return objs
}

func TestAPICommands(t *testing.T) {
	s := newAPIService(t)
	k := s.key(nil, domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery)
	key := k.Credential

	me := mustAPI(t, key, s.url, "me")
	if len(me) != 1 || me[0]["id"] != k.Key.ID || me[0]["prefix"] != k.Key.Prefix || me[0]["expires_at"] != nil || len(me[0]) != 9 {
		t.Fatalf("me: %v", me)
	}
	if ips, ok := me[0]["allowed_ips"].([]any); !ok || len(ips) != 0 { // the API's /me, allowlist included
		t.Fatalf("me: %v", me)
	}
	// --url wins over AGENTAPI_URL.
	if me := mustAPI(t, key, "http://127.0.0.1:1/v1", "me", "--url", s.url); me[0]["id"] != k.Key.ID {
		t.Fatalf("me --url: %v", me)
	}

	created := mustAPI(t, key, s.url, "agents", "create", "--name", "Helpdesk", "--instructions", "Be brief.")[0]
	id, _ := created["id"].(string)
	if !strings.HasPrefix(id, "agt_") || created["name"] != "Helpdesk" || created["enabled"] != true || created["instructions"] != "Be brief." ||
		len(created) != 6 || !serverTime(created["created_at"]) || created["updated_at"] != created["created_at"] {
		t.Fatalf("create: %v", created)
	}
	// A duplicate fails with the contract's code and the existing id, unless
	// adopted; its message is said once (the field error repeats it).
	out, errs, code := apiCLI(t, key, s.url, "", "agents", "create", "--name", "helpdesk")
	if code != 1 || out != "" || !regexp.MustCompile(`^agentapi: duplicate_value: An AI agent named "helpdesk" already exists in this account. `+
		`\(name\) existing_id=`+id+` request_id=req_[0-9a-f]+\n$`).MatchString(errs) {
		t.Fatalf("duplicate: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if adopted := mustAPI(t, key, s.url, "agents", "create", "--adopt-existing", "--name", "HELPDESK")[0]; adopted["id"] != id {
		t.Fatalf("adopt: %v", adopted)
	}

	if got := mustAPI(t, key, s.url, "agents", "get", id)[0]; got["id"] != id || got["updated_at"] == nil {
		t.Fatalf("get: %v", got)
	}
	// Flags after the id, as in the usage line, and before it.
	if up := mustAPI(t, key, s.url, "agents", "update", id, "--name", "Support")[0]; up["name"] != "Support" || up["instructions"] != "Be brief." {
		t.Fatalf("update: %v", up)
	}
	if up := mustAPI(t, key, s.url, "agents", "update", "--instructions", "", id)[0]; up["name"] != "Support" || up["instructions"] != "" {
		t.Fatalf("update clearing instructions: %v", up)
	}
	if off := mustAPI(t, key, s.url, "agents", "disable", id)[0]; off["enabled"] != false {
		t.Fatalf("disable: %v", off)
	}
	if on := mustAPI(t, key, s.url, "agents", "enable", id)[0]; on["enabled"] != true {
		t.Fatalf("enable: %v", on)
	}

	apiListPages(t, s, key, id)
	apiAskTwice(t, s, key, id)
}

// apiListPages: list --all follows every page; --updated-since filters.
func apiListPages(t *testing.T, s *apiService, key, id string) {
	// list --all follows every page: 6 agents in pages of 4.
	for _, n := range []string{"b", "c", "d", "e", "f"} {
		mustAPI(t, key, s.url, "agents", "create", "--name", n)
	}
	items := mustAPI(t, key, s.url, "agents", "list", "--limit", "4", "--all")
	if len(items) != 6 || items[0]["id"] != id {
		t.Fatalf("list: %d items %v", len(items), items)
	}
	for _, it := range items {
		if len(it) != 4 || !serverTime(it["created_at"]) {
			t.Fatalf("list item has other than the contract's four fields: %v", it)
		}
	}
	// Each change moves updated_at at least a millisecond past the last
	// (touched), so four changes to one agent within a millisecond or two
	// put it a few milliseconds ahead of the clock: wait that out.
	time.Sleep(20 * time.Millisecond)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(2 * time.Millisecond)
	mustAPI(t, key, s.url, "agents", "disable", items[3]["id"].(string))
	if changed := mustAPI(t, key, s.url, "agents", "list", "--updated-since", since); len(changed) != 1 || changed[0]["id"] != items[3]["id"] {
		t.Fatalf("list --updated-since %s: %v", since, changed)
	}
}

// apiAskTwice: ask, and ask again in the same conversation.
func apiAskTwice(t *testing.T, s *apiService, key, id string) {
	ctx := context.Background()
	// ask, and ask again in the same conversation; the question may come on stdin.
	if _, errs, code := apiCLI(t, key, s.url, "", "ask", id, "hello?"); code != 1 || !strings.HasPrefix(errs, "agentapi: feature_not_enabled: ") {
		t.Fatalf("ask without the feature: exit %d, %q", code, errs)
	}
	if err := s.st.SetAccountFeature(ctx, s.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	ans := mustAPI(t, key, s.url, "ask", id, "What", "is", "2+2?")[0]
	conv, _ := ans["conversation_id"].(string)
	if ans["answer"] != "echo: What is 2+2?" || conv == "" || len(ans) != 6 || !serverTime(ans["created_at"]) {
		t.Fatalf("ask: %v", ans)
	}
	out, errs, code := apiCLI(t, key, s.url, "And 3+3?\n", "ask", id, "--conversation", conv, "-")
	if code != 0 || !strings.Contains(out, `"answer":"echo: And 3+3?"`) || !strings.Contains(out, conv) {
		t.Fatalf("ask from stdin: exit %d, %s %s", code, out, errs)
	}
	if st := mustAPI(t, key, s.url, "agents", "stats", id)[0]; st["questions_total"] != float64(2) || st["conversations_total"] != float64(1) ||
		len(st) != 7 || !serverTime(st["last_question_at"]) {
		t.Fatalf("stats: %v", st)
	}
}

func TestAPICommandFailures(t *testing.T) {
	s := newAPIService(t)
	key := s.key(nil, domain.ScopeAgentsRead).Credential
	revoked := s.key(nil, domain.ScopeAgentsRead)
	if err := s.keys.Revoke(context.Background(), keys.Actor{User: &s.owner}, s.account.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		key, url string
		args     []string
		code     int
		prefix   string // of stderr
	}{
		{"no key", "", s.url, []string{"me"}, 2, "agentapi: api me: set AGENTAPI_KEY"},
		{"key as a flag", key, s.url, []string{"me", "--key", key}, 2, "agentapi: api me: there is no --key flag"},
		{"key as a flag with =", key, s.url, []string{"agents", "list", "--api-key=" + key}, 2, "agentapi: api agents list: there is no --api-key flag"},
		{"malformed key", key[:len(key)-1], s.url, []string{"me"}, 2, "agentapi: api me: the API key is not of the form"},
		{"plain http to a remote host", key, "http://api.example.com/v1", []string{"me"}, 2, "agentapi: api me: refusing to send the API key in clear text to api.example.com over http; use https (or --insecure-http on a trusted network)"},
		{"url without /v1", key, strings.TrimSuffix(s.url, "/v1"), []string{"me"}, 2, "agentapi: api me: base URL"},
		{"unknown subcommand", key, s.url, []string{"agents", "delete", "agt_x"}, 2, `agentapi: unknown command "agentapi api agents delete"`},
		{"no subcommand", key, s.url, nil, 2, "agentapi: agentapi api needs a command"},
		{"missing id", key, s.url, []string{"agents", "get"}, 2, "agentapi: api agents get: expects ID, got none"},
		{"two ids", key, s.url, []string{"agents", "get", "a", "b"}, 2, `agentapi: api agents get: expects ID, got "a" "b"`},
		{"missing name", key, s.url, []string{"agents", "create"}, 2, "agentapi: api agents create: needs --name"},
		{"update without a change", key, s.url, []string{"agents", "update", "agt_x"}, 2, "agentapi: api agents update: needs --name NAME or --instructions TEXT"},
		{"bad updated-since", key, s.url, []string{"agents", "list", "--updated-since", "yesterday"}, 2, "agentapi: api agents list: --updated-since must be"},
		{"bad limit", key, s.url, []string{"agents", "list", "--limit", "ten"}, 2, `agentapi: api agents list: --limit must be a whole number of items a page, 1 to 100 (got "ten")`},
		{"ask without a question", key, s.url, []string{"ask", "agt_x"}, 2, "agentapi: api ask: expects AGENT_ID QUESTION..."},
		{"unknown agent", key, s.url, []string{"agents", "get", "agt_nope"}, 1, "agentapi: not_found: "},
		{"missing scope", key, s.url, []string{"agents", "create", "--name", "x"}, 1, "agentapi: access_denied: "},
		{"revoked key", revoked.Credential, s.url, []string{"me"}, 1, "agentapi: invalid_credentials: "},
		{"nothing listening", key, "http://127.0.0.1:1/v1", []string{"me"}, 1, "agentapi: cannot reach http://127.0.0.1:1/v1 (connection refused): is serve running? Set --url or AGENTAPI_URL to its address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := apiCLI(t, c.key, c.url, "", c.args...)
			if code != c.code || out != "" {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q", code, c.code, out, errs)
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, c.prefix) {
				t.Fatalf("stderr %q, want a last line starting %q", errs, c.prefix)
			}
		})
	}
}

// serverTime reports a timestamp as the server writes it: RFC 3339 in UTC
// with exactly three fractional digits, so that timestamps sort as strings.
func serverTime(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(s, "Z") {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}
