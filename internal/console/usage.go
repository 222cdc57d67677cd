package console

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// Usage (docs/console.md, Usage and request logs): a key's page and the
// account overview chart one range, chosen with links (24 hours, 7 days or
// 30 days), stacked by class, with p50 and p95 latency in a panel below.
// The server draws each chart as SVG with its colours as attributes, so it
// reads the same without JavaScript or the stylesheet: a title, a
// description with the totals, y-axis ticks at round numbers, a title per
// bar and per class, and one legend with the totals per class and the
// range's p50 and p95.

// classFills are the classes' colours, in requestlog.Classes order: from
// Okabe and Ito's palette, told apart with any colour vision.
var classFills = [4]string{"#0072B2", "#E69F00", "#CC79A7", "#D55E00"}

// period is what a chart spans: n buckets of width, the last holding now,
// labelled every tick buckets counted back from it.
type period struct {
	ID, Label, Title, Axis, layout string
	width                          time.Duration
	n, tick                        int
}

var periods = []period{
	{"24h", "24 h", "Last 24 hours", "Requests per hour (UTC)", "15:04", time.Hour, 24, 6},
	{"7d", "7 d", "Last 7 days", "Requests per 6 hours (UTC)", "Jan 2", 6 * time.Hour, 28, 8},
	{"30d", "30 d", "Last 30 days", "Requests per day (UTC)", "Jan 2", 24 * time.Hour, 30, 5},
}

// readPeriod is the range a page's ?range= chooses, the first by default.
func readPeriod(r *http.Request) (period, error) {
	v := r.URL.Query().Get("range")
	if v == "" {
		return periods[0], nil
	}
	for _, p := range periods {
		if p.ID == v {
			return p, nil
		}
	}
	return period{}, &pageError{Status: http.StatusBadRequest, Field: "range", Message: "Choose a range of 24h, 7d or 30d."}
}

// span is the period's [from, to) as of now: its last bucket holds now.
func (p period) span(now time.Time) (from, to time.Time) {
	to = now.UTC().Truncate(p.width).Add(p.width)
	return to.Add(-time.Duration(p.n) * p.width), to
}

// usageChart is one chart: its buckets, per-class totals, latency, and the
// links to the other ranges.
type usageChart struct {
	period
	Buckets []usageBucket
	Totals  classCounts
	Total   int64
	P50     string // of the whole range, "" without requests
	P95     string
	Ranges  []rangeLink
}

type usageBucket struct {
	Start  time.Time
	Counts classCounts
	Hist   []int64 // by latency bin; nil without requests
}

// rangeLink is a link of the range selector.
type rangeLink struct {
	Label, Href string
	Current     bool
}

// usageReader reads the counts of id (a key's, an account's) in [from,
// to), summed per bucket of width.
type usageReader func(ctx context.Context, id string, from, to time.Time, width time.Duration) ([]store.UsageBucket, error)

// latencyReader reads the latency histograms of id as usageReader does.
type latencyReader func(ctx context.Context, id string, from, to time.Time, width time.Duration) ([]store.LatencyBucket, error)

// usageChart reads id's counts and latency over p and builds its chart;
// page is the page's address, the range links' base.
func buildChart(ctx context.Context, now time.Time, p period, read usageReader, lat latencyReader, id, page string) (usageChart, error) {
	start, end := p.span(now)
	ch := usageChart{period: p, Buckets: make([]usageBucket, p.n)}
	for _, q := range periods {
		ch.Ranges = append(ch.Ranges, rangeLink{Label: q.Label, Href: page + "?range=" + q.ID + "#usage", Current: q.ID == p.ID})
	}
	for i := range ch.Buckets {
		ch.Buckets[i].Start = start.Add(time.Duration(i) * p.width)
	}
	rows, err := read(ctx, id, start, end, p.width)
	if err != nil {
		return ch, err
	}
	for _, r := range rows {
		i, ci := int(r.Start.Sub(start)/p.width), classIndex(r.Class)
		if r.Start.Before(start) || i >= p.n || ci < 0 {
			continue
		}
		ch.Buckets[i].Counts[ci] += r.Count
		ch.Totals[ci] += r.Count
		ch.Total += r.Count
	}
	hists, err := lat(ctx, id, start, end, p.width)
	if err != nil {
		return ch, err
	}
	all := make([]int64, requestlog.LatencyBins)
	for _, h := range hists {
		i := int(h.Start.Sub(start) / p.width)
		if h.Start.Before(start) || i >= p.n || h.Bin < 0 || h.Bin >= requestlog.LatencyBins {
			continue
		}
		if ch.Buckets[i].Hist == nil {
			ch.Buckets[i].Hist = make([]int64, requestlog.LatencyBins)
		}
		ch.Buckets[i].Hist[h.Bin] += h.Count
		all[h.Bin] += h.Count
	}
	if d, ok := requestlog.Percentile(all, 0.5); ok {
		ch.P50 = millis(d)
	}
	if d, ok := requestlog.Percentile(all, 0.95); ok {
		ch.P95 = millis(d)
	}
	return ch, nil
}

func classIndex(class string) int { return slices.Index(requestlog.Classes, class) }

// keyUsage is the key page's usage section.
type keyUsage struct {
	Chart  usageChart
	Recent []logRow
}

// recentLogs is how many of its latest requests a key's page shows.
const recentLogs = 10

// overviewPage is the account's usage over the chosen range: its chart,
// its busiest keys and its busiest AI agents.
type overviewPage struct {
	Chart  usageChart
	Keys   []*busyKey
	Agents []busyAgent
}

type busyKey struct {
	ID         string
	Label      store.KeyLabel
	Counts     [4]int64
	Total      int64
	ErrorShare string // of requests not 2xx
}

// busyAgent is an AI agent and its requests in the range; Name is "" for
// an agent since deleted.
type busyAgent struct {
	ID, Name string
	Count    int64
}

const (
	busiestKeys   = 10
	busiestAgents = 5
)

// Errors are the key's counts of 4xx, 429 and 5xx as the table shows them.
func (k busyKey) Errors() []string {
	return []string{thousands(k.Counts[1]), thousands(k.Counts[2]), thousands(k.Counts[3])}
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, acct, now := r.Context(), s.user.AccountID, c.Now()
	p, err := readPeriod(r)
	if err != nil {
		return err
	}
	var page overviewPage
	if page.Chart, err = buildChart(ctx, now, p, c.Store.AccountUsage, c.Store.AccountLatency, acct, "/console/overview"); err != nil {
		return err
	}
	from, to := p.span(now)
	counts, err := c.Store.AccountKeyUsage(ctx, acct, from, to)
	if err != nil {
		return err
	}
	if page.Keys, err = c.busiest(ctx, acct, counts); err != nil {
		return err
	}
	if page.Agents, err = c.busiestAgents(ctx, acct, from, to); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "overview", "Overview", page)
}

// agentUsage is an AI agent's chart of the range r chooses, for the roles
// that see usage (Owners, Admins), nil for the others. Latency is not
// counted per agent: the chart has none.
func (c *Console) agentUsage(r *http.Request, s *session, agentID string) (*usageChart, error) {
	if !s.user.Role.CanManageKeys() {
		return nil, nil
	}
	p, err := readPeriod(r)
	if err != nil {
		return nil, err
	}
	acct := s.user.AccountID
	read := func(ctx context.Context, id string, from, to time.Time, width time.Duration) ([]store.UsageBucket, error) {
		return c.Store.AgentUsage(ctx, acct, id, from, to, width)
	}
	none := func(context.Context, string, time.Time, time.Time, time.Duration) ([]store.LatencyBucket, error) {
		return nil, nil
	}
	ch, err := buildChart(r.Context(), c.Now(), p, read, none, agentID, "/console/agents/"+url.PathEscape(agentID))
	return &ch, err
}

// busiest sums counts per key and names the busiest keys.
func (c *Console) busiest(ctx context.Context, accountID string, counts []store.KeyClassCount) ([]*busyKey, error) {
	byKey := map[string]*busyKey{}
	for _, n := range counts {
		k := byKey[n.KeyID]
		if k == nil {
			k = &busyKey{ID: n.KeyID}
			byKey[n.KeyID] = k
		}
		if ci := classIndex(n.Class); ci >= 0 {
			k.Counts[ci] += n.Count
			k.Total += n.Count
		}
	}
	keys := slices.SortedFunc(maps.Values(byKey), func(a, b *busyKey) int { return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.ID, b.ID)) })
	keys = keys[:min(len(keys), busiestKeys)]
	labels, err := keyLabels(ctx, c.Store, accountID, keys, func(k *busyKey) string { return k.ID })
	for _, k := range keys {
		k.Label = labels[k.ID]
		k.ErrorShare = strconv.FormatFloat(100*float64(k.Total-k.Counts[0])/float64(max(k.Total, 1)), 'f', 1, 64) + " %"
	}
	return keys, err
}

// busiestAgents names the account's busiest AI agents in [from, to).
func (c *Console) busiestAgents(ctx context.Context, accountID string, from, to time.Time) ([]busyAgent, error) {
	top, err := c.Store.BusiestAgents(ctx, accountID, from, to, busiestAgents)
	if err != nil || len(top) == 0 {
		return nil, err
	}
	ids := make([]string, len(top))
	for i, a := range top {
		ids[i] = a.AgentID
	}
	names, err := c.Store.AgentNames(ctx, accountID, ids)
	out := make([]busyAgent, len(top))
	for i, a := range top {
		out[i] = busyAgent{ID: a.AgentID, Name: names[a.AgentID], Count: a.Count}
	}
	return out, err
}

// Chart geometry (templates/chart.html draws the rest): widths are
// percentages of the chart's, so that text keeps its size at any width;
// heights are pixels. The y-axis labels are left of the SVG's box (x < 0),
// in the margin the stylesheet gives it.
const (
	plotTop  = 20  // the top tick's line
	plotBase = 156 // the bars' base; the time labels are below
	// minSegment is the least height of a class with requests, so that 6
	// errors among 665 requests still show.
	minSegment = 4
	latTop     = 14 // the latency panel's top tick line
	latBase    = 96 // its base
)

// bar is a bucket as chart.html draws it: its slot (X and Slot, in % of the
// chart's width) and the bar within it (BarX, BarW), its time label every
// tick buckets, a title with its counts, and its classes bottom up.
type bar struct {
	Start               time.Time
	Title               string
	X, Slot, BarX, BarW float64
	Segments            []segment
}

// segment is a class's part of a bar (at least minSegment high) or of the
// legend.
type segment struct {
	Class, Fill string
	Count       int64
	Y, H        float64
}

// tick is a label on an axis: its text and where (X in %, Y in pixels);
// End anchors it at its end (the right edge's "now").
type tick struct {
	Text string
	X, Y float64
	End  bool
}

// Scale is the y axis: its top (a round number at or above the peak) and
// the step between its ticks, at most four.
func (ch usageChart) Scale() (top, step int64) { return niceScale(ch.Peak()) }

// niceScale is the least top of 1, 2 or 5 times a power of ten per step,
// at most four steps, that holds peak (at least 1).
func niceScale(peak int64) (top, step int64) {
	peak = max(peak, 1)
	for step = 1; ; step *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if s := step * m; 4*s >= peak {
				return (peak + s - 1) / s * s, s
			}
		}
	}
}

// YTicks are the y axis's labels, 0 to the top.
func (ch usageChart) YTicks() []tick {
	top, step := ch.Scale()
	var out []tick
	for v := int64(0); v <= top; v += step {
		out = append(out, tick{Text: thousands(v), Y: plotBase - float64(plotBase-plotTop)*float64(v)/float64(top)})
	}
	return out
}

// XTicks are the time labels: every tick buckets counted back from the
// last, which holds now and is labelled "now" at the right edge.
func (ch usageChart) XTicks() []tick {
	slot := 100 / float64(ch.n)
	var out []tick
	for i := ch.n - 1; i > 0; i -= ch.tick {
		t := tick{Text: ch.Buckets[i].Start.Format(ch.layout), X: (float64(i) + 0.5) * slot}
		if i == ch.n-1 {
			t = tick{Text: "now", X: 100, End: true}
		}
		out = append(out, t)
	}
	slices.Reverse(out)
	return out
}

// Bars are the chart's buckets as drawn.
func (ch usageChart) Bars() []bar {
	top, _ := ch.Scale()
	slot := 100 / float64(ch.n)
	out := make([]bar, len(ch.Buckets))
	for i, b := range ch.Buckets {
		x := float64(i) * slot
		out[i] = bar{Start: b.Start, Title: b.Start.Format(ch.layout) + ": " + b.Counts.String(), X: x, Slot: slot, BarX: x + slot*0.1, BarW: slot * 0.8}
		out[i].Segments = stack(b.Counts, float64(top))
	}
	return out
}

// stack is a bar's classes bottom up, each in proportion to top but at
// least minSegment high; what the small ones gain the largest gives up, so
// that the bar's height stays its total's.
func stack(counts classCounts, top float64) []segment {
	var segs []segment
	var gained float64
	largest := -1
	for ci, n := range counts {
		if n == 0 {
			continue
		}
		h := float64(plotBase-plotTop) * float64(n) / top
		if h < minSegment {
			gained += minSegment - h
			h = minSegment
		}
		segs = append(segs, segment{Class: requestlog.Classes[ci], Fill: classFills[ci], Count: n, H: h})
		if largest < 0 || n > segs[largest].Count {
			largest = len(segs) - 1
		}
	}
	if largest >= 0 && segs[largest].H-gained >= minSegment {
		segs[largest].H -= gained
	}
	y := float64(plotBase)
	for i := range segs {
		y -= segs[i].H
		segs[i].Y = y
	}
	return segs
}

// Legend is each class with its colour and total.
func (ch usageChart) Legend() []segment {
	out := make([]segment, len(requestlog.Classes))
	for i, cl := range requestlog.Classes {
		out[i] = segment{Class: cl, Fill: classFills[i], Count: ch.Totals[i]}
	}
	return out
}

// Peak is the largest bucket's count, at least 1.
func (ch usageChart) Peak() int64 {
	var peak int64 = 1
	for _, b := range ch.Buckets {
		peak = max(peak, b.Counts[0]+b.Counts[1]+b.Counts[2]+b.Counts[3])
	}
	return peak
}

// The latency panel's two lines, p50 and p95, by their colours (Okabe and
// Ito's bluish green, and near black, dashed).
const (
	p50Stroke = "#009E73"
	p95Stroke = "#2b3340"
)

// latencyPoint is a bucket's p50 or p95 where the panel draws it (X in %,
// Y in pixels), with its title.
type latencyPoint struct {
	X, Y  float64
	Title string
}

// latencySegment joins two neighbouring buckets' points.
type latencySegment struct{ X1, Y1, X2, Y2 float64 }

// latencyLine is p50's or p95's points and the segments between them;
// buckets without requests break it.
type latencyLine struct {
	Name, Stroke, Dash string
	Points             []latencyPoint
	Segments           []latencySegment
}

// latencyPanel is the panel as chart.html draws it.
type latencyPanel struct {
	Ticks []tick
	Lines []latencyLine
}

// Latency is the panel: its y axis in round milliseconds and its lines.
func (ch usageChart) Latency() latencyPanel {
	type pq struct {
		p50, p95 time.Duration
		ok       bool
	}
	qs := make([]pq, len(ch.Buckets))
	var peak int64 = 1
	for i, b := range ch.Buckets {
		p50, ok := requestlog.Percentile(b.Hist, 0.5)
		p95, _ := requestlog.Percentile(b.Hist, 0.95)
		qs[i] = pq{p50, p95, ok}
		peak = max(peak, p95.Microseconds())
	}
	top, step := niceScale(peak)
	var p latencyPanel
	for v := int64(0); v <= top; v += step {
		p.Ticks = append(p.Ticks, tick{Text: msText(v, step), Y: latBase - float64(latBase-latTop)*float64(v)/float64(top)})
	}
	slot := 100 / float64(ch.n)
	y := func(d time.Duration) float64 {
		return latBase - float64(latBase-latTop)*float64(d.Microseconds())/float64(top)
	}
	p50 := latencyLine{Name: "p50", Stroke: p50Stroke}
	p95 := latencyLine{Name: "p95", Stroke: p95Stroke, Dash: "4 3"}
	for i, q := range qs {
		if !q.ok {
			continue
		}
		x, label := (float64(i)+0.5)*slot, ch.Buckets[i].Start.Format(ch.layout)+": p50 "+millis(q.p50)+", p95 "+millis(q.p95)
		p50.add(x, y(q.p50), label, i > 0 && qs[i-1].ok)
		p95.add(x, y(q.p95), label, i > 0 && qs[i-1].ok)
	}
	p.Lines = []latencyLine{p95, p50}
	return p
}

// add appends a point, joined to the one before when joined.
func (l *latencyLine) add(x, y float64, title string, joined bool) {
	if joined {
		prev := l.Points[len(l.Points)-1]
		l.Segments = append(l.Segments, latencySegment{prev.X, prev.Y, x, y})
	}
	l.Points = append(l.Points, latencyPoint{X: x, Y: y, Title: title})
}

// msText is v microseconds in milliseconds, with as many decimals as a
// step of step microseconds needs.
func msText(v, step int64) string {
	decimals := 0
	for s := int64(1000); s > step && decimals < 3; s /= 10 {
		decimals++
	}
	return strconv.FormatFloat(float64(v)/1000, 'f', decimals, 64)
}

// millis is d as the legend and titles show it: "12 ms", "1.4 ms", "0.05 ms".
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	decimals := 0
	switch {
	case ms < 1:
		decimals = 2
	case ms < 10:
		decimals = 1
	}
	return strconv.FormatFloat(ms, 'f', decimals, 64) + " ms"
}

// classCounts are counts in requestlog.Classes order; as text, "7 2xx, 5
// 4xx, 0 429, 0 5xx".
type classCounts [4]int64

func (c classCounts) String() string {
	parts := make([]string, len(c))
	for i, n := range c {
		parts[i] = strconv.FormatInt(n, 10) + " " + requestlog.Classes[i]
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
