package console_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// chartFacts is what chartsJS measures of each chart on a page.
type chartFacts struct {
	ID          string
	Fills       map[string]string // computed fill of each class's bars
	Legend      map[string]string // computed fill of each class's legend swatch
	PeakOverBar bool              // the peak's label crosses a bar
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
    const peak = svg.querySelector('.peak');
    return {ID: svg.id, Fills: fills, Legend: legend, Empty: !!svg.querySelector('.empty'),
      PeakOverBar: !!peak && bars.some(r => cross(r.getBoundingClientRect(), peak.getBoundingClientRect())),
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
// inside the window; or, when empty, the empty state.
func checkCharts(t *testing.T, b *tab, what string, n int, empty bool) {
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
		if c.Empty != empty || c.TextOverlap || c.PeakOverBar || c.MinText < 11 || c.Right > width {
			t.Errorf("%s: empty %v (want %v), labels crossing %v, peak over a bar %v, smallest label %.1f px, right edge %.0f", where, c.Empty, empty, c.TextOverlap, c.PeakOverBar, c.MinText, c.Right)
		}
		if len(c.Legend) != 4 {
			t.Errorf("%s: legend %v, want the four classes", where, c.Legend)
		}
		if empty {
			continue
		}
		seen := map[string]bool{}
		for _, cl := range []string{"2xx", "4xx", "429", "5xx"} {
			f := c.Fills[cl]
			if f == "" || f == "rgb(0, 0, 0)" || seen[f] || c.Legend[cl] != f {
				t.Errorf("%s: class %s drawn in %q, its legend in %q (fills %v)", where, cl, f, c.Legend[cl], c.Fills)
			}
			seen[f] = true
		}
	}
}

// TestBrowserCharts looks at the key page's and the overview's charts in
// Chromium at 1400 and 400 pixels, with requests of every class and with
// none, and saves screenshots of each.
func TestBrowserCharts(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k, idle := f.key(a, owner, "Helpdesk bot"), f.key(a, owner, "Idle")
	seedUsage(t, f, a.ID, k.Key.ID, 40, 60)
	_, lone := f.account("Empty")
	b := newTab(t, f.srv.URL, 1400, 150*time.Second)
	b.prefix = "charts"
	b.signIn(owner.Email, testPassword, "new-key")
	pages := []struct {
		name, path string
		empty      bool
	}{{"key", "/console/developers/keys/" + k.Key.ID, false}, {"key-empty", "/console/developers/keys/" + idle.Key.ID, true}, {"overview", "/console/overview", false}}
	for _, p := range pages {
		b.do(p.name, chromedp.Navigate(f.srv.URL+p.path), chromedp.WaitVisible(chromedp.ID("usage")))
		b.widths(p.name, func(width int64) { checkCharts(t, b, p.name, 2, p.empty) })
	}
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
	if n := b.count("#busiest-keys tr[data-key-id]"); n != 1 {
		t.Errorf("the overview lists %d busy keys, want 1", n)
	}
	b2 := newTab(t, f.srv.URL, 1400, 60*time.Second)
	b2.prefix = "charts"
	b2.signIn(lone.Email, testPassword, "new-key")
	b2.do("empty overview", chromedp.Navigate(f.srv.URL+"/console/overview"), chromedp.WaitVisible(chromedp.ID("usage")))
	b2.widths("overview-empty", func(int64) { checkCharts(t, b2, "empty overview", 2, true) })
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
