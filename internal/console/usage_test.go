package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// apiGet sends GET path with cred to f's handler and returns the status
// and the request id.
func apiGet(t *testing.T, f *fixture, path, cred string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Request-Id")
}

var legendRE = regexp.MustCompile(`<li data-class="([0-9x]+)">.*? <span class="n">([0-9,]+)</span>`)

// chartTotals reads the per-class totals of the key page's charts (24 h
// first, then 30 days), as the page shows them in text.
func chartTotals(t *testing.T, body string) map[string]int {
	t.Helper()
	parts := strings.Split(body, `<figure class="usage">`)
	if len(parts) != 2 {
		t.Fatalf("%d charts, want one", len(parts)-1)
	}
	out := map[string]int{}
	for _, m := range legendRE.FindAllStringSubmatch(parts[1], -1) {
		n, _ := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		out[m[1]] += n
	}
	return out
}

// Two instances on one PostgreSQL database record requests of every class
// with one key; after both flush, the key page's charts show the exact
// totals, the Developers page the key's 24-hour count, and a 4xx is found
// on the Logs page by its request id; a Viewer gets 404 there.
func TestUsageAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	open := func() *fixture {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		mem := ratelimit.NewMemory(nil)
		t.Cleanup(mem.Close)
		return newFixtureOn(t, st, mem)
	}
	a, b := open(), open()
	acct, _ := a.account("Acme")
	owner := a.user(acct, "usage-owner@acme.example", domain.RoleOwner)
	k := a.key(acct, owner, "usage key")
	want := map[string]int{"2xx": 0, "4xx": 0}
	var notFound string
	for i := range 7 {
		f := []*fixture{a, b}[i%2]
		if st, _ := apiGet(t, f, "/v1/me", k.Credential); st != 200 {
			t.Fatalf("GET /v1/me: %d", st)
		}
		want["2xx"]++
		if i < 5 {
			st, id := apiGet(t, f, "/v1/ai-agents/agt_nope", k.Credential)
			if st < 400 || st > 499 || st == 429 {
				t.Fatalf("GET missing agent: %d", st)
			}
			want["4xx"]++
			notFound = id
		}
	}
	for _, f := range []*fixture{a, b} {
		if err := f.usage.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	br := a.browser()
	br.signIn(owner.Email, testPassword, "/console/")
	p := br.get("/console/developers/keys/" + k.Key.ID)
	wantStatus(t, "key page", p, 200)
	checkKeyUsage(t, p.body, want, notFound)
	dev := br.get("/console/developers")
	if !regexp.MustCompile(`data-key-id="` + k.Key.ID + `"[\s\S]*?<span class="requests24h">12</span> in 24 h`).MatchString(dev.body) {
		t.Error("the Developers page does not show the key's 12 requests")
	}
	checkLogs(t, br, notFound)
	viewer := a.user(acct, "viewer@acme.example", domain.RoleAgent)
	vb := a.browser()
	vb.signIn(viewer.Email, testPassword, "/console/")
	if p := vb.get("/console/developers/logs"); p.status != 404 {
		t.Errorf("a Viewer opened Logs: %d", p.status)
	}
}

// checkLogs finds the 4xx notFound by its id on the Logs page, the five
// 4xx by their class, and a bad status filter marked.
func checkLogs(t *testing.T, br *browser, notFound string) {
	t.Helper()
	logs := br.get("/console/developers/logs?id=" + notFound)
	wantStatus(t, "logs page", logs, 200)
	if strings.Count(logs.body, `data-request-id=`) != 1 || !strings.Contains(logs.body, `data-request-id="`+notFound+`"`) ||
		!strings.Contains(logs.body, "usage key") {
		t.Errorf("Logs did not find %s by its id:\n%s", notFound, logs.body)
	}
	if all := br.get("/console/developers/logs?status=4xx"); strings.Count(all.body, `data-request-id=`) != 5 {
		t.Errorf("4xx filter: %d rows", strings.Count(all.body, `data-request-id=`))
	}
	if bad := br.get("/console/developers/logs?status=abc"); bad.status != 400 || !strings.Contains(bad.body, `<li class="field-error" id="status-error">`) {
		t.Errorf("a bad status filter: %d", bad.status)
	}
}

// checkKeyUsage wants the key page body to chart want's counts and list
// the 4xx notFound.
func checkKeyUsage(t *testing.T, body string, want map[string]int, notFound string) {
	t.Helper()
	g := chartTotals(t, body)
	if g["2xx"] != want["2xx"] || g["4xx"] != want["4xx"] || g["429"] != 0 || g["5xx"] != 0 {
		t.Errorf("chart totals %v, want %v", g, want)
	}
	for _, s := range []string{`<svg id="usage-24h"`, `<title id="usage-24h-title">`, `<desc id="usage-24h-desc">12 requests: 7 2xx, 5 4xx, 0 429, 0 5xx</desc>`, `data-request-id="` + notFound + `"`} {
		if !strings.Contains(body, s) {
			t.Errorf("key page lacks %s", s)
		}
	}
}
