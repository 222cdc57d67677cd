package api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// webhookOp is an events or webhook endpoint operation that
// openAPICoverageWebhooks drives through its statuses: path has {we} and
// {evt} for an endpoint's and an event's ids.
type webhookOp struct {
	method, path, body string
	ok                 int
}

// webhookCallers are the keys and ids the webhook operations are driven
// with: a key with webhooks:manage, an endpoint and an event delivered to
// it.
type webhookCallers struct {
	*openAPICoverageCallers
	manage, endpoint, event string
}

// send sends one request, its answer validated against the document by
// the fixture's handler; an answer without a body (204, 202 on resend) is
// fine here, unlike f.do.
func (c *webhookCallers) send(method, path, key, body string, headers ...string) *httptest.ResponseRecorder {
	var hr *http.Request
	if body != "" {
		hr = httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
	} else {
		hr = httptest.NewRequest(method, "http://api.test"+path, nil)
	}
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		hr.Header.Set(name, strings.TrimSpace(value))
	}
	rec := httptest.NewRecorder()
	c.f.h.ServeHTTP(rec, hr)
	return rec
}

func (c *webhookCallers) want(t *testing.T, rec *httptest.ResponseRecorder, status int, code domain.Code, what string) {
	t.Helper()
	if rec.Code != status || code != "" && !strings.Contains(rec.Body.String(), `"code":"`+string(code)+`"`) {
		t.Fatalf("%s: %d %s, want %d %s", what, rec.Code, rec.Body.String(), status, code)
	}
}

// drive sends o's requests: the answer, then 400, 401, 403, 429, 404 for
// an unknown id, the scope's 403, 415 and 413 (with a body), and 500.
func (c *webhookCallers) drive(t *testing.T, o webhookOp) {
	t.Helper()
	path := strings.NewReplacer("{we}", c.endpoint, "{evt}", c.event).Replace(o.path)
	what := o.method + " " + path
	c.want(t, c.send(o.method, path, c.manage, o.body), o.ok, "", what)
	c.want(t, c.send(o.method, path+"?unknown=1", c.manage, o.body), 400, domain.CodeInvalidField, what+"?unknown=1")
	c.want(t, c.send(o.method, path, "", o.body), 401, domain.CodeInvalidCredentials, what+" without a key")
	c.want(t, c.send(o.method, path+"?access_token=x", c.manage, o.body), 403, domain.CodeAccessDenied, what+"?access_token")
	c.want(t, c.send(o.method, path, c.limited, o.body), 429, domain.CodeRateLimitExceeded, what+" past the limit")
	c.want(t, c.send(o.method, path, c.admin, o.body), 403, domain.CodeAccessDenied, what+" without the scope")
	if strings.Contains(o.path, "{") {
		gone := strings.NewReplacer("{we}", "we_nowhere", "{evt}", "evt_nowhere").Replace(o.path)
		if strings.Contains(o.path, "{we}") && strings.Contains(o.path, "{evt}") {
			c.want(t, c.send(o.method, strings.Replace(o.path, "{we}", c.endpoint, 1), c.manage, o.body), 404, domain.CodeNotFound, what+" of no event")
		}
		c.want(t, c.send(o.method, gone, c.manage, o.body), 404, domain.CodeNotFound, what+" of nothing")
	}
	if o.body != "" {
		c.want(t, c.send(o.method, path, c.manage, o.body, "Content-Type: text/plain"), 415, domain.CodeUnsupportedType, what+" as text")
		c.want(t, c.send(o.method, path, c.manage, c.huge), 413, domain.CodeFileTooLarge, what+" too large")
	}
	c.sw.broken.Store(true)
	c.want(t, c.send(o.method, path, c.manage, o.body), 500, domain.CodeServerError, what+" with the limiter down")
	c.sw.broken.Store(false)
}

// openAPICoverageWebhooks drives every events and webhook endpoint
// operation through the statuses the document lists for it.
func openAPICoverageWebhooks(t *testing.T, cov *openAPICoverageCallers) {
	t.Helper()
	f := cov.f
	// Some 120 requests: more than the default allowance of a minute.
	manage := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = domain.MaxRateLimitPerMinute }, domain.ScopeWebhooksManage).Credential
	c := &webhookCallers{openAPICoverageCallers: cov, manage: manage}
	created := c.send("POST", "/v1/webhook-endpoints", c.manage, `{"url":"https://hooks.example.com/in","enabled_events":["*"]}`)
	c.want(t, created, 201, "", "create an endpoint")
	c.endpoint = jsonField(t, created.Body.String(), "id")
	// An event delivered to the endpoint (no worker runs: it stays pending).
	f.createAgent(cov.admin, "Evented")
	events := c.send("GET", "/v1/events?type=ai_agent.created&limit=1", c.manage, "")
	c.want(t, events, 200, "", "list events")
	c.event = jsonField(t, events.Body.String(), "id")

	for _, o := range []webhookOp{
		{method: "GET", path: "/v1/events", ok: 200},
		{method: "GET", path: "/v1/events/{evt}", ok: 200},
		{method: "GET", path: "/v1/webhook-endpoints", ok: 200},
		{method: "POST", path: "/v1/webhook-endpoints", body: `{"url":"https://hooks.example.com/b","enabled_events":["api_key.*"]}`, ok: 201},
		{method: "GET", path: "/v1/webhook-endpoints/{we}", ok: 200},
		{method: "PATCH", path: "/v1/webhook-endpoints/{we}", body: `{"description":"Covered"}`, ok: 200},
		{method: "POST", path: "/v1/webhook-endpoints/{we}/rotate-secret", body: `{"old_secret_expires_in":60}`, ok: 200},
		{method: "POST", path: "/v1/webhook-endpoints/{we}/test", ok: 202},
		{method: "GET", path: "/v1/webhook-endpoints/{we}/deliveries", ok: 200},
		{method: "POST", path: "/v1/webhook-endpoints/{we}/deliveries/{evt}/resend", ok: 202},
	} {
		c.drive(t, o)
	}
	openAPICoverageWebhookConflicts(t, c)
	// A key restricted to agents manages no endpoint.
	restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{cov.agent} }, domain.ScopeWebhooksManage).Credential
	c.want(t, c.send("GET", "/v1/webhook-endpoints", restricted, ""), 403, domain.CodeAccessDenied, "a restricted key")
	// Delete last: the other operations need the endpoint.
	c.drive(t, webhookOp{method: "DELETE", path: "/v1/webhook-endpoints/{we}", ok: 204})
}

// openAPICoverageWebhookConflicts produces the 409s: a test event to a
// disabled endpoint, and one endpoint more than an account may have.
func openAPICoverageWebhookConflicts(t *testing.T, c *webhookCallers) {
	t.Helper()
	off := c.send("POST", "/v1/webhook-endpoints", c.manage, `{"url":"https://hooks.example.com/off","enabled_events":["*"]}`)
	c.want(t, off, 201, "", "create an endpoint")
	offID := jsonField(t, off.Body.String(), "id")
	c.want(t, c.send("PATCH", "/v1/webhook-endpoints/"+offID, c.manage, `{"status":"disabled"}`), 200, "", "disable it")
	c.want(t, c.send("POST", "/v1/webhook-endpoints/"+offID+"/test", c.manage, ""), 409, domain.CodeImmutableState, "test a disabled endpoint")
	for i := 0; ; i++ {
		r := c.send("POST", "/v1/webhook-endpoints", c.manage, `{"url":"https://hooks.example.com/many","enabled_events":["*"]}`)
		if r.Code == http.StatusConflict {
			c.want(t, r, 409, domain.CodeInconsistentState, "one endpoint too many")
			break
		}
		if r.Code != http.StatusCreated || i > domain.MaxWebhookEndpoints {
			t.Fatalf("endpoint %d: %d %s", i, r.Code, r.Body.String())
		}
	}
}

// jsonField is the string field name of a response's data (an object, or
// a list's first item).
func jsonField(t *testing.T, body, name string) string {
	t.Helper()
	var env struct {
		Data any `json:"data"`
	}
	if err := jsonUnmarshal(body, &env); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	d := env.Data
	if list, ok := d.([]any); ok && len(list) > 0 {
		d = list[0]
	}
	m, _ := d.(map[string]any)
	s, ok := m[name].(string)
	if !ok {
		t.Fatalf("no data.%s in %s", name, body)
	}
	return s
}

// TestOpenAPIWebhooksMatchEventTypes: the document's webhooks list one
// payload per event type, and its EventType and EventPattern enums are the
// code's types and families.
func TestOpenAPIWebhooksMatchEventTypes(t *testing.T) {
	d := &openAPIMatchesCodeDoc{t: t}
	if err := jsonUnmarshal(string(openAPIDocument), &d.doc); err != nil {
		t.Fatal(err)
	}
	var types, patterns []string
	for _, et := range domain.EventTypes {
		types = append(types, string(et))
	}
	types = append(types, string(domain.EventWebhookTest))
	patterns = append(append(append(patterns, types[:len(types)-1]...), domain.EventFamilies...), "*")
	slices.Sort(types)
	slices.Sort(patterns)
	var hooks []string
	for name := range d.at("webhooks").(map[string]any) {
		hooks = append(hooks, name)
	}
	slices.Sort(hooks)
	if !slices.Equal(hooks, types) {
		t.Errorf("webhooks %v, the event types %v", hooks, types)
	}
	if got := openAPIMatchesCodeStrs(d.at("components", "schemas", "EventType", "enum")); !slices.Equal(got, types) {
		t.Errorf("EventType enum %v, the event types %v", got, types)
	}
	if got := openAPIMatchesCodeStrs(d.at("components", "schemas", "EventPattern", "enum")); !slices.Equal(got, patterns) {
		t.Errorf("EventPattern enum %v, the types and families %v", got, patterns)
	}
}
