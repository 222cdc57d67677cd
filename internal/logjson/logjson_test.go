package logjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// when is the time of the test records: a non-UTC zone and nanoseconds, so
// that the formatting of both is exercised on every line.
var when = time.Date(2025, 3, 4, 5, 6, 7, 123456780, time.FixedZone("", -(7*3600+30*60)))

func record(level slog.Level, msg string, attrs ...slog.Attr) slog.Record {
	r := slog.NewRecord(when, level, msg, 0)
	r.AddAttrs(attrs...)
	return r
}

// both returns the line each handler writes for r, after derive has been
// applied to each. They are compared as bytes: that is the contract.
func both(t testing.TB, opts *slog.HandlerOptions, derive func(slog.Handler) slog.Handler, r slog.Record) (got, want string) {
	t.Helper()
	var gb, wb bytes.Buffer
	g, w := New(&gb, opts), slog.Handler(slog.NewJSONHandler(&wb, opts))
	if derive != nil {
		g, w = derive(g), derive(w)
	}
	if err := g.Handle(context.Background(), r); err != nil {
		t.Fatalf("logjson Handle: %v", err)
	}
	if err := w.Handle(context.Background(), r); err != nil {
		t.Fatalf("slog Handle: %v", err)
	}
	return gb.String(), wb.String()
}

func same(t *testing.T, opts *slog.HandlerOptions, derive func(slog.Handler) slog.Handler, r slog.Record) {
	t.Helper()
	if got, want := both(t, opts, derive, r); got != want {
		t.Errorf("output differs from slog's\n got: %q\nwant: %q", got, want)
	}
}

type point struct {
	X, Y int
	Tag  string `json:"tag,omitempty"`
}

type marshalErr struct{}

func (marshalErr) MarshalJSON() ([]byte, error) { return nil, errors.New("no <json> for you") }

type jsonError struct{}

func (jsonError) Error() string                { return "as an error" }
func (jsonError) MarshalJSON() ([]byte, error) { return []byte(`{"as":"json"}`), nil }

type nilErr struct{ msg string }

func (e *nilErr) Error() string { return e.msg }

// secret is a LogValuer that turns into a group, then a string.
type secret string

func (s secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", "secret"), slog.Any("len", lenValuer(len(s))))
}

type lenValuer int

func (n lenValuer) LogValue() slog.Value { return slog.IntValue(int(n)) }

// counter is a LogValuer whose value changes on every call, so output equal to
// slog's also shows that LogValue was called as often as slog calls it.
type counter struct{ n int }

func (c *counter) LogValue() slog.Value { c.n++; return slog.IntValue(c.n) }

func TestMatchesSlog(t *testing.T) {
	big := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		r    slog.Record
	}{
		{"plain", record(slog.LevelInfo, "hello")},
		{"empty message", record(slog.LevelInfo, "")},
		{"quote and backslash", record(slog.LevelInfo, `say "hi" \ bye`)},
		{"control characters", record(slog.LevelInfo, "a\nb\rc\td\x00e\x01f\x1fg\x7fh\bi\fj")},
		{"html", record(slog.LevelInfo, "<script>a && b</script>")},
		{"line and paragraph separators", record(slog.LevelInfo, "a\u2028b\u2029c\u2027d")},
		{"invalid utf8", record(slog.LevelInfo, "a\xffb\xc3(c\xe2\x82d\xed\xa0\x80e")},
		{"non-ascii", record(slog.LevelInfo, "héllo, 世界 😀")},
		{"escaped key", record(slog.LevelInfo, "m", slog.String("a\"b\n<c>\u2028\xff", "v"))},
		{"empty key", record(slog.LevelInfo, "m", slog.String("", "v"), slog.Int("", 0))},
		{"strings", record(slog.LevelInfo, "m", slog.String("s", ""), slog.String("t", "x\"y\\z\u2029"))},
		{"ints", record(slog.LevelInfo, "m", slog.Int("zero", 0), slog.Int("neg", -42),
			slog.Int64("min", math.MinInt64), slog.Int64("max", math.MaxInt64))},
		{"uints", record(slog.LevelInfo, "m", slog.Uint64("zero", 0), slog.Uint64("max", math.MaxUint64),
			slog.Any("u8", uint8(200)))},
		{"floats", record(slog.LevelInfo, "m",
			slog.Float64("zero", 0), slog.Float64("negzero", math.Copysign(0, -1)),
			slog.Float64("1e21", 1e21), slog.Float64("below 1e21", 999999999999999900000),
			slog.Float64("1e-7", 1e-7), slog.Float64("1e-6", 1e-6), slog.Float64("tiny", 5e-324),
			slog.Float64("0.1", 0.1), slog.Float64("123.456", 123.456), slog.Float64("-123.456", -123.456),
			slog.Float64("max", math.MaxFloat64), slog.Float64("-max", -math.MaxFloat64),
			slog.Float64("1e100", 1e100), slog.Float64("1.5e-10", -1.5e-10), slog.Float64("0.048", 0.048),
			slog.Any("f32", float32(0.1)))},
		{"nan", record(slog.LevelInfo, "m", slog.Int("before", 1), slog.Float64("nan", math.NaN()), slog.Int("after", 2))},
		{"infinities", record(slog.LevelInfo, "m", slog.Float64("inf", math.Inf(1)), slog.Float64("-inf", math.Inf(-1)))},
		{"bools", record(slog.LevelInfo, "m", slog.Bool("t", true), slog.Bool("f", false))},
		{"durations", record(slog.LevelInfo, "m", slog.Duration("zero", 0), slog.Duration("d", 1500*time.Millisecond),
			slog.Duration("neg", -time.Nanosecond), slog.Duration("max", math.MaxInt64))},
		{"times", record(slog.LevelInfo, "m", slog.Time("zero", time.Time{}), slog.Time("utc", when.UTC()),
			slog.Time("zone", when), slog.Time("whole second", time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)),
			slog.Time("nanos", time.Date(2020, 1, 2, 3, 4, 5, 1, time.UTC)),
			slog.Time("local", time.Unix(1700000000, 5).In(time.Local)),
			slog.Time("year 0", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
			slog.Time("year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)),
			slog.Time("monotonic", time.Now()))},
		{"time year 10000", record(slog.LevelInfo, "m", slog.Time("t", big))},
		{"time year -1", record(slog.LevelInfo, "m", slog.Time("t", time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)))},
		{"time beyond UnixNano", record(slog.LevelInfo, "m", slog.Time("t", time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC)))},
		{"record time zero", slog.NewRecord(time.Time{}, slog.LevelInfo, "no time", 0)},
		{"record time zero with attrs", func() slog.Record {
			r := slog.NewRecord(time.Time{}, slog.LevelWarn, "no time", 0)
			r.AddAttrs(slog.Int("n", 1))
			return r
		}()},
		{"record time UTC", slog.NewRecord(when.UTC(), slog.LevelInfo, "utc", 0)},
		{"record time monotonic", slog.NewRecord(time.Now(), slog.LevelInfo, "now", 0)},
		{"record time year 10000", slog.NewRecord(big, slog.LevelInfo, "far", 0)},
		{"record time year -5", slog.NewRecord(time.Date(-5, 6, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "long ago", 0)},
		{"error", record(slog.LevelError, "m", slog.Any("err", errors.New(`open "x": <no such file>`)))},
		{"wrapped error", record(slog.LevelError, "m", slog.Any("err", fmt.Errorf("ctx: %w", io.EOF)))},
		{"error that marshals", record(slog.LevelError, "m", slog.Any("err", jsonError{}))},
		{"nil error pointer", record(slog.LevelError, "m", slog.Any("err", (*nilErr)(nil)))},
		{"struct", record(slog.LevelInfo, "m", slog.Any("p", point{1, 2, "<a&b>"}), slog.Any("pp", &point{X: 3}))},
		{"map and slice", record(slog.LevelInfo, "m", slog.Any("m", map[string]int{"b": 2, "a": 1}), slog.Any("s", []string{"x", "y"}))},
		{"marshal error", record(slog.LevelInfo, "m", slog.Any("bad", marshalErr{}))},
		{"unsupported", record(slog.LevelInfo, "m", slog.Any("ch", make(chan int)))},
		{"nil any", record(slog.LevelInfo, "m", slog.Any("nil", nil))},
		{"empty attr", record(slog.LevelInfo, "m", slog.Int("a", 1), slog.Attr{}, slog.Int("b", 2))},
		{"only empty attr", record(slog.LevelInfo, "m", slog.Attr{})},
		{"kind", record(slog.LevelInfo, "m", slog.Any("k", slog.KindInt64))},
		{"level value", record(slog.LevelInfo, "m", slog.Any("lvl", slog.LevelWarn+1))},
		{"group", record(slog.LevelInfo, "m", slog.Group("g", slog.Int("a", 1), slog.String("b", "x")), slog.Int("c", 3))},
		{"nested groups", record(slog.LevelInfo, "m", slog.Group("g", slog.Group("h", slog.Int("a", 1)), slog.Group("empty")), slog.Int("c", 3))},
		{"empty group", record(slog.LevelInfo, "m", slog.Int("a", 1), slog.Group("g"), slog.Int("b", 2))},
		{"inlined group", record(slog.LevelInfo, "m", slog.Group("", slog.Int("a", 1), slog.Int("b", 2)))},
		{"group of empty attr", record(slog.LevelInfo, "m", slog.Group("g", slog.Attr{}), slog.Int("b", 2))},
		{"log valuer", record(slog.LevelInfo, "m", slog.Any("s", secret("hunter2")), slog.Any("n", lenValuer(3)))},
		{"levels", record(slog.LevelDebug, "m")},
		{"warn", record(slog.LevelWarn, "m")},
		{"error level", record(slog.LevelError, "m")},
		{"info+2", record(slog.LevelInfo+2, "m")},
		{"info-1", record(slog.LevelInfo-1, "m")},
		{"debug-3", record(slog.LevelDebug-3, "m")},
		{"error+100", record(slog.LevelError+100, "m")},
		{"min level", record(slog.Level(math.MinInt), "m")},
		{"max level", record(slog.Level(math.MaxInt), "m")},
		{"many attrs", record(slog.LevelInfo, "m", manyAttrs(40)...)},
		{"long message", record(slog.LevelInfo, strings.Repeat("x\"<\u2028", 30000))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { same(t, nil, nil, c.r) })
	}
}

func manyAttrs(n int) []slog.Attr {
	as := make([]slog.Attr, n)
	for i := range as {
		as[i] = slog.Int(fmt.Sprint("k", i), i)
	}
	return as
}

// TestLogValuerCalledLikeSlog: a LogValuer that counts its calls gives the
// same output through both handlers only if each calls it as often.
func TestLogValuerCalledLikeSlog(t *testing.T) {
	var gb, wb bytes.Buffer
	gc, wc := &counter{}, &counter{}
	g := New(&gb, nil).WithAttrs([]slog.Attr{slog.Any("with", gc)})
	w := slog.NewJSONHandler(&wb, nil).WithAttrs([]slog.Attr{slog.Any("with", wc)})
	for i := 0; i < 3; i++ {
		_ = g.Handle(context.Background(), record(slog.LevelInfo, "m", slog.Any("rec", gc), slog.Int("i", i)))
		_ = w.Handle(context.Background(), record(slog.LevelInfo, "m", slog.Any("rec", wc), slog.Int("i", i)))
	}
	if gb.String() != wb.String() {
		t.Errorf("output differs from slog's\n got: %q\nwant: %q", gb.String(), wb.String())
	}
}

func TestWithAttrsAndGroups(t *testing.T) {
	with := func(as ...slog.Attr) func(slog.Handler) slog.Handler {
		return func(h slog.Handler) slog.Handler { return h.WithAttrs(as) }
	}
	chain := func(fs ...func(slog.Handler) slog.Handler) func(slog.Handler) slog.Handler {
		return func(h slog.Handler) slog.Handler {
			for _, f := range fs {
				h = f(h)
			}
			return h
		}
	}
	group := func(name string) func(slog.Handler) slog.Handler {
		return func(h slog.Handler) slog.Handler { return h.WithGroup(name) }
	}
	attrs := []slog.Attr{slog.String("s", "x<y"), slog.Int("n", -1), slog.Float64("f", 0.25), slog.Bool("b", true)}
	derives := []struct {
		name   string
		derive func(slog.Handler) slog.Handler
	}{
		{"attrs", with(attrs...)},
		{"no attrs", with()},
		{"attrs twice", chain(with(slog.Int("a", 1)), with(slog.Int("b", 2), slog.Duration("d", time.Second)))},
		{"empty attr", with(slog.Attr{})},
		{"empty group", with(slog.Group("g"))},
		{"any attr", with(slog.Any("p", point{X: 1}), slog.Int("after", 2))},
		{"fast then any", chain(with(slog.Int("a", 1)), with(slog.Any("e", errors.New("boom"))), with(slog.Int("z", 3)))},
		{"log valuer attr", with(slog.Any("s", secret("pw")))},
		{"group", group("g")},
		{"empty group name", group("")},
		{"group then attrs", chain(group("g"), with(slog.Int("a", 1)))},
		{"attrs group attrs", chain(with(slog.Int("a", 1)), group("g"), with(slog.Int("b", 2)))},
		{"attrs group attrs group", chain(with(slog.Int("a", 1)), group("g"), with(slog.Int("b", 2)), group("h"))},
		{"group group attrs", chain(group("g"), group("h"), with(slog.String("k", "v")))},
		{"group empty attrs", chain(group("g"), with(slog.Group("e")))},
		{"attrs then group only", chain(with(slog.String("k", "v")), group("g"))},
	}
	records := []struct {
		name string
		r    slog.Record
	}{
		{"no attrs", record(slog.LevelInfo, "m")},
		{"fast attrs", record(slog.LevelInfo, "m", slog.String("x", "1"), slog.Int("y", 2))},
		{"slow attr", record(slog.LevelInfo, "m", slog.Any("p", point{X: 1}))},
		{"empty attr only", record(slog.LevelInfo, "m", slog.Attr{})},
		{"group attr", record(slog.LevelInfo, "m", slog.Group("q", slog.Int("z", 1)))},
		{"zero time", slog.NewRecord(time.Time{}, slog.LevelWarn, "m", 0)},
	}
	for _, d := range derives {
		for _, r := range records {
			t.Run(d.name+"/"+r.name, func(t *testing.T) { same(t, nil, d.derive, r.r) })
		}
	}
}

// TestWithAttrsDoesNotShareArrays: two handlers derived from one must not
// write into each other's pre-encoded attributes. Several lengths, so that
// some leave spare capacity after the base's attributes.
func TestWithAttrsDoesNotShareArrays(t *testing.T) {
	for n := range 40 {
		var buf bytes.Buffer
		pad := strings.Repeat("x", n)
		base := New(&buf, nil).WithAttrs([]slog.Attr{slog.String("a", pad)})
		x := base.WithAttrs([]slog.Attr{slog.Int("b", 1)})
		y := base.WithAttrs([]slog.Attr{slog.Int("c", 2)})
		for _, h := range []slog.Handler{x, y, base} {
			_ = h.Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0))
		}
		want := `{"level":"INFO","msg":"m","a":"` + pad + `","b":1}` + "\n" +
			`{"level":"INFO","msg":"m","a":"` + pad + `","c":2}` + "\n" +
			`{"level":"INFO","msg":"m","a":"` + pad + `"}` + "\n"
		if buf.String() != want {
			t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
		}
	}
}

func TestLevels(t *testing.T) {
	var lv slog.LevelVar
	lv.Set(slog.LevelWarn)
	for _, opts := range []*slog.HandlerOptions{nil, {}, {Level: slog.LevelDebug}, {Level: slog.LevelError + 3}, {Level: &lv}} {
		var gb, wb bytes.Buffer
		g, w := slog.New(New(&gb, opts)), slog.New(slog.NewJSONHandler(&wb, opts))
		for _, l := range []slog.Level{slog.LevelDebug - 1, slog.LevelDebug, slog.LevelInfo, slog.LevelInfo + 2, slog.LevelWarn, slog.LevelError, slog.LevelError + 3} {
			ctx := context.Background()
			if ge, we := g.Enabled(ctx, l), w.Enabled(ctx, l); ge != we {
				t.Errorf("opts %+v: Enabled(%v) = %v, slog says %v", opts, l, ge, we)
			}
			// Through a Logger the times differ; zero them as ReplaceAttr
			// cannot (that would leave the fast path).
			if g.Enabled(ctx, l) {
				_ = g.Handler().Handle(ctx, slog.NewRecord(when, l, "m", 0))
			}
			if w.Enabled(ctx, l) {
				_ = w.Handler().Handle(ctx, slog.NewRecord(when, l, "m", 0))
			}
		}
		if gb.String() != wb.String() {
			t.Errorf("opts %+v:\n got: %q\nwant: %q", opts, gb.String(), wb.String())
		}
	}
	// Below the minimum, a Logger writes nothing.
	var buf bytes.Buffer
	l := slog.New(New(&buf, nil))
	l.Debug("hidden", "a", 1)
	l.Log(context.Background(), slog.LevelInfo-1, "hidden too")
	if buf.Len() != 0 {
		t.Errorf("below Info: wrote %q", buf.String())
	}
	// The LevelVar is read on every call.
	lv.Set(slog.LevelDebug)
	if !New(&buf, &slog.HandlerOptions{Level: &lv}).Enabled(context.Background(), slog.LevelDebug) {
		t.Error("LevelVar lowered to Debug: Debug not enabled")
	}
}

// TestOptionsFallBack: AddSource and ReplaceAttr are slog's handler's alone.
func TestOptionsFallBack(t *testing.T) {
	rep := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "n" {
			a.Value = slog.StringValue("replaced")
		}
		return a
	}
	same(t, &slog.HandlerOptions{ReplaceAttr: rep}, nil, record(slog.LevelInfo, "m", slog.Int("n", 1)))
	if _, ok := New(io.Discard, &slog.HandlerOptions{AddSource: true}).(*slog.JSONHandler); !ok {
		t.Error("AddSource: not slog's handler")
	}
}

// TestFastPathTaken: the kinds this package encodes must not go to slog, or
// the byte-for-byte tests would pass while nothing got faster.
func TestFastPathTaken(t *testing.T) {
	h := New(io.Discard, nil).WithAttrs([]slog.Attr{slog.String("with", "x")}).(*handler)
	fast := record(slog.LevelInfo+2, "m", slog.String("s", "x"), slog.Int("i", 1), slog.Uint64("u", 2),
		slog.Float64("f", 0.5), slog.Bool("b", true), slog.Duration("d", 3), slog.Time("t", when))
	if _, ok := h.appendRecord(nil, fast); !ok {
		t.Error("record of fast kinds went to slog")
	}
	if _, ok := h.appendRecord(nil, slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)); !ok {
		t.Error("record with zero time went to slog")
	}
	for _, a := range []slog.Attr{slog.Any("p", point{}), slog.Float64("nan", math.NaN()), slog.Group("g", slog.Int("a", 1)),
		slog.Any("lv", lenValuer(1)), slog.Time("t", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))} {
		if _, ok := h.appendRecord(nil, record(slog.LevelInfo, "m", a)); ok {
			t.Errorf("%v: encoded on the fast path", a)
		}
	}
	if _, ok := h.WithGroup("g").(*handler); ok {
		t.Error("WithGroup kept the fast path")
	}
}

func TestNoAllocs(t *testing.T) {
	h := New(io.Discard, nil)
	r := requestLine()
	r.AddAttrs(slog.Bool("cached", false), slog.Duration("d", time.Millisecond), slog.Time("at", when))
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = h.Handle(ctx, r) }); n != 0 {
		t.Errorf("Handle: %v allocs per record, want 0", n)
	}
}

// lineWriter checks that every Write is exactly one line, as a writer that
// expects whole lines per Write would need.
type lineWriter struct {
	t     *testing.T
	buf   bytes.Buffer // guarded by the handler's mutex, deliberately not by its own
	lines int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') != len(p)-1 {
		w.t.Errorf("Write of %q: not one whole line", p)
	}
	w.lines++
	return w.buf.Write(p)
}

func TestConcurrent(t *testing.T) {
	const goroutines, perG = 8, 500
	w := &lineWriter{t: t}
	root := New(w, nil)
	// Handlers derived from one root share its mutex, whichever path they
	// take; a mix of both runs at once here.
	hs := []slog.Handler{
		root,
		root.WithAttrs([]slog.Attr{slog.String("svc", "api")}),
		root.WithGroup("g"),
		root.WithAttrs([]slog.Attr{slog.Any("p", point{X: 1})}),
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[g%len(hs)]
			for i := range perG {
				r := record(slog.LevelInfo, "concurrent", slog.Int("g", g), slog.Int("i", i),
					slog.String("pad", strings.Repeat("x", i%300)))
				if i%7 == 0 {
					r.AddAttrs(slog.Any("slow", map[string]int{"i": i}))
				}
				if err := h.Handle(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != goroutines*perG || w.lines != goroutines*perG {
		t.Fatalf("%d lines in %d writes, want %d", len(lines), w.lines, goroutines*perG)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m["msg"] != "concurrent" {
			t.Fatalf("line %q: msg %v", l, m["msg"])
		}
	}
}

// requestLine is the record the service writes for each request.
func requestLine() slog.Record {
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(
		slog.String("request_id", "req_"+strings.Repeat("0f3a9c", 4)),
		slog.String("method", "GET"),
		slog.String("path", "/v1/me"),
		slog.String("route", "GET /v1/me"),
		slog.Int("status", 200),
		slog.Int64("bytes", 367),
		slog.Float64("duration_ms", 0.048),
		slog.String("key_prefix", "c0ye1f5ohb9c"),
		slog.String("remote", "127.0.0.1"),
	)
	return r
}

func TestRequestLine(t *testing.T) {
	same(t, nil, nil, requestLine())
}

func BenchmarkHandleRequestLine(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    slog.Handler
	}{
		{"slog", slog.NewJSONHandler(io.Discard, nil)},
		{"logjson", New(io.Discard, nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := requestLine()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.h.Handle(ctx, r)
			}
		})
	}
}
