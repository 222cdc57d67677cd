package requestlog

import (
	"math"
	"testing"
	"time"
)

// TestLatencyBins checks that every latency lands in a bin whose middle is
// within 12.5 % of it, in bin order, from a microsecond to a minute.
func TestLatencyBins(t *testing.T) {
	last := 0
	for us := int64(8); us < 60_000_000; us = us*101/100 + 1 {
		d := time.Duration(us) * time.Microsecond
		b := LatencyBin(d)
		if b < last || b >= LatencyBins {
			t.Fatalf("%v in bin %d after bin %d (of %d)", d, b, last, LatencyBins)
		}
		last = b
		if mid := LatencyOfBin(b); math.Abs(float64(mid-d))/float64(d) > 0.125 {
			t.Fatalf("%v in bin %d, whose middle is %v", d, b, mid)
		}
	}
	if LatencyBin(time.Microsecond) != 0 || LatencyBin(-time.Second) != 0 || LatencyBin(time.Hour) != LatencyBins-1 {
		t.Error("the ends do not land in the first and last bins")
	}
}

// TestPercentile seeds latencies of 1 to 100 ms: p50 is 50 ms and p95 95
// ms, each within a bin's 12.5 %.
func TestPercentile(t *testing.T) {
	hist := make([]int64, LatencyBins)
	for ms := 1; ms <= 100; ms++ {
		hist[LatencyBin(time.Duration(ms)*time.Millisecond)]++
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.95, 95 * time.Millisecond}, {1, 100 * time.Millisecond}, {0.01, time.Millisecond}} {
		got, ok := Percentile(hist, c.q)
		if !ok || math.Abs(float64(got-c.want))/float64(c.want) > 0.125 {
			t.Errorf("p%v = %v, %v; want about %v", c.q*100, got, ok, c.want)
		}
	}
	if _, ok := Percentile(make([]int64, LatencyBins), 0.5); ok {
		t.Error("an empty histogram has a percentile")
	}
}

// TestHistText: a histogram written as text reads back the same, added to
// what is there; a damaged one is an error.
func TestHistText(t *testing.T) {
	h := make([]int64, LatencyBins)
	h[0], h[7], h[LatencyBins-1] = 3, 1_000_000, 2
	text := string(AppendHist(nil, h))
	if text != "0:3 7:1000000 96:2" {
		t.Errorf("written as %q", text)
	}
	got := make([]int64, LatencyBins)
	got[7] = 1
	if err := AddHist(got, text); err != nil || got[0] != 3 || got[7] != 1_000_001 || got[LatencyBins-1] != 2 {
		t.Errorf("read back %v, %v", got, err)
	}
	for _, bad := range []string{"7", "97:1", "-1:1", "3:x", "3:-2"} {
		if err := AddHist(got, bad); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
	if string(AppendHist(nil, make([]int64, LatencyBins))) != "" {
		t.Error("an empty histogram is not empty text")
	}
}
