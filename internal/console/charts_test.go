package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
)

// The overview and a key's page chart one range, chosen with links that
// need no JavaScript (24 h by default, 7 d, 30 d); the chosen one is
// marked; any other range is a 400 naming the accepted ones.
func TestChartRangeSelector(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Ranged")
	b := f.signedIn(owner)
	keyPath := "/console/developers/keys/" + k.Key.ID
	for _, c := range []struct{ path, want string }{
		{"/console/overview", "24h"}, {"/console/overview?range=7d", "7d"}, {"/console/overview?range=30d", "30d"},
		{keyPath, "24h"}, {keyPath + "?range=7d", "7d"}, {keyPath + "?range=30d", "30d"},
	} {
		p := b.get(c.path)
		wantStatus(t, c.path, p, 200)
		base, _, _ := strings.Cut(c.path, "?")
		if n := strings.Count(p.body, `<figure class="usage">`); n != 1 || !strings.Contains(p.body, `<svg id="usage-`+c.want+`"`) {
			t.Errorf("%s: %d charts, want the one of %s", c.path, n, c.want)
		}
		for _, r := range []string{"24h", "7d", "30d"} {
			link := `<a href="` + base + `?range=` + r + `#usage"`
			if r == c.want {
				link += ` aria-current="page"`
			}
			if !strings.Contains(p.body, link+">") {
				t.Errorf("%s: no range link %s", c.path, link)
			}
		}
	}
	for _, path := range []string{"/console/overview?range=1y", keyPath + "?range=24"} {
		if p := b.get(path); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Choose a range of 24h, 7d or 30d.") {
			t.Errorf("%s: %d, want 400 naming the ranges", path, p.status)
		}
	}
}

// Each request's latency, recorded by the usage recorder, gives the
// chart's p50 and p95: of 1 to 100 ms, about 50 and 95 ms, in the legend,
// with a point per bucket in the latency panel, on the key's page and the
// overview.
func TestChartLatency(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Timed")
	now := f.clock.Now()
	for ms := 1; ms <= 100; ms++ {
		f.usage.Record(requestlog.Log{ID: domain.NewRequestID(now), AccountID: a.ID, KeyID: k.Key.ID, At: now, Method: "GET",
			Route: "GET /v1/me", Path: "/v1/me", Status: 200, Duration: time.Duration(ms) * time.Millisecond, Client: "192.0.2.1"})
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	for _, path := range []string{"/console/developers/keys/" + k.Key.ID, "/console/overview?range=30d"} {
		p := b.get(path)
		wantStatus(t, path, p, 200)
		for q, want := range map[string]float64{"p50": 50, "p95": 95} {
			m := regexp.MustCompile(`<strong class="` + q + `">([0-9.]+) ms</strong>`).FindStringSubmatch(p.body)
			if m == nil {
				t.Errorf("%s: no %s", path, q)
				continue
			}
			if got, _ := strconv.ParseFloat(m[1], 64); got < want*0.875 || got > want*1.125 {
				t.Errorf("%s: %s %s ms, want about %.0f", path, q, m[1], want)
			}
			if n := strings.Count(p.body, `<g class="latency-line" data-line="`+q+`"`); n != 1 {
				t.Errorf("%s: %d %s lines", path, n, q)
			}
		}
		if !strings.Contains(p.body, `<title id="usage-`) || !strings.Contains(p.body, `Latency (ms)`) || strings.Count(p.body, "<circle ") != 2 {
			t.Errorf("%s: the latency panel lacks its axis title or its two points (one bucket)", path)
		}
	}
}

var busyAgentRE = regexp.MustCompile(`<tr data-agent-id="([^"]+)">\s*<td><a href="/console/agents/([^"]+)"><bdi>([^<]+)</bdi></a></td>\s*<td class="num">([\d,]+)</td>`)

// The overview lists the account's five busiest AI agents in the range,
// linked, the most requests first, counted by the usage recorder from
// the API's own routes; a request to an agent id that does not exist
// does not count.
func TestBusiestAgents(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Caller")
	call := func(path string) int {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+k.Credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var ids []string
	for i := range 6 {
		ag := f.agent(a, "Agent "+strconv.Itoa(i))
		ids = append(ids, ag.ID)
		for range i + 1 {
			if st := call("/v1/ai-agents/" + ag.ID); st != 200 {
				t.Fatalf("GET agent %d: %d", i, st)
			}
		}
	}
	for range 9 {
		if st := call("/v1/ai-agents/agt_01jd8zq2x8m4v7n3k5p6r9t2wx"); st != 404 {
			t.Fatalf("a made-up agent: %d", st)
		}
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := f.signedIn(owner).get("/console/overview")
	wantStatus(t, "overview", p, 200)
	rows := busyAgentRE.FindAllStringSubmatch(p.body, -1)
	if len(rows) != 5 {
		t.Fatalf("%d busy agents listed, want 5:\n%s", len(rows), p.body)
	}
	for i, r := range rows {
		want := 5 - i
		if r[1] != ids[want] || r[2] != ids[want] || r[3] != "Agent "+strconv.Itoa(want) || r[4] != strconv.Itoa(want+1) {
			t.Errorf("row %d: %q, want Agent %d with %d requests", i, r[1:], want, want+1)
		}
	}
}

// An AI agent's page charts the requests to its routes over the chosen
// range for Owners and Admins (no latency: it is counted per key), and
// shows no chart to other roles.
func TestAgentChart(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Caller")
	ag, quiet := f.agent(a, "Helpdesk"), f.agent(a, "Quiet")
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/ai-agents/"+ag.ID, nil)
		req.Header.Set("Authorization", "Bearer "+k.Credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	for _, c := range []struct{ path, id, want string }{
		{"/console/agents/" + ag.ID, "24h", "3"}, {"/console/agents/" + ag.ID + "?range=30d", "30d", "3"}, {"/console/agents/" + quiet.ID, "24h", "0"},
	} {
		p := b.get(c.path)
		wantStatus(t, c.path, p, 200)
		if !strings.Contains(p.body, `<svg id="usage-`+c.id+`"`) || !strings.Contains(p.body, `data-total="`+c.want+`"`) || strings.Contains(p.body, "latency-chart") {
			t.Errorf("%s: want the %s chart of %s requests, without latency", c.path, c.id, c.want)
		}
	}
	if p := b.get("/console/agents/" + ag.ID + "?range=2d"); p.status != http.StatusBadRequest {
		t.Errorf("a bad range: %d", p.status)
	}
	viewer := f.signedIn(f.user(a, "agent@acme.example", domain.RoleAgent)).get("/console/agents/" + ag.ID)
	if wantStatus(t, "agent page as an Agent", viewer, 200); strings.Contains(viewer.body, `id="usage"`) {
		t.Error("an Agent sees the usage chart")
	}
}
