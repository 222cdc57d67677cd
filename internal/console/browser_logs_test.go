package console_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
