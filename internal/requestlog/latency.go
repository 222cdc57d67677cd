package requestlog

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Latency histograms (docs/console.md, Usage and request logs): the usage
// recorder counts each request's latency in one of LatencyBins bins beside
// its count, and the charts read p50 and p95 from the bins summed per
// bucket. Bin 0 holds everything under 8 µs; above, each power of two of
// microseconds is cut in four bins of equal width, so a bin's middle is
// within 12.5 % of any latency it holds; the last bin also holds everything
// from about 67 s up.
const LatencyBins = 1 + 4*(maxOctave-minOctave+1)

const (
	minOctave = 3  // 8 µs
	maxOctave = 26 // 2^26 µs, about 67 s
)

// LatencyBin is the bin of d.
func LatencyBin(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	o := bits.Len64(us) - 1
	if o < minOctave {
		return 0
	}
	if o > maxOctave {
		return LatencyBins - 1
	}
	return 1 + 4*(o-minOctave) + int(us>>(o-2)&3)
}

// LatencyOfBin is the middle of bin b's latencies.
func LatencyOfBin(b int) time.Duration {
	if b <= 0 {
		return 4 * time.Microsecond
	}
	b = min(b, LatencyBins-1) - 1
	o, sub := b/4+minOctave, uint64(b%4)
	lo, hi := (4+sub)<<(o-2), (5+sub)<<(o-2)
	return time.Duration((lo+hi)/2) * time.Microsecond
}

// Percentile is the q-quantile (0 < q ≤ 1) of the latencies counted in
// hist (bin by bin), as the middle of the bin holding it: the smallest
// latency at or above which lie q of them. ok is false when hist is empty.
func Percentile(hist []int64, q float64) (d time.Duration, ok bool) {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := int64(q * float64(total))
	if float64(rank) < q*float64(total) {
		rank++
	}
	rank = max(rank, 1)
	var seen int64
	for b, n := range hist {
		if seen += n; seen >= rank {
			return LatencyOfBin(b), true
		}
	}
	return LatencyOfBin(len(hist) - 1), true
}

// AppendHist appends hist (counts by bin) as text: "bin:count" for each
// bin counted, space-separated, bins in order ("" when none). The store
// keeps a key's hour so, one row, not one a bin (BenchmarkLatencySource).
func AppendHist(dst []byte, hist []int64) []byte {
	first := true
	for b, n := range hist {
		if n == 0 {
			continue
		}
		if !first {
			dst = append(dst, ' ')
		}
		first = false
		dst = strconv.AppendInt(dst, int64(b), 10)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, n, 10)
	}
	return dst
}

// AddHist adds the histogram text (AppendHist) to hist, which holds
// LatencyBins counts.
func AddHist(hist []int64, text string) error {
	for f := range strings.FieldsSeq(text) {
		b, n, ok := strings.Cut(f, ":")
		bin, err1 := strconv.Atoi(b)
		count, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil || bin < 0 || bin >= len(hist) || count < 0 {
			return fmt.Errorf("latency histogram: bad field %q", f)
		}
		hist[bin] += count
	}
	return nil
}
