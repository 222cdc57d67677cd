package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// TestChartEndsAtNow: on Dec 1 at 10:30 each range's last bucket holds
// now and a request made now; the x axis's rightmost label is "now" at the
// right edge, and the labels before it are counted back from it (the 30
// days' one before "now" is Nov 26, not Nov 27 as when they were counted
// from the left).
func TestChartEndsAtNow(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		period                string
		from, to, last        time.Time
		beforeNow, firstLabel string
	}{
		{"24h", time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "04:00", "16:00"},
		{"7d", time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC), "Nov 29", "Nov 25"},
		{"30d", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "Nov 26", "Nov 6"},
	} {
		p, err := readPeriod(httptest.NewRequest("GET", "/console/overview?range="+c.period, nil))
		if err != nil {
			t.Fatal(err)
		}
		var asked [2]time.Time
		read := func(_ context.Context, _ string, from, to time.Time, _ time.Duration) ([]store.UsageBucket, error) {
			asked = [2]time.Time{from, to}
			return []store.UsageBucket{{Start: now.Truncate(p.width), Class: requestlog.Class2xx, Count: 7}}, nil
		}
		ch, err := buildChart(context.Background(), now, p, read, noLatency, "acct", "/console/overview")
		if err != nil {
			t.Fatal(err)
		}
		last := ch.Buckets[len(ch.Buckets)-1]
		if !asked[0].Equal(c.from) || !asked[1].Equal(c.to) || !last.Start.Equal(c.last) || last.Counts[0] != 7 {
			t.Errorf("%s: read [%v, %v), last bucket %v with %v; want [%v, %v), %v with 7 2xx", c.period, asked[0], asked[1], last.Start, last.Counts, c.from, c.to, c.last)
		}
		ticks := ch.XTicks()
		end, before := ticks[len(ticks)-1], ticks[len(ticks)-2]
		if end != (tick{Text: "now", X: 100, End: true}) || before.Text != c.beforeNow || ticks[0].Text != c.firstLabel {
			t.Errorf("%s: labels %v; want %s first, %s before a last \"now\" at 100 %%", c.period, ticks, c.firstLabel, c.beforeNow)
		}
	}
}

func noLatency(context.Context, string, time.Time, time.Time, time.Duration) ([]store.LatencyBucket, error) {
	return nil, nil
}

// TestYTicks: the y axis's top is the least round number (1, 2 or 5 times
// a power of ten per step, at most four steps) at or above the peak.
func TestYTicks(t *testing.T) {
	for _, c := range []struct{ peak, top, step int64 }{
		{0, 1, 1}, {1, 1, 1}, {3, 3, 1}, {5, 6, 2}, {12, 15, 5}, {665, 800, 200}, {1000, 1000, 500}, {1001, 1500, 500}, {41_999, 60_000, 20_000},
	} {
		if top, step := niceScale(c.peak); top != c.top || step != c.step {
			t.Errorf("peak %d: top %d step %d, want %d and %d", c.peak, top, step, c.top, c.step)
		}
	}
	ch := usageChart{period: periods[0], Buckets: make([]usageBucket, 24)}
	ch.Buckets[3].Counts = classCounts{659, 6}
	if got := fmt.Sprint(ch.YTicks()); got != "[{0 0 156 false} {200 0 122 false} {400 0 88 false} {600 0 54 false} {800 0 20 false}]" {
		t.Errorf("y ticks for a peak of 665: %s", got)
	}
}

// TestSmallClassVisible: 6 errors among 665 requests are a segment at
// least minSegment high, with its count, and the bar keeps its total's
// height (what the 4xx gains the 2xx gives up).
func TestSmallClassVisible(t *testing.T) {
	segs := stack(classCounts{659, 6}, 800)
	if len(segs) != 2 || segs[1].Class != "4xx" || segs[1].Count != 6 || segs[1].H < minSegment {
		t.Fatalf("segments %+v: want a 4xx of 6 at least %d pixels high", segs, minSegment)
	}
	total := float64(plotBase-plotTop) * 665 / 800
	if h := segs[0].H + segs[1].H; h < total-0.01 || h > total+0.01 || segs[1].Y+segs[1].H != segs[0].Y || segs[0].Y+segs[0].H != plotBase {
		t.Errorf("segments %+v: want them stacked from the base, %.2f pixels in all", segs, total)
	}
}

// TestLatencyPanel: per bucket, p50 and p95 of its histogram, on a scale in
// round milliseconds; a bucket without requests breaks the lines.
func TestLatencyPanel(t *testing.T) {
	ch := usageChart{period: periods[0], Buckets: make([]usageBucket, 24)}
	for _, i := range []int{20, 21, 23} {
		ch.Buckets[i].Hist = make([]int64, requestlog.LatencyBins)
		for ms := 1; ms <= 100; ms++ {
			ch.Buckets[i].Hist[requestlog.LatencyBin(time.Duration(ms*(i-19))*time.Millisecond)]++
		}
	}
	p := ch.Latency()
	if got := fmt.Sprint(p.Ticks[len(p.Ticks)-1].Text); got != "400" {
		t.Errorf("the top tick %s, want 400 (ms, above the p95 of 4 × 95 ms)", got)
	}
	for _, l := range p.Lines {
		if len(l.Points) != 3 || len(l.Segments) != 1 {
			t.Errorf("%s: %d points and %d segments, want 3 and 1 (23 stands alone)", l.Name, len(l.Points), len(l.Segments))
		}
	}
	if got := p.Lines[1].Points[0].Title; got != ch.Buckets[20].Start.Format("15:04")+": p50 53 ms, p95 90 ms" {
		t.Errorf("the first point's title %q", got)
	}
}
