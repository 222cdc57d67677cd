package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
)

// writeLog stores one request log of key at, as the usage recorder would.
func writeLog(t *testing.T, f *fixture, accountID, keyID string, at time.Time, method, route, path string, status int, code string) requestlog.Log {
	t.Helper()
	l := requestlog.Log{ID: domain.NewRequestID(at), AccountID: accountID, KeyID: keyID, At: at, Method: method,
		Route: route, Path: path, Status: status, ErrorCode: code, Duration: 12345 * time.Microsecond, Client: "198.51.100.7"}
	if err := f.st.WriteUsage(context.Background(), []requestlog.Log{l}, nil); err != nil {
		t.Fatal(err)
	}
	return l
}

// The route filter takes a path pasted from the table (or a request line,
// or an address with its query) as the route whose pattern it fits: a
// path alone keeps every method of that pattern, a request line its
// method's; the count says how many match; a path no route has is an
// error naming the route field.
func TestLogsRouteFromPastedPath(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	now := f.clock.Now()
	for i := range 9 {
		at := now.Add(-time.Duration(i) * time.Second)
		switch {
		case i < 3:
			writeLog(t, f, a.ID, k.Key.ID, at, "GET", "GET /v1/ai-agents/{agent_id}", "/v1/ai-agents/agt_1", 200, "")
		case i < 5:
			writeLog(t, f, a.ID, k.Key.ID, at, "PATCH", "PATCH /v1/ai-agents/{agent_id}", "/v1/ai-agents/agt_2", 400, "invalid_value")
		default:
			writeLog(t, f, a.ID, k.Key.ID, at, "GET", "GET /v1/me", "/v1/me", 200, "")
		}
	}
	b := f.signedIn(owner)
	for route, want := range map[string]int{
		"/v1/ai-agents/agt_123":                     5,
		"GET /v1/ai-agents/agt_123":                 3,
		"PATCH /v1/ai-agents/agt_9":                 2,
		"GET /v1/me":                                4,
		"https://api.example.com/v1/me?verbose=yes": 4,
		"GET /v1/ai-agents/{agent_id}":              3,
	} {
		p := b.get("/console/developers/logs?route=" + url.QueryEscape(route))
		wantStatus(t, route, p, http.StatusOK)
		if n := len(logRowRE.FindAllString(p.body, -1)); n != want {
			t.Errorf("route %q lists %d logs, want %d", route, n, want)
		}
		if !strings.Contains(p.body, `id="log-count">`+strconv.Itoa(want)+` request`) {
			t.Errorf("route %q: no count of %d: %s", route, want, regexpFind(`id="log-count">[^<]*`, p.body))
		}
	}
	p := b.get("/console/developers/logs?route=" + url.QueryEscape("/v1/ai-agents/agt_1"))
	wantHolds(t, "the route as its pattern", p.body, []string{`value="/v1/ai-agents/{agent_id}"`, `<span>Route</span> <bdi>/v1/ai-agents/{agent_id}</bdi>`}, nil)
	p = b.get("/console/developers/logs?route=" + url.QueryEscape("/v1/no-such-thing"))
	wantStatus(t, "no such route", p, http.StatusBadRequest)
	wantHolds(t, "no such route", p.body, []string{`id="route-error"`, `id="filter-route"`, `aria-describedby="route-error"`}, nil)
}

// Every filter in error is named at once, each field marked, and no logs
// are listed.
func TestLogsEveryFieldErrorAtOnce(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	writeLog(t, f, a.ID, k.Key.ID, f.clock.Now(), "GET", "GET /v1/me", "/v1/me", 200, "")
	b := f.signedIn(owner)
	p := b.get("/console/developers/logs?status=abc&route=%2Fv1%2Fnope&key=nobody&range=2y&from=yesterday&to=soon&id=" + strings.Repeat("x", 300))
	wantStatus(t, "every filter wrong", p, http.StatusBadRequest)
	var want []string
	for _, f := range []string{"id", "key", "status", "route", "range", "from", "to"} {
		want = append(want, `<li class="field-error" id="`+f+`-error">`, `id="filter-`+f+`"`, `aria-describedby="`+f+`-error"`)
	}
	wantHolds(t, "every filter wrong", p.body, append(want, "7 filters to fix"), []string{`data-request-id=`})
	// In the form's order.
	if i, j := strings.Index(p.body, `id="id-error"`), strings.Index(p.body, `id="to-error"`); i > j {
		t.Error("the errors are not in the form's order")
	}
}

// A quick range keeps the logs of its last minutes; the count counts all
// that match, past the page's 50; a custom range shows as one chip.
func TestLogsQuickRangesAndCount(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Busy")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 100) // a log each 37 s, back from now
	b := f.signedIn(owner)
	for rng, want := range map[string]int{"15m": 25, "1h": 98, "24h": 100, "": 100} {
		p := b.get("/console/developers/logs?range=" + rng)
		wantStatus(t, rng, p, http.StatusOK)
		if got := regexpFind(`id="log-count">([^<]*)`, p.body); got != strconv.Itoa(want)+" requests" {
			t.Errorf("range %q: count %q, want %d", rng, got, want)
		}
		if n := len(logRowRE.FindAllString(p.body, -1)); n != min(want, 50) {
			t.Errorf("range %q lists %d", rng, n)
		}
	}
	wantHolds(t, "quick range", b.get("/console/developers/logs?range=1h").body, []string{`<option value="1h" selected>Last hour</option>`, `<span>Time</span> <bdi>Last hour</bdi>`}, nil)
	from := f.clock.Now().Add(-10 * time.Minute).UTC().Format("2006-01-02T15:04")
	p := b.get("/console/developers/logs?from=" + from)
	wantHolds(t, "custom range", p.body, []string{`<option value="custom" selected>`, `<bdi>` + from + ` → now UTC</bdi>`}, nil)
	// A chip's × drops its filter and keeps the others.
	p = b.get("/console/developers/logs?range=1h&status=4xx")
	remove := regexpFind(`href="([^"]+)" class="chip-x" title="Remove this filter" aria-label="Remove the Status filter"`, p.body)
	if !strings.Contains(remove, "range=1h") || strings.Contains(remove, "status=") {
		t.Errorf("the status chip's × goes to %q", remove)
	}
}

// A row opens its request's detail: everything the log holds, its error
// code's meaning, links to the key and its other requests. Another
// account's request, an id no log has, and an Agent are 404.
func TestLogDetail(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	at := f.clock.Now().Add(-3 * time.Minute)
	l := writeLog(t, f, a.ID, k.Key.ID, at, "POST", "POST /v1/ai-agents/{agent_id}/questions", "/v1/ai-agents/agt_7/questions", 429, "rate_limit_exceeded")
	other, otherOwner := f.account("Other")
	ok := f.key(other, otherOwner, "Theirs")
	theirs := writeLog(t, f, other.ID, ok.Key.ID, at, "GET", "GET /v1/me", "/v1/me", 200, "")
	b := f.signedIn(owner)
	list := b.get("/console/developers/logs")
	// Without JavaScript a row's id is a link, and the live tail's button
	// stays hidden.
	wantHolds(t, "the row's link", list.body, []string{`data-href="/console/developers/logs/` + l.ID + `"`, `<a href="/console/developers/logs/` + l.ID + `" class="l-open">`,
		`id="tail-toggle" data-src="/console/developers/logs/tail" hidden>`}, nil)
	p := b.get("/console/developers/logs/" + l.ID)
	wantStatus(t, "detail", p, http.StatusOK)
	wantHolds(t, "detail", p.body, []string{
		`<span class="method">POST</span> <code><bdi>/v1/ai-agents/agt_7/questions</bdi></code>`,
		`429 Too Many Requests`, `<code id="log-code">rate_limit_exceeded</code>`,
		`The key&#39;s per-minute ceiling was reached`,
		`<code id="request-id">` + l.ID + `</code>`,
		at.UTC().Format("2006-01-02 15:04:05.000") + ` UTC`, `3 min ago`,
		`12.3 ms`, `198.51.100.7`,
		`<a href="/console/developers/keys/` + k.Key.ID + `"><bdi>Helpdesk bot</bdi></a> <code>` + k.Key.Prefix + `</code>`,
		`href="/console/developers/logs?key=` + k.Key.ID + `" id="key-logs"`,
		`id="route-logs"`, `id="around-logs"`,
	}, nil)
	for _, path := range []string{"/console/developers/logs/" + theirs.ID, "/console/developers/logs/" + domain.NewRequestID(at), "/console/developers/logs/req_%3Cx%3E"} {
		wantStatus(t, path, b.get(path), http.StatusNotFound)
	}
	agent := f.user(a, "agent@acme.example", domain.RoleAgent)
	wantStatus(t, "an Agent", f.signedIn(agent).get("/console/developers/logs/"+l.ID), http.StatusNotFound)
}

// The route picker lists the API's routes: those of the OpenAPI document
// (all but GET /v1/openapi.json, which no key calls), as the router names
// them.
func TestLogsRoutesAreTheAPIs(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if m := strings.ToUpper(m); slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, m) && path != "/openapi.json" {
				want = append(want, m+" /v1"+path)
			}
		}
	}
	got := slices.Clone(requestlog.Routes)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("routes\n%q\nOpenAPI\n%q", got, want)
	}
	f := newFixture(t)
	_, owner := f.account("Acme")
	p := f.signedIn(owner).get("/console/developers/logs")
	for _, r := range requestlog.Routes {
		wantHolds(t, "picker", p.body, []string{`<option value="` + r + `">`}, nil)
	}
}

// The console's CSP lets a page connect to its own origin (the live
// tail's EventSource) and still allows no inline code.
func TestCSPAllowsTheLiveTail(t *testing.T) {
	f := newFixture(t)
	csp := f.browser().get("/console/signin").header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

// The count looks at no more than the newest 10,000 logs (a batch more at
// most): past them it says "N+" and how many it looked at.
func TestLogsCountStopsAtItsBudget(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Busy")
	now := f.clock.Now()
	logs := make([]requestlog.Log, 12_000)
	for i := range logs {
		at := now.Add(-time.Duration(i) * time.Millisecond)
		logs[i] = requestlog.Log{ID: domain.NewRequestID(at), AccountID: a.ID, KeyID: k.Key.ID, At: at, Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200}
	}
	if err := f.st.WriteUsage(context.Background(), logs, nil); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	p := b.get("/console/developers/logs")
	// Past 10,000 logs (or 50 ms, on a slow machine: then fewer).
	if got := regexpFind(`id="log-count">([^<]*)`, p.body); !strings.HasSuffix(got, "&#43; requests") {
		t.Errorf("count %q", got)
	}
	note := regexpFind(`id="count-note">counted among the newest ([\d,]+)<`, p.body)
	if n, err := strconv.Atoi(strings.ReplaceAll(note, ",", "")); err != nil || n <= 0 || n > 10_000+512 {
		t.Errorf("count note %q", note)
	}
	if got := regexpFind(`id="log-count">([^<]*)`, b.get("/console/developers/logs?range=15m&status=5xx").body); got != "0 requests" {
		t.Errorf("no 5xx: count %q", got)
	}
}
