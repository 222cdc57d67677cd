package console

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// Usage (docs/console.md, Usage and request logs): a key's page and the
// account overview chart the last 24 hours and 30 days, stacked by class.
// The server draws each chart as SVG with its colours as attributes, so it
// reads the same without JavaScript or the stylesheet: a title, a
// description with the totals, a title per bar, and a legend with the
// totals per class beside it.

// classFills are the classes' colours, in store.UsageClasses order: from
// Okabe and Ito's palette, told apart with any colour vision.
var classFills = [4]string{"#0072B2", "#E69F00", "#CC79A7", "#D55E00"}

// period is what a chart spans: n buckets of width, the last holding now.
type period struct {
	ID, Title, Axis, layout string
	width                   time.Duration
	n, tick                 int // a label every tick buckets
}

var periods = []period{
	{"24h", "Last 24 hours", "Requests per hour (UTC)", "15:04", time.Hour, 24, 6},
	{"30d", "Last 30 days", "Requests per day (UTC)", "Jan 2", 24 * time.Hour, 30, 5},
}

// usageChart is one chart: its buckets and per-class totals.
type usageChart struct {
	period
	Buckets []usageBucket
	Totals  [4]int64 // in store.UsageClasses order
	Total   int64
}

type usageBucket struct {
	Start  time.Time
	Counts [4]int64
}

// usageReader reads counts in [from, to), summed per bucket of width.
type usageReader func(ctx context.Context, from, to time.Time, width time.Duration) ([]store.UsageBucket, error)

// usageCharts reads and builds the chart of each period.
func usageCharts(ctx context.Context, now time.Time, read usageReader) ([]usageChart, error) {
	var out []usageChart
	for _, p := range periods {
		end := now.UTC().Truncate(p.width).Add(p.width)
		start := end.Add(-time.Duration(p.n) * p.width)
		rows, err := read(ctx, start, end, p.width)
		if err != nil {
			return nil, err
		}
		out = append(out, newChart(p, start, rows))
	}
	return out, nil
}

func newChart(p period, start time.Time, rows []store.UsageBucket) usageChart {
	ch := usageChart{period: p, Buckets: make([]usageBucket, p.n)}
	for i := range ch.Buckets {
		ch.Buckets[i].Start = start.Add(time.Duration(i) * p.width)
	}
	for _, r := range rows {
		i, ci := int(r.Start.Sub(start)/p.width), classIndex(r.Class)
		if i < 0 || i >= p.n || ci < 0 {
			continue
		}
		ch.Buckets[i].Counts[ci] += r.Count
		ch.Totals[ci] += r.Count
		ch.Total += r.Count
	}
	return ch
}

func classIndex(class string) int { return slices.Index(store.UsageClasses, class) }

// keyUsage is the key page's usage section.
type keyUsage struct {
	Charts []usageChart
	Recent []logRow
}

const recentLogs = 10

func (c *Console) keyUsage(ctx context.Context, accountID, keyID string, now time.Time) (keyUsage, error) {
	var u keyUsage
	var err error
	u.Charts, err = usageCharts(ctx, now, func(ctx context.Context, from, to time.Time, w time.Duration) ([]store.UsageBucket, error) {
		return c.Store.KeyUsage(ctx, keyID, from, to, w)
	})
	if err != nil {
		return u, err
	}
	logs, _, err := c.Store.RequestLogPage(ctx, store.RequestLogQuery{AccountID: accountID, KeyID: keyID, Limit: recentLogs})
	u.Recent = logRows(logs, nil)
	return u, err
}

// overviewPage is the account's usage: its charts and its busiest keys in
// the last 24 hours.
type overviewPage struct {
	Charts []usageChart
	Keys   []busyKey
}

type busyKey struct {
	ID         string
	Label      store.KeyLabel
	Counts     [4]int64
	Total      int64
	ErrorShare string // of requests not 2xx
}

const busiestKeys = 10

// Requests and Errors are the key's counts as the table shows them: all,
// then 4xx, 429 and 5xx.
func (k busyKey) Requests() string { return thousands(k.Total) }
func (k busyKey) Errors() []string {
	return []string{thousands(k.Counts[1]), thousands(k.Counts[2]), thousands(k.Counts[3])}
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, acct, now := r.Context(), s.user.AccountID, c.Now()
	var p overviewPage
	var err error
	p.Charts, err = usageCharts(ctx, now, func(ctx context.Context, from, to time.Time, w time.Duration) ([]store.UsageBucket, error) {
		return c.Store.AccountUsage(ctx, acct, from, to, w)
	})
	if err != nil {
		return err
	}
	counts, err := c.Store.AccountKeyUsage(ctx, acct, now.Add(-24*time.Hour).Truncate(time.Minute), now.Add(time.Minute))
	if err != nil {
		return err
	}
	if p.Keys, err = c.busiest(ctx, acct, counts); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "overview", "Overview", p)
}

// busiest sums counts per key and names the busiest keys.
func (c *Console) busiest(ctx context.Context, accountID string, counts []store.KeyClassCount) ([]busyKey, error) {
	byKey := map[string]*busyKey{}
	var keys []*busyKey
	for _, n := range counts {
		k := byKey[n.KeyID]
		if k == nil {
			k = &busyKey{ID: n.KeyID}
			byKey[n.KeyID] = k
			keys = append(keys, k)
		}
		if ci := classIndex(n.Class); ci >= 0 {
			k.Counts[ci] += n.Count
			k.Total += n.Count
		}
	}
	slices.SortFunc(keys, func(a, b *busyKey) int { return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.ID, b.ID)) })
	keys = keys[:min(len(keys), busiestKeys)]
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	labels, err := c.Store.KeyLabels(ctx, accountID, ids)
	out := make([]busyKey, len(keys))
	for i, k := range keys {
		k.Label = labels[k.ID]
		k.ErrorShare = strconv.FormatFloat(100*float64(k.Total-k.Counts[0])/float64(max(k.Total, 1)), 'f', 1, 64) + " %"
		out[i] = *k
	}
	return out, err
}

// Chart geometry: widths are percentages of the chart's, so that text
// keeps its size at any width; heights are pixels.
const (
	chartH    = 184
	plotTop   = 26  // the peak's line; its label is above
	plotBase  = 156 // the bars' base; the time labels are below
	labelSize = 12
)

// Figure is the chart with its caption: the period, the total, and a
// legend of the classes with their totals. Its text is fixed, digits or
// times, escaped all the same.
func (ch usageChart) Figure() template.HTML {
	var sb strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&sb, `<figure class="usage"><figcaption><span class="usage-title">%s</span> <strong class="usage-total">%s</strong> requests<ul class="legend">`,
		e(ch.Title), thousands(ch.Total))
	for i, cl := range store.UsageClasses {
		fmt.Fprintf(&sb, `<li data-class="%s"><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" rx="2" fill="%s"></rect></svg> %s <span class="n">%s</span></li>`,
			cl, classFills[i], cl, thousands(ch.Totals[i]))
	}
	id := "usage-" + ch.ID
	fmt.Fprintf(&sb, `</ul></figcaption><svg id="%s" class="usage-chart" role="img" width="100%%" height="%d" aria-labelledby="%s-title %s-desc" data-total="%d">`,
		id, chartH, id, id, ch.Total)
	fmt.Fprintf(&sb, `<title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`, id, e(ch.Title), id, e(ch.totalsText()))
	fmt.Fprintf(&sb, `<g font-size="%d" fill="#5d6878"><text x="0" y="14" class="axis-title">%s</text>`, labelSize, e(ch.Axis))
	ch.axes(&sb)
	sb.WriteString(`</g>`)
	ch.bars(&sb)
	sb.WriteString(`</svg></figure>`)
	return template.HTML(sb.String())
}

// axes writes the peak's label and line, the base line, the time labels
// under the bars they start, and the empty state.
func (ch usageChart) axes(sb *strings.Builder) {
	if peak := ch.peak(); ch.Total > 0 {
		fmt.Fprintf(sb, `<text x="100%%" y="14" text-anchor="end" class="peak">peak %s</text>`, thousands(peak))
		fmt.Fprintf(sb, `<line x1="0" x2="100%%" y1="%d" y2="%d" stroke="#c9ced6" stroke-dasharray="3 3"></line>`, plotTop, plotTop)
	} else {
		fmt.Fprintf(sb, `<text x="50%%" y="%d" text-anchor="middle" font-size="14" class="empty">No requests in the %s</text>`,
			(plotTop+plotBase)/2, strings.ToLower(ch.Title))
	}
	fmt.Fprintf(sb, `<line x1="0" x2="100%%" y1="%d" y2="%d" stroke="#8a94a3"></line>`, plotBase, plotBase)
	slot := 100 / float64(ch.n)
	for i := 0; i < ch.n; i += ch.tick {
		fmt.Fprintf(sb, `<text x="%.2f%%" y="%d" class="tick">%s</text>`, float64(i)*slot, plotBase+labelSize+6, ch.Buckets[i].Start.Format(ch.layout))
	}
}

// bars writes a stacked bar per bucket, the classes bottom up, each at
// least a pixel high, under a title with its counts; a transparent rect of
// the bucket's full height carries that title too.
func (ch usageChart) bars(sb *strings.Builder) {
	peak := float64(ch.peak())
	slot := 100 / float64(ch.n)
	for i, b := range ch.Buckets {
		x := float64(i) * slot
		fmt.Fprintf(sb, `<g class="bucket" data-start="%s"><title>%s: %s</title><rect class="hit" x="%.2f%%" y="%d" width="%.2f%%" height="%d" fill="transparent"></rect>`,
			b.Start.Format(time.RFC3339), b.Start.Format(ch.layout), countsText(b.Counts), x, plotTop, slot, plotBase-plotTop)
		y := float64(plotBase)
		for ci, n := range b.Counts {
			if n == 0 {
				continue
			}
			h := max(1, float64(plotBase-plotTop)*float64(n)/peak)
			y -= h
			fmt.Fprintf(sb, `<rect data-class="%s" data-count="%d" fill="%s" x="%.2f%%" y="%.1f" width="%.2f%%" height="%.1f"></rect>`,
				store.UsageClasses[ci], n, classFills[ci], x+slot*0.1, y, slot*0.8, h)
		}
		sb.WriteString(`</g>`)
	}
}

// peak is the largest bucket's count, at least 1.
func (ch usageChart) peak() int64 {
	var peak int64 = 1
	for _, b := range ch.Buckets {
		peak = max(peak, b.Counts[0]+b.Counts[1]+b.Counts[2]+b.Counts[3])
	}
	return peak
}

func (ch usageChart) totalsText() string {
	return strconv.FormatInt(ch.Total, 10) + " requests: " + countsText(ch.Totals)
}

func countsText(c [4]int64) string {
	parts := make([]string, len(c))
	for i, n := range c {
		parts[i] = strconv.FormatInt(n, 10) + " " + store.UsageClasses[i]
	}
	return strings.Join(parts, ", ")
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
