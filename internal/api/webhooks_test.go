package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

var hookScopes = append([]domain.Scope{domain.ScopeWebhooksManage}, allAgentScopes...)

// endpointRoutes are every endpoint-management route, with a body where
// one is needed.
var endpointRoutes = []struct{ method, path, body string }{
	{"GET", "/v1/webhook-endpoints", ""},
	{"POST", "/v1/webhook-endpoints", `{"url":"https://hooks.example.com/a","enabled_events":["*"]}`},
	{"GET", "/v1/webhook-endpoints/we_x", ""},
	{"PATCH", "/v1/webhook-endpoints/we_x", `{"description":"x"}`},
	{"DELETE", "/v1/webhook-endpoints/we_x", ""},
	{"POST", "/v1/webhook-endpoints/we_x/rotate-secret", `{}`},
	{"POST", "/v1/webhook-endpoints/we_x/test", ""},
	{"GET", "/v1/webhook-endpoints/we_x/deliveries", ""},
	{"POST", "/v1/webhook-endpoints/we_x/deliveries/evt_x/resend", ""},
}

// TestWebhooksNeedTheScope: events and endpoints need webhooks:manage,
// and the refusal names it; a key restricted to agents manages no
// endpoint and sees only its agents' ai_agent events.
func TestWebhooksNeedTheScope(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	noScope := f.key(allAgentScopes...)
	for _, r := range append(endpointRoutes, struct{ method, path, body string }{"GET", "/v1/events", ""},
		struct{ method, path, body string }{"GET", "/v1/events/evt_x", ""}) {
		res := f.hook(r.method, r.path, noScope, r.body)
		res.wantError(t, 403, domain.CodeAccessDenied)
		if !strings.Contains(res.message(), "webhooks:manage") {
			t.Fatalf("%s %s: %q does not name the scope", r.method, r.path, res.message())
		}
	}

	full := f.key(hookScopes...)
	mine := f.createAgent(full, "Mine")
	other := f.createAgent(full, "Other")
	restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{mine} }, hookScopes...).Credential
	for _, r := range endpointRoutes {
		f.hook(r.method, r.path, restricted, r.body).wantError(t, 403, domain.CodeAccessDenied)
	}
	f.hook("PATCH", "/v1/ai-agents/"+mine, full, `{"name":"Mine 2"}`).wantStatus(t, 200)
	f.hook("PATCH", "/v1/ai-agents/"+other, full, `{"name":"Other 2"}`).wantStatus(t, 200)

	list := events(t, f.hookGet("/v1/events?limit=100", restricted))
	if len(list) != 2 {
		t.Fatalf("a key restricted to %s sees %d events, want its 2: %v", mine, len(list), list)
	}
	for _, ev := range list {
		data := ev["data"].(map[string]any)
		if !strings.HasPrefix(ev["type"].(string), "ai_agent.") || data["id"] != mine {
			t.Fatalf("a key restricted to %s sees %v", mine, ev)
		}
	}
	all := events(t, f.hookGet("/v1/events?limit=100", full))
	for _, ev := range all {
		if data := ev["data"].(map[string]any); ev["type"] == "ai_agent.created" && data["id"] == other {
			f.hookGet("/v1/events/"+ev["id"].(string), restricted).wantError(t, 404, domain.CodeNotFound)
			f.hookGet("/v1/events/"+ev["id"].(string), full).wantStatus(t, 200)
		}
	}
}

// hook and hookGet send a request to an events or webhook route, checked
// against openapi.json as every exchange of the fixture is.
func (f *fixture) hook(method, path, key, body string) *response {
	return f.do(req{method: method, path: path, key: key, body: body})
}

func (f *fixture) hookGet(path, key string) *response { return f.hook("GET", path, key, "") }

func events(t *testing.T, r *response) []map[string]any {
	t.Helper()
	r.wantStatus(t, 200)
	var out []map[string]any
	for _, it := range r.body["data"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// TestCreateEndpointErrors: each refusal names its field.
func TestCreateEndpointErrors(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	key := f.key(hookScopes...)
	post := func(body string) *response { return f.hook("POST", "/v1/webhook-endpoints", key, body) }
	post(`{"enabled_events":["*"]}`).wantError(t, 400, domain.CodeMissingField, "url:missing_field")
	post(`{"url":"http://127.0.0.1:9/x","enabled_events":["*"]}`).wantError(t, 400, domain.CodeInvalidValue, "url:invalid_value")
	post(`{"url":"http://hooks.example.com/x","enabled_events":["*"]}`).wantError(t, 400, domain.CodeInvalidValue, "url:invalid_value")
	post(`{"url":"https://hooks.example.com/x","enabled_events":["agent.created"]}`).wantError(t, 400, domain.CodeInvalidValue, "enabled_events:invalid_value")

	var first *response
	for i := range domain.MaxWebhookEndpoints {
		r := post(`{"url":"https://hooks.example.com/` + strconv.Itoa(i) + `","enabled_events":["api_key.leaked"]}`)
		r.wantStatus(t, 201)
		if first == nil {
			first = r
		}
	}
	post(`{"url":"https://hooks.example.com/17","enabled_events":["*"]}`).wantError(t, 409, domain.CodeInconsistentState)

	id := first.data()["id"].(string)
	rotate := "/v1/webhook-endpoints/" + id + "/rotate-secret"
	for _, bad := range []string{"-1", "604801"} {
		f.hook("POST", rotate, key, `{"old_secret_expires_in":`+bad+`}`).wantError(t, 400, domain.CodeInvalidValue, "old_secret_expires_in:invalid_value")
	}
	checkSecretShownOnce(t, f, key, first)
}

// checkSecretShownOnce: the secret is in the create and rotate answers and
// in no read of the endpoint.
func checkSecretShownOnce(t *testing.T, f *fixture, key string, created *response) {
	t.Helper()
	id := created.data()["id"].(string)
	secret, _ := created.data()["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("create answered secret %q", secret)
	}
	rot := f.hook("POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", key, `{"old_secret_expires_in":0}`)
	rot.wantStatus(t, 200)
	newSecret, _ := rot.data()["secret"].(string)
	if !strings.HasPrefix(newSecret, "whsec_") || newSecret == secret {
		t.Fatalf("rotate answered secret %q", newSecret)
	}
	for _, r := range []*response{f.hookGet("/v1/webhook-endpoints/"+id, key), f.hookGet("/v1/webhook-endpoints?limit=100", key),
		f.hook("PATCH", "/v1/webhook-endpoints/"+id, key, `{"description":"changed"}`)} {
		r.wantStatus(t, 200)
		if body := r.Body.String(); strings.Contains(body, "whsec_") {
			t.Fatalf("a read shows a secret: %s", body)
		}
	}
}

// TestListEventsFilters: type (with families), created_since, a bad type
// naming the parameter, paging with limit and next, and a cursor of
// another filter refused.
func TestListEventsFilters(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	key := f.key(hookScopes...)
	f.createAgent(key, "One")
	time.Sleep(5 * time.Millisecond) // events are stamped with the store's time
	f.createAgent(key, "Two")
	f.createAgent(key, "Three")
	agentEvents := events(t, f.hookGet("/v1/events?limit=100&type=ai_agent.created", key))
	if len(agentEvents) != 3 {
		t.Fatalf("type=ai_agent.created: %v", agentEvents)
	}
	since := agentEvents[1]["created_at"].(string)

	keyEvents := events(t, f.hookGet("/v1/events?limit=100&type=api_key.*", key))
	if len(keyEvents) != 1 || keyEvents[0]["type"] != "api_key.created" {
		t.Fatalf("type=api_key.*: %v", keyEvents)
	}
	both := events(t, f.hookGet("/v1/events?limit=100&type="+url.QueryEscape("api_key.created,ai_agent.created"), key))
	if len(both) != 4 {
		t.Fatalf("two types: %d events, want 4", len(both))
	}
	recent := events(t, f.hookGet("/v1/events?limit=100&created_since="+since, key))
	if len(recent) != 2 {
		t.Fatalf("created_since: %d events, want 2", len(recent))
	}
	f.hookGet("/v1/events?type=agent.created", key).wantError(t, 400, domain.CodeInvalidValue, "type:invalid_value")

	var ids []string
	path := "/v1/events?limit=1&type=ai_agent.*"
	for range 10 {
		r := f.hookGet(path, key)
		for _, ev := range events(t, r) {
			ids = append(ids, ev["id"].(string))
		}
		next, _ := r.body["meta"].(map[string]any)["next"].(string)
		if next == "" {
			break
		}
		if len(ids) == 1 {
			f.hookGet("/v1/events?limit=1&next="+url.QueryEscape(next), key).wantError(t, 400, domain.CodeInvalidValue, "next:invalid_value")
		}
		path = "/v1/events?limit=1&type=ai_agent.*&next=" + url.QueryEscape(next)
	}
	if len(ids) != 3 || ids[0] == ids[1] || ids[1] == ids[2] {
		t.Fatalf("paging one at a time: %v, want the 3 agent events", ids)
	}
}

// TestTestEventGoesToOneEndpoint: a test event has a delivery to that
// endpoint only, and is not listed by GET /v1/events.
func TestTestEventGoesToOneEndpoint(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	key := f.key(hookScopes...)
	var ids []string
	for i := range 2 {
		r := f.hook("POST", "/v1/webhook-endpoints", key, `{"url":"https://hooks.example.com/`+strconv.Itoa(i)+`","enabled_events":["*"]}`)
		r.wantStatus(t, 201)
		ids = append(ids, r.data()["id"].(string))
	}
	before := len(events(t, f.hookGet("/v1/events?limit=100", key)))
	r := f.hook("POST", "/v1/webhook-endpoints/"+ids[0]+"/test", key, "")
	r.wantStatus(t, http.StatusAccepted)
	evID := r.data()["id"].(string)
	if r.data()["type"] != "webhook.test" {
		t.Fatalf("test event: %s", r.Body.String())
	}
	list := events(t, f.hookGet("/v1/events?limit=100", key))
	if len(list) != before {
		t.Fatalf("GET /v1/events lists %d events after a test event, %d before", len(list), before)
	}
	f.hookGet("/v1/events/"+evID, key).wantError(t, 404, domain.CodeNotFound)

	now := time.Now().Add(time.Second)
	due, err := f.st.DueEndpoints(t.Context(), now, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0] != ids[0] {
		t.Fatalf("endpoints with a delivery due: %v, want only %s", due, ids[0])
	}
	claimed, err := f.st.ClaimDeliveries(t.Context(), ids[0], "lease_t", now, now.Add(30*time.Second), 10)
	if err != nil || len(claimed) != 1 || claimed[0].Event.ID != evID {
		t.Fatalf("the test endpoint's deliveries: %+v, %v", claimed, err)
	}
}
