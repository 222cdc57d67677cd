package console_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/console"
)

// TestBrowserLogs looks at the Logs page in Chromium: in a 1280-pixel
// window its filters take one compact bar and its table fits, long paths
// and IPv6 clients included; statuses are coloured by class; a key's
// prefix, as the table shows it, finds its logs; a bad status shows the
// form with the field marked. Screenshots at 1400 and 400 pixels, with
// logs and with none.
func TestBrowserLogs(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	one := f.key(a, owner, "Helpdesk bot for the support team's night shift")
	two := f.key(a, owner, "Billing sync")
	seedUsage(t, f, a.ID, one.Key.ID, 1, 30)
	seedUsage(t, f, a.ID, two.Key.ID, 1, 20)
	b := newTab(t, f.srv.URL, 1280, 150*time.Second)
	b.prefix = "logs"
	b.signIn(owner.Email, testPassword, "new-key")
	b.do("logs page", chromedp.Navigate(f.srv.URL+"/console/developers/logs"), chromedp.WaitVisible(chromedp.ID("logs")))
	var m struct{ Table, Wrap, Page, Bar float64 }
	if err := json.Unmarshal([]byte(b.eval("measure", `JSON.stringify({Table: document.getElementById('logs').getBoundingClientRect().width,
		Wrap: document.querySelector('#logs').closest('.tablewrap').clientWidth, Page: document.documentElement.scrollWidth,
		Bar: document.getElementById('log-filters').getBoundingClientRect().height})`)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Table > m.Wrap || m.Page > 1280 {
		t.Errorf("at 1280 pixels the table is %.0f pixels wide in %.0f, the page %.0f", m.Table, m.Wrap, m.Page)
	}
	if m.Bar > 150 {
		t.Errorf("the filters take %.0f pixels of height", m.Bar)
	}
	colours := b.eval("colours", `JSON.stringify(['2xx', '4xx', '429', '5xx'].map(c => { const e = document.querySelector('#logs .st-' + c); return e ? getComputedStyle(e).backgroundColor : ''; }))`)
	var bg []string
	_ = json.Unmarshal([]byte(colours), &bg)
	seen := map[string]bool{}
	for i, c := range bg {
		if c == "" || c == "rgba(0, 0, 0, 0)" || seen[c] {
			t.Errorf("status class %d coloured %q (all: %v)", i, c, bg)
		}
		seen[c] = true
	}
	b.widths("all", func(int64) {})

	b.do("filter by prefix", chromedp.SendKeys(chromedp.ID("filter-key"), two.Key.Prefix), chromedp.Click(chromedp.ID("filter-apply")),
		chromedp.WaitVisible(chromedp.CSS(`#filter-key[value="`+two.Key.Prefix+`"]`)))
	if n, other := b.count("#logs tr[data-request-id]"), b.eval("rows", `String(Array.from(document.querySelectorAll('#logs tr[data-request-id] .l-key')).filter(td => !td.textContent.includes('Billing sync')).length)`); n != 20 || other != "0" {
		t.Errorf("the prefix %s lists %d logs (%s of another key), want Billing sync's 20", two.Key.Prefix, n, other)
	}
	b.do("bad status", chromedp.Navigate(f.srv.URL+"/console/developers/logs?status=abc"), chromedp.WaitVisible(chromedp.ID("status-error")))
	if inv := b.eval("invalid", `document.getElementById('filter-status').getAttribute('aria-invalid')`); inv != "true" {
		t.Errorf("the status field is not marked: aria-invalid %q", inv)
	}
	b.widths("bad-status", func(int64) {})
	b.do("no logs", chromedp.Navigate(f.srv.URL+"/console/developers/logs?status=502"), chromedp.WaitVisible(chromedp.ID("logs")))
	b.widths("none", func(int64) {})
}

// TestBrowserLogsDetailAndTail: a click on a row opens its request's
// detail; the live tail, switched on, puts a request written afterwards
// on top of the table, pauses while the tab is hidden (a request written
// then shows once it is visible again), and the page names what the
// stream is doing. Screenshots of the detail and of the tail at 1400 and
// 400 pixels (logs-detail-*, logs-tail-*).
func TestBrowserLogsDetailAndTail(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.LiveTail.Poll = 200 * time.Millisecond })
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 6)
	b := newTab(t, f.srv.URL, 1400, 150*time.Second)
	b.signIn(owner.Email, testPassword, "new-key")
	b.do("logs page", chromedp.Navigate(f.srv.URL+"/console/developers/logs"), chromedp.WaitVisible(chromedp.ID("logs")))
	first := b.eval("first row", `document.querySelector('#logs tr[data-request-id]').getAttribute('data-request-id')`)
	b.do("open a row", chromedp.Click(chromedp.CSS(`#logs tr[data-request-id] .l-ms`)), chromedp.WaitVisible(chromedp.ID("log-detail")))
	if got := b.text("request id", "request-id"); got != first {
		t.Errorf("the detail of %q opened, want %q", got, first)
	}
	if url := b.eval("url", "location.pathname"); url != "/console/developers/logs/"+first {
		t.Errorf("the detail's address is %s", url)
	}
	b.look("logs-detail")

	b.do("logs again", chromedp.Navigate(f.srv.URL+"/console/developers/logs"), chromedp.WaitVisible(chromedp.ID("tail-toggle")),
		chromedp.Click(chromedp.ID("tail-toggle")), chromedp.WaitVisible(chromedp.CSS(`#tail-status.live`)))
	l := writeLog(t, f, a.ID, k.Key.ID, f.clock.Now(), "DELETE", "DELETE /v1/webhook-endpoints/{endpoint_id}", "/v1/webhook-endpoints/we_<b>bold</b>", 404, "not_found")
	b.do("the new row", chromedp.WaitVisible(chromedp.CSS(`#logs tbody tr:first-child[data-request-id="`+l.ID+`"]`)))
	if n := b.text("new rows", "tail-new"); n != "+1 new" {
		t.Errorf("after one new row the count says %q", n)
	}
	if bold := b.count("#logs b"); bold != 0 {
		t.Errorf("a path's markup became %d elements", bold)
	}
	b.eval("hide", `Object.defineProperty(document, 'hidden', {value: true, configurable: true}); document.dispatchEvent(new Event('visibilitychange')); ''`)
	if s := b.text("status", "tail-status"); s != "Paused while this tab is hidden" {
		t.Errorf("hidden: %q", s)
	}
	hidden := writeLog(t, f, a.ID, k.Key.ID, f.clock.Now().Add(time.Millisecond), "GET", "GET /v1/me", "/v1/me", 200, "")
	time.Sleep(time.Second)
	if n := b.count(`#logs tr[data-request-id="` + hidden.ID + `"]`); n != 0 {
		t.Error("a hidden tab's tail still adds rows")
	}
	b.eval("show", `Object.defineProperty(document, 'hidden', {value: false, configurable: true}); document.dispatchEvent(new Event('visibilitychange')); ''`)
	b.do("the row written while hidden", chromedp.WaitVisible(chromedp.CSS(`#logs tbody tr:first-child[data-request-id="`+hidden.ID+`"]`)))
	b.look("logs-tail")
	b.do("open the new row", chromedp.Click(chromedp.CSS(`#logs tr[data-request-id="`+l.ID+`"] .l-status`)), chromedp.WaitVisible(chromedp.ID("log-detail")))
	if got := b.text("code", "log-code"); got != "not_found" {
		t.Errorf("the new row's detail shows code %q", got)
	}
}

// look saves the page at 1400 and 400 pixels as name-<width>.png, and at
// 400 fails the test for what sticks out sideways or a hint cut off.
func (b *tab) look(name string) {
	b.t.Helper()
	for _, width := range []int64{1400, 400} {
		b.do("viewport", chromedp.EmulateViewport(width, 900))
		if width == 400 {
			for _, js := range []string{overflowJS, placeholdersJS} {
				if got := b.eval(name+" at 400", js); got != "ok" {
					b.t.Errorf("%s at 400 pixels: %s", name, got)
				}
			}
		}
		b.shot(fmt.Sprintf("%s-%d", name, width))
	}
	b.do("viewport", chromedp.EmulateViewport(1400, 900))
}
