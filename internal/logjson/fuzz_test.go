package logjson

import (
	"log/slog"
	"math"
	"testing"
	"time"
)

// FuzzMatchesSlog builds records and WithAttrs handlers out of arbitrary
// strings and numbers and compares the lines with slog's.
func FuzzMatchesSlog(f *testing.F) {
	f.Add("request", "key", "value", "", int64(200), 0.048, int64(0))
	f.Add("a\"b\\c\n\t\x00", "<k>", "&\u2028\u2029", "\xff\xfe", int64(math.MinInt64), math.MaxFloat64, int64(-4))
	f.Add("", "", "", "", int64(math.MaxInt64), 1e21, int64(2))
	f.Add("héllo 世界", "ü", "😀", "\xed\xa0\x80", int64(-1), 1e-7, int64(12))
	f.Add("nan", "f", "x", "y", int64(0), math.NaN(), int64(0))
	f.Add("inf", "f", "x", "y", int64(1), math.Inf(-1), int64(-100))
	f.Add("tiny", "f", "x", "y", int64(253402300800), 5e-324, int64(8))
	f.Add("neg", "f", "x", "y", int64(-62167219201), math.Copysign(0, -1), int64(3))
	f.Fuzz(func(t *testing.T, msg, key, s1, s2 string, i int64, x float64, lvl int64) {
		level := slog.Level(lvl)
		// i as seconds reaches years outside 0..9999 (slog's error case)
		// and as nanoseconds the ordinary ones.
		attrs := []slog.Attr{
			slog.String(key, s1),
			slog.String("s2", s2),
			slog.Int64("i", i),
			slog.Uint64(s2, uint64(i)),
			slog.Float64("f", x),
			slog.Float64(s1, x/3),
			slog.Bool(msg, i%2 == 0),
			slog.Duration("d", time.Duration(i)),
			slog.Time("tn", time.Unix(0, i).In(time.FixedZone("", int(i%50000)))),
			slog.Time("ts", time.Unix(i, i%1e9).UTC()),
		}
		var withs []slog.Attr
		if i%3 == 0 {
			withs = []slog.Attr{slog.String(s2, key), slog.Float64(key, x)}
		}
		derive := func(h slog.Handler) slog.Handler {
			if withs != nil {
				h = h.WithAttrs(withs)
			}
			if i%5 == 0 {
				h = h.WithGroup(s1).WithAttrs([]slog.Attr{slog.String(key, msg)})
			}
			return h
		}
		rtime := time.Unix(i%(1<<40), i%1e9)
		if i%4 == 0 {
			rtime = time.Time{}
		}
		r := slog.NewRecord(rtime, level, msg, 0)
		r.AddAttrs(attrs...)
		if got, want := both(t, nil, derive, r); got != want {
			t.Errorf("output differs from slog's\n got: %q\nwant: %q", got, want)
		}
	})
}
