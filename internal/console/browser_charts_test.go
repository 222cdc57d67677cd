package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
)

// chartFacts is what chartsJS measures of each chart on a page.
type chartFacts struct {
	ID          string
	Fills       map[string]string // computed fill of each class's bars
	Legend      map[string]string // computed fill of each class's legend swatch
	TickOverBar bool              // a y-axis label crosses a bar
	MinSegment  float64           // the lowest class's height on screen
	Latency     int               // the latency panel's points
	TextOverlap bool              // two of the chart's labels cross
	MinText     float64           // the smallest label's height on screen
	Right       float64           // the chart's right edge
	Empty       bool
}

const chartsJS = `(() => {
  const cross = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  return JSON.stringify(Array.from(document.querySelectorAll('svg.usage-chart')).map(svg => {
    const fills = {}, legend = {};
    const bars = Array.from(svg.querySelectorAll('rect[data-class]'));
    bars.forEach(r => fills[r.dataset.class] = getComputedStyle(r).fill);
    svg.closest('figure').querySelectorAll('.legend li[data-class]').forEach(li => {
      const r = li.querySelector('rect'); legend[li.dataset.class] = r ? getComputedStyle(r).fill : ''; });
    const texts = Array.from(svg.querySelectorAll('text')).map(t => t.getBoundingClientRect());
    const yticks = Array.from(svg.querySelectorAll('.ytick')).map(t => t.getBoundingClientRect());
    const lat = svg.closest('figure').querySelector('svg.latency-chart');
    return {ID: svg.id, Fills: fills, Legend: legend, Empty: !!svg.querySelector('.empty'),
      TickOverBar: bars.some(r => yticks.some(t => cross(r.getBoundingClientRect(), t))),
      MinSegment: Math.min(...bars.map(r => r.getBoundingClientRect().height)),
      Latency: lat ? lat.querySelectorAll('circle').length : 0,
      TextOverlap: texts.some((a, i) => texts.slice(i + 1).some(b => cross(a, b))),
      MinText: Math.min(...texts.map(t => t.height)), Right: svg.getBoundingClientRect().right};
  }));
})()`

// chartsHTML is the charts' markup and every bar's box on screen.
const chartsHTML = `Array.from(document.querySelectorAll('figure.usage')).map(f => f.outerHTML +
  Array.from(f.querySelectorAll('rect')).map(r => JSON.stringify(r.getBoundingClientRect())).join()).join()`

// checkCharts wants n charts on the page, each drawn in four distinct
// fills (none black: a bar with no fill of its own is) that its legend
// repeats, with readable labels that cross neither each other nor a bar,
// every class at least 3.5 pixels high, a latency panel with points,
// inside the window; or, when empty, the empty state.
func checkCharts(t *testing.T, b *tab, what string, n int, empty bool) {
	checkClasses(t, b, what, n, empty, requestlog.Classes)
}

// checkClasses is checkCharts for a page that draws only classes.
func checkClasses(t *testing.T, b *tab, what string, n int, empty bool, classes []string) {
	t.Helper()
	var charts []chartFacts
	if err := json.Unmarshal([]byte(b.eval("charts", chartsJS)), &charts); err != nil {
		t.Fatal(err)
	}
	width, _ := strconv.ParseFloat(b.eval("width", `String(window.innerWidth)`), 64)
	if len(charts) != n {
		t.Fatalf("%s: %d charts, want %d", what, len(charts), n)
	}
	for _, c := range charts {
		where := fmt.Sprintf("%s at %.0f pixels, %s", what, width, c.ID)
		if c.Empty != empty || c.TextOverlap || c.TickOverBar || c.MinText < 11 || c.Right > width {
			t.Errorf("%s: empty %v (want %v), labels crossing %v, a y label over a bar %v, smallest label %.1f px, right edge %.0f", where, c.Empty, empty, c.TextOverlap, c.TickOverBar, c.MinText, c.Right)
		}
		if !empty && (c.MinSegment < 3.5 || c.Latency == 0) {
			t.Errorf("%s: the lowest class %.1f pixels high (want 3.5 or more), %d latency points", where, c.MinSegment, c.Latency)
		}
		if len(c.Legend) != 4 {
			t.Errorf("%s: legend %v, want the four classes", where, c.Legend)
		}
		if !empty {
			checkFills(t, where, c, classes)
		}
	}
}

// checkFills wants c to draw classes, each in a fill of its own (not
// black) that its legend repeats.
func checkFills(t *testing.T, where string, c chartFacts, classes []string) {
	t.Helper()
	if len(c.Fills) != len(classes) {
		t.Errorf("%s: classes drawn %v, want %v", where, c.Fills, classes)
	}
	seen := map[string]bool{}
	for _, cl := range classes {
		f := c.Fills[cl]
		if f == "" || f == "rgb(0, 0, 0)" || seen[f] || c.Legend[cl] != f {
			t.Errorf("%s: class %s drawn in %q, its legend in %q (fills %v)", where, cl, f, c.Legend[cl], c.Fills)
		}
		seen[f] = true
	}
}

// TestBrowserCharts looks at the key page's and the overview's charts in
// Chromium at 1400 and 400 pixels, with requests of every class and with
// none, and saves screenshots of each.
func TestBrowserCharts(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k, idle, few := f.key(a, owner, "Helpdesk bot"), f.key(a, owner, "Idle"), f.key(a, owner, "Few errors")
	seedUsage(t, f, a.ID, k.Key.ID, 40, 60)
	seedLatency(t, f, a.ID, k.Key.ID)
	seedFewErrors(t, f, a.ID, few.Key.ID)
	busiestAgent := seedAgents(t, f, a, k.Key.ID, "Helpdesk", "Billing assistant", "Triage")
	_, lone := f.account("Empty")
	b := newTab(t, f.srv.URL, 1400, 150*time.Second)
	b.prefix = "charts"
	b.signIn(owner.Email, testPassword, "new-key")
	pages := []struct {
		name, path string
		empty      bool
		classes    []string
	}{{"key", "/console/developers/keys/" + k.Key.ID, false, requestlog.Classes}, {"key-7d", "/console/developers/keys/" + k.Key.ID + "?range=7d", false, requestlog.Classes},
		{"key-few-errors", "/console/developers/keys/" + few.Key.ID, false, []string{"2xx", "4xx"}}, {"key-empty", "/console/developers/keys/" + idle.Key.ID, true, nil},
		{"overview", "/console/overview", false, requestlog.Classes}, {"overview-30d", "/console/overview?range=30d", false, requestlog.Classes}}
	for _, p := range pages {
		b.do(p.name, chromedp.Navigate(f.srv.URL+p.path), chromedp.WaitVisible(chromedp.ID("usage")))
		b.widths(p.name, func(width int64) { checkClasses(t, b, p.name, 1, p.empty, p.classes) })
	}
	// An agent's page: its chart, without latency (counted per key).
	b.do("agent", chromedp.Navigate(f.srv.URL+"/console/agents/"+busiestAgent), chromedp.WaitVisible(chromedp.ID("usage-24h")))
	b.widths("agent", func(int64) {
		if total := b.eval("agent total", `document.querySelector('#usage .usage-total').textContent`); total != "30" {
			t.Errorf("the agent's chart: %q requests, want 30", total)
		}
	})
	// The range links work without JavaScript (they are links): 7 d, then
	// 30 d, from the overview.
	b.do("overview 7d", chromedp.Navigate(f.srv.URL+"/console/overview"), chromedp.Click(chromedp.CSS(`.ranges a[href*="range=7d"]`)), chromedp.WaitVisible(chromedp.ID("usage-7d")))
	b.do("overview 30d", chromedp.Click(chromedp.CSS(`.ranges a[href*="range=30d"]`)), chromedp.WaitVisible(chromedp.ID("usage-30d")))
	b.do("overview", chromedp.Navigate(f.srv.URL+"/console/overview"), chromedp.WaitVisible(chromedp.ID("usage")))
	withJS := b.eval("charts", chartsHTML)
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	b.do("overview without JavaScript", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("usage")))
	if without := b.eval("charts", chartsHTML); without != withJS {
		t.Errorf("the charts differ without JavaScript:\n%s\nwith:\n%s", without, withJS)
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatal(err)
	}
	b.do("nav to overview", chromedp.Navigate(f.srv.URL+"/console/developers"), chromedp.Click(chromedp.ID("nav-overview")), chromedp.WaitVisible(chromedp.ID("busiest-keys")))
	if n := b.count("#busiest-keys tr[data-key-id]"); n != 2 {
		t.Errorf("the overview lists %d busy keys, want 2", n)
	}
	if n := b.count("#busiest-agents tr[data-agent-id] a"); n != 3 {
		t.Errorf("the overview lists %d busy agents with links, want 3", n)
	}
	b2 := newTab(t, f.srv.URL, 1400, 60*time.Second)
	b2.prefix = "charts"
	b2.signIn(lone.Email, testPassword, "new-key")
	b2.do("empty overview", chromedp.Navigate(f.srv.URL+"/console/overview"), chromedp.WaitVisible(chromedp.ID("usage")))
	b2.widths("overview-empty", func(int64) { checkCharts(t, b2, "empty overview", 1, true) })
}

// seedLatency records, through the usage recorder, requests of keyID
// every hour of the last 30 days, taking 2 to 400 ms.
func seedLatency(t *testing.T, f *fixture, accountID, keyID string) {
	t.Helper()
	now := f.clock.Now()
	for h := range 30 * 24 {
		at := now.Add(-time.Duration(h) * time.Hour)
		for i := range 10 {
			d := time.Duration(2+(h%24)*i*i/8) * time.Millisecond
			f.usage.Record(requestlog.Log{ID: domain.NewRequestID(at), AccountID: accountID, KeyID: keyID, At: at, Method: "GET",
				Route: "GET /v1/me", Path: "/v1/me", Status: 200, Duration: d, Client: "192.0.2.1"})
		}
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// seedAgents makes an AI agent of each name and records requests to them
// with keyID, this hour: 30 to the first, 20 to the next, and so on. It
// returns the first's id.
func seedAgents(t *testing.T, f *fixture, a domain.Account, keyID string, names ...string) (first string) {
	t.Helper()
	now := f.clock.Now()
	for i, name := range names {
		ag := f.agent(a, name)
		if i == 0 {
			first = ag.ID
		}
		for range 10 * (len(names) - i) {
			f.usage.Record(requestlog.Log{ID: domain.NewRequestID(now), AccountID: a.ID, KeyID: keyID, At: now, Method: "GET",
				Route: "GET /v1/ai-agents/{agent_id}", Path: "/v1/ai-agents/" + ag.ID, Status: 200, Duration: 4 * time.Millisecond, Client: "192.0.2.1"})
		}
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return first
}

// seedFewErrors gives keyID 659 2xx and 6 4xx this hour, each taking 3 ms:
// the 6 must show.
func seedFewErrors(t *testing.T, f *fixture, accountID, keyID string) {
	t.Helper()
	now := f.clock.Now()
	for i := range 665 {
		st := 200
		if i < 6 {
			st = 404
		}
		f.usage.Record(requestlog.Log{ID: domain.NewRequestID(now), AccountID: accountID, KeyID: keyID, At: now, Method: "GET",
			Route: "GET /v1/me", Path: "/v1/me", Status: st, Duration: 3 * time.Millisecond, Client: "192.0.2.1"})
	}
	if err := f.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// widths saves the page at 1400 and 400 pixels as
// <prefix>-<name>-<width>.png after check, and wants the page no wider
// than the window; then it returns to 1400.
func (b *tab) widths(name string, check func(width int64)) {
	b.t.Helper()
	for _, width := range []int64{1400, 400} {
		b.do("viewport", chromedp.EmulateViewport(width, 900))
		check(width)
		if w := b.eval("width", `String(document.documentElement.scrollWidth)`); w != fmt.Sprint(width) {
			b.t.Errorf("%s at %d pixels: the page is %s pixels wide: %s", name, width, w, b.eval("wide", `Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`))
		}
		b.shot(fmt.Sprintf("%s-%s-%d", b.prefix, name, width))
	}
	b.do("viewport", chromedp.EmulateViewport(1400, 900))
}
