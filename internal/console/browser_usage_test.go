package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestBrowserUsageAndLogs drives issue 19's pages in headless Chromium: a
// key is used (answers 200, 404, 400, and 429 past its limit), then the
// Owner opens the key's page, finds its charts (SVG) and totals, and finds
// the 404 on the Logs page by the request id its response named;
// screenshots at 1280 and 390 pixels go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserUsageAndLogs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	k, err := f.keys.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{AccountID: a.ID, Name: "Helpdesk",
		Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimit: 6})
	if err != nil {
		t.Fatal(err)
	}
	f.secrets = append(f.secrets, k.Credential)
	ids := map[int]string{}
	for _, c := range []struct {
		path   string
		status int
	}{{"/v1/me", 200}, {"/v1/me", 200}, {"/v1/me", 200}, {"/v1/nothing-here", 404}, {"/v1/me?note=x", 400},
		{"/v1/me", 200}, {"/v1/me", 429}, {"/v1/me", 429}} {
		ids[c.status] = callAPI(t, f.srv.URL+c.path, k.Credential, c.status)
	}
	if err := f.usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	b := newTab(t, f.srv.URL, 1280, 120*time.Second)
	b.prefix = "usage"
	narrow := func(name string) {
		t.Helper()
		if w := b.eval("width", `String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("%s at 390 pixels: the page is %s pixels wide", name, w)
		}
	}
	b.signIn(owner.Email, testPassword, "new-key")
	b.do("key page", chromedp.Navigate(f.srv.URL+"/console/developers/keys/"+k.Key.ID), chromedp.WaitVisible(chromedp.ID("usage")))
	if n := b.count("#usage svg.usage-chart"); n != 1 {
		t.Fatalf("%d charts on the key page, want 1 (24 hours)", n)
	}
	if tot := b.eval("totals", `Array.from(document.querySelectorAll('#usage .usage-total')).map(e => e.textContent).join(' ')`); tot != "8" {
		t.Errorf("chart total %q, want 8", tot)
	}
	if drawn := b.eval("bars", `String(Array.from(document.querySelectorAll('#usage svg.usage-chart')).every(s => s.getBoundingClientRect().width > 100 && s.querySelectorAll('rect').length > 0))`); drawn != "true" {
		t.Error("a chart is not drawn (no bars, or no width)")
	}
	b.shots("01-key", narrow)

	b.do("logs page", chromedp.Navigate(f.srv.URL+"/console/developers/logs"), chromedp.WaitVisible(chromedp.ID("logs")))
	if n := b.count("#logs tr[data-request-id]"); n != 8 {
		t.Errorf("the Logs page lists %d requests, want 8", n)
	}
	b.shots("02-logs", narrow)
	b.do("search by request id", chromedp.SendKeys(chromedp.ID("filter-id"), ids[404]), chromedp.Click(chromedp.ID("filter-apply")),
		chromedp.WaitNotPresent(chromedp.CSS(`#logs tr[data-request-id="`+ids[200]+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#logs tr[data-request-id="`+ids[404]+`"]`)))
	if n := b.count("#logs tr[data-request-id]"); n != 1 {
		t.Errorf("the search by request id lists %d requests, want 1", n)
	}
	if row := b.eval("row", `document.querySelector('#logs tr[data-request-id]').innerText`); !containsAll(row, "Helpdesk", "/v1/nothing-here", "404", "not_found", k.Key.Prefix) {
		t.Errorf("the 404's row: %q", row)
	}
	b.shots("03-logs-request-id", narrow)
}

// callAPI GETs url with the credential, wants status, and returns the
// response's request id.
func callAPI(t *testing.T, url, cred string, status int) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, status)
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		t.Fatalf("GET %s: no X-Request-Id", url)
	}
	return id
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
