package console

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// Usage (docs/console.md, Usage and request logs): a key's page and the
// account overview chart the last 24 hours and 30 days, stacked by class.
// The server draws each chart as SVG with its colours as attributes, so it
// reads the same without JavaScript or the stylesheet: a title, a
// description with the totals, a title per bar, and a legend with the
// totals per class beside it.

// classFills are the classes' colours, in requestlog.Classes order: from
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
	Totals  classCounts
	Total   int64
}

type usageBucket struct {
	Start  time.Time
	Counts classCounts
}

// usageReader reads the counts of id (a key's, an account's) in [from,
// to), summed per bucket of width.
type usageReader func(ctx context.Context, id string, from, to time.Time, width time.Duration) ([]store.UsageBucket, error)

// usageCharts reads id's counts and builds the chart of each period.
func usageCharts(ctx context.Context, now time.Time, read usageReader, id string) ([]usageChart, error) {
	var out []usageChart
	for _, p := range periods {
		end := now.UTC().Truncate(p.width).Add(p.width)
		start := end.Add(-time.Duration(p.n) * p.width)
		rows, err := read(ctx, id, start, end, p.width)
		if err != nil {
			return nil, err
		}
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
		out = append(out, ch)
	}
	return out, nil
}

func classIndex(class string) int { return slices.Index(requestlog.Classes, class) }

// keyUsage is the key page's usage section.
type keyUsage struct {
	Charts []usageChart
	Recent []logRow
}

// recentLogs is how many of its latest requests a key's page shows.
const recentLogs = 10

// overviewPage is the account's usage: its charts and its busiest keys in
// the last 24 hours.
type overviewPage struct {
	Charts []usageChart
	Keys   []*busyKey
}

type busyKey struct {
	ID         string
	Label      store.KeyLabel
	Counts     [4]int64
	Total      int64
	ErrorShare string // of requests not 2xx
}

const busiestKeys = 10

// Errors are the key's counts of 4xx, 429 and 5xx as the table shows them.
func (k busyKey) Errors() []string {
	return []string{thousands(k.Counts[1]), thousands(k.Counts[2]), thousands(k.Counts[3])}
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, acct, now := r.Context(), s.user.AccountID, c.Now()
	var p overviewPage
	var err error
	if p.Charts, err = usageCharts(ctx, now, c.Store.AccountUsage, acct); err != nil {
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

// Chart geometry (templates/chart.html draws the rest): widths are
// percentages of the chart's, so that text keeps its size at any width;
// heights are pixels.
const (
	plotTop  = 26  // the peak's line; its label is above
	plotBase = 156 // the bars' base; the time labels are below
)

// bar is a bucket as chart.html draws it: its slot (X and Slot, in % of the
// chart's width) and the bar within it (BarX, BarW), its time label every
// tick buckets, a title with its counts, and its classes bottom up.
type bar struct {
	Start               time.Time
	Tick, Title         string
	X, Slot, BarX, BarW float64
	Segments            []segment
}

// segment is a class's part of a bar (at least a pixel high) or of the
// legend.
type segment struct {
	Class, Fill string
	Count       int64
	Y, H        float64
}

// Bars are the chart's buckets as drawn.
func (ch usageChart) Bars() []bar {
	peak, slot := float64(ch.Peak()), 100/float64(ch.n)
	out := make([]bar, len(ch.Buckets))
	for i, b := range ch.Buckets {
		x, label := float64(i)*slot, b.Start.Format(ch.layout)
		out[i] = bar{Start: b.Start, Title: label + ": " + b.Counts.String(), X: x, Slot: slot, BarX: x + slot*0.1, BarW: slot * 0.8}
		if i%ch.tick == 0 {
			out[i].Tick = label
		}
		y := float64(plotBase)
		for ci, n := range b.Counts {
			if n == 0 {
				continue
			}
			h := max(1, float64(plotBase-plotTop)*float64(n)/peak)
			y -= h
			out[i].Segments = append(out[i].Segments, segment{Class: requestlog.Classes[ci], Fill: classFills[ci], Count: n, Y: y, H: h})
		}
	}
	return out
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
