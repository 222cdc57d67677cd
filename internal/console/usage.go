package console

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// A key's usage (docs/console.md, Usage and request logs): two charts,
// stacked by class, drawn here as SVG so that they read without JavaScript
// (a title, a description with the totals, and a title per bar), with the
// totals in text beside them; and the key's latest requests.

// keyUsage is the key page's usage section.
type keyUsage struct {
	Day, Month usageChart
	Recent     []logRow
}

// usageChart is one chart: its buckets and per-class totals.
type usageChart struct {
	ID      string // the element id of the SVG
	Title   string
	Buckets []usageBucket
	Totals  []classCount
	Total   int64
	SVG     template.HTML
}

type usageBucket struct {
	Start  time.Time
	Label  string
	Counts [4]int64 // in requestlog.Classes order
}

type classCount struct {
	Class string
	Count int64
}

// Charts: the last 24 hours per hour, the last 30 days per UTC day.
const (
	dayBuckets   = 24
	monthBuckets = 30
	recentLogs   = 10
)

func (c *Console) keyUsage(ctx context.Context, accountID, keyID string, now time.Time) (keyUsage, error) {
	var u keyUsage
	hourEnd := now.UTC().Truncate(time.Hour).Add(time.Hour)
	dayEnd := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	var err error
	if u.Day, err = c.usageChart(ctx, keyID, "usage-24h", "Requests in the last 24 hours, per hour", hourEnd, time.Hour, dayBuckets, "15:04"); err != nil {
		return u, err
	}
	if u.Month, err = c.usageChart(ctx, keyID, "usage-30d", "Requests in the last 30 days, per day (UTC)", dayEnd, 24*time.Hour, monthBuckets, "01-02"); err != nil {
		return u, err
	}
	logs, _, err := c.store.RequestLogPage(ctx, store.RequestLogQuery{AccountID: accountID, KeyID: keyID, Limit: recentLogs})
	if err != nil {
		return u, err
	}
	u.Recent = logRows(logs, nil)
	return u, nil
}

func (c *Console) usageChart(ctx context.Context, keyID, id, title string, end time.Time, width time.Duration, n int, layout string) (usageChart, error) {
	start := end.Add(-time.Duration(n) * width)
	rows, err := c.store.KeyUsage(ctx, keyID, start, end, width)
	if err != nil {
		return usageChart{}, err
	}
	ch := usageChart{ID: id, Title: title, Buckets: make([]usageBucket, n)}
	for i := range ch.Buckets {
		t := start.Add(time.Duration(i) * width)
		ch.Buckets[i] = usageBucket{Start: t, Label: t.Format(layout)}
	}
	var totals [4]int64
	for _, r := range rows {
		i := int(r.Start.Sub(start) / width)
		ci := classIndex(r.Class)
		if i < 0 || i >= n || ci < 0 {
			continue
		}
		ch.Buckets[i].Counts[ci] += r.Count
		totals[ci] += r.Count
	}
	for i, cl := range requestlog.Classes {
		ch.Totals = append(ch.Totals, classCount{Class: cl, Count: totals[i]})
		ch.Total += totals[i]
	}
	ch.SVG = ch.svg()
	return ch, nil
}

func classIndex(class string) int {
	for i, c := range requestlog.Classes {
		if c == class {
			return i
		}
	}
	return -1
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 720, 160
	chartTop       = 8
	chartBottom    = 20 // room for the axis labels
)

// svg draws the chart: one stacked bar per bucket. Its text is fixed or
// digits, escaped all the same.
func (ch usageChart) svg() template.HTML {
	var peak int64 = 1
	for _, b := range ch.Buckets {
		peak = max(peak, b.Counts[0]+b.Counts[1]+b.Counts[2]+b.Counts[3])
	}
	var sb strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&sb, `<svg id="%s" class="usage-chart" role="img" viewBox="0 0 %d %d" width="100%%" aria-labelledby="%s-title %s-desc" data-total="%d">`,
		e(ch.ID), chartW, chartH, e(ch.ID), e(ch.ID), ch.Total)
	fmt.Fprintf(&sb, `<title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`, e(ch.ID), e(ch.Title), e(ch.ID), e(ch.totalsText()))
	slot := float64(chartW) / float64(len(ch.Buckets))
	plot := float64(chartH - chartTop - chartBottom)
	for i, b := range ch.Buckets {
		x := float64(i)*slot + 1
		y := float64(chartH - chartBottom)
		fmt.Fprintf(&sb, `<g class="bucket" data-start="%s"><title>%s: %s</title>`, b.Start.Format(time.RFC3339), e(b.Label), e(countsText(b.Counts)))
		for ci, n := range b.Counts {
			if n == 0 {
				continue
			}
			h := plot * float64(n) / float64(peak)
			y -= h
			fmt.Fprintf(&sb, `<rect class="c%s" data-class="%s" data-count="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f"></rect>`,
				requestlog.Classes[ci], requestlog.Classes[ci], n, x, y, slot-2, h)
		}
		sb.WriteString(`</g>`)
		if i%(max(1, len(ch.Buckets)/6)) == 0 {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="axis">%s</text>`, x, chartH-6, e(b.Label))
		}
	}
	fmt.Fprintf(&sb, `<text x="%d" y="%d" class="axis" text-anchor="end">peak %d</text></svg>`, chartW-2, chartTop+8, peak)
	return template.HTML(sb.String())
}

func (ch usageChart) totalsText() string {
	return strconv.FormatInt(ch.Total, 10) + " requests: " + countsText([4]int64{ch.Totals[0].Count, ch.Totals[1].Count, ch.Totals[2].Count, ch.Totals[3].Count})
}

func countsText(c [4]int64) string {
	parts := make([]string, len(c))
	for i, n := range c {
		parts[i] = strconv.FormatInt(n, 10) + " " + requestlog.Classes[i]
	}
	return strings.Join(parts, ", ")
}
