// Package logjson is a log/slog Handler whose output is byte for byte what
// slog.NewJSONHandler writes, at a fraction of its cost.
//
// It exists because slog's JSON handler was a measurable share of each
// request: about a microsecond per log line, spent in its generic machinery
// (handleState, appendNonBuiltIns, Record.Attrs through a pooled buffer) and
// in formatting every float through encoding/json. This handler appends the
// common kinds of value (string, integers, finite floats, bool, duration,
// time) straight into a pooled byte slice and writes the line with one Write.
//
// The contract is the output: for every record, the bytes written are those
// slog.NewJSONHandler(w, opts) would write, so nothing reading the logs can
// tell the two apart. Whatever this package does not encode itself (values of
// kind Any, Group or LogValuer, NaN and infinities, years outside 0..9999,
// attributes under a WithGroup) goes, a whole record at a time, to a
// slog.JSONHandler on the same writer, so its rules are slog's by
// construction.
package logjson

import (
	"context"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// New returns a handler writing one JSON line per record to w, byte for byte
// what slog.NewJSONHandler(w, opts) writes. A nil opts means the defaults.
// With AddSource or ReplaceAttr set it is slog's handler itself: those options
// are not used on the hot path, so they have no fast path.
func New(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	if opts.AddSource || opts.ReplaceAttr != nil {
		return slog.NewJSONHandler(w, opts)
	}
	mu := new(sync.Mutex)
	return &handler{
		w:     w,
		mu:    mu,
		level: opts.Level,
		slow:  slog.NewJSONHandler(&lockedWriter{mu: mu, w: w}, &slog.HandlerOptions{Level: opts.Level}),
	}
}

// handler is the fast path. A handler with a group open is not one of these:
// WithGroup hands back slow, which has the group, and whose lines still go
// through mu.
type handler struct {
	w     io.Writer
	mu    *sync.Mutex  // serializes Writes; one per New, shared by all handlers derived from it
	level slog.Leveler // nil means slog.LevelInfo, as in slog
	// attrs holds the attributes given to WithAttrs, already encoded, each as
	// `,"key":value`: slog writes them after "msg" the same way.
	attrs []byte
	// slow is slog's handler with the same attributes, for the records this
	// handler does not encode itself. It writes through mu.
	slow slog.Handler
}

// lockedWriter lets slog's handler share the fast path's mutex, so that a
// line from either path is never interleaved with another. slog holds its own
// mutex while it calls Write; nothing takes them in the other order.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// Enabled is slog's rule: records below the minimum level are dropped, and the
// Leveler is asked each time so that a LevelVar can change it.
func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	minLevel := slog.LevelInfo
	if h.level != nil {
		minLevel = h.level.Level()
	}
	return l >= minLevel
}

// Handle writes r as one line, with one Write. Like slog's, it does not check
// the level: that is Enabled's job, and the Logger's.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	bp := bufPool.Get().(*[]byte)
	buf, ok := h.appendRecord((*bp)[:0], r)
	*bp = buf
	if !ok {
		putBuf(bp)
		return h.slow.Handle(ctx, r)
	}
	err := h.write(buf)
	putBuf(bp)
	return err
}

func (h *handler) write(line []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(line)
	return err
}

// WithAttrs encodes attrs once, now, as slog does; if one of them is not of a
// kind this package encodes, the handler it returns is slog's.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	// slow gets the attributes in any case, so that it can take over the
	// records the fast path declines; this is also the one place their
	// LogValuers are called, as in slog.
	slow := h.slow.WithAttrs(attrs)
	pre := slices.Clip(h.attrs) // never append into h's array: h is still in use
	for _, a := range attrs {
		var ok bool
		if pre, ok = appendAttr(pre, a); !ok {
			return slow
		}
	}
	return &handler{w: h.w, mu: h.mu, level: h.level, attrs: pre, slow: slow}
}

// WithGroup is slog's: a group changes where every later attribute goes and
// what an empty record looks like, rules not worth copying for a line the
// service does not write.
func (h *handler) WithGroup(name string) slog.Handler {
	return h.slow.WithGroup(name)
}

// appendRecord appends r's line to buf. It reports false if r holds something
// only slog's handler encodes; buf is then garbage.
func (h *handler) appendRecord(buf []byte, r slog.Record) ([]byte, bool) {
	buf = append(buf, '{')
	if !r.Time.IsZero() { // slog omits a zero time
		buf = append(buf, `"time":`...)
		var ok bool
		if buf, ok = appendTime(buf, r.Time.Round(0)); !ok {
			return buf, false
		}
		buf = append(buf, ',')
	}
	buf = append(buf, `"level":"`...)
	buf = appendLevel(buf, r.Level)
	buf = append(buf, `","msg":`...)
	buf = appendString(buf, r.Message)
	buf = append(buf, h.attrs...)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		buf, ok = appendAttr(buf, a)
		return ok
	})
	return append(buf, "}\n"...), ok
}

// appendAttr appends `,"key":value`, or reports false if a's value is not of a
// kind encoded here. Those kinds are never empty Attrs in slog's sense (an
// empty Attr is of kind Any), so an empty key is written as slog writes it.
func appendAttr(buf []byte, a slog.Attr) ([]byte, bool) {
	buf = append(buf, ',')
	buf = appendString(buf, a.Key)
	buf = append(buf, ':')
	return appendValue(buf, a.Value)
}

// appendValue follows slog's appendJSONValue for the kinds that need neither
// reflection nor a Resolve.
func appendValue(buf []byte, v slog.Value) ([]byte, bool) {
	switch v.Kind() {
	case slog.KindString:
		return appendString(buf, v.String()), true
	case slog.KindInt64:
		return strconv.AppendInt(buf, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(buf, v.Uint64(), 10), true
	case slog.KindFloat64:
		return appendFloat(buf, v.Float64())
	case slog.KindBool:
		return strconv.AppendBool(buf, v.Bool()), true
	case slog.KindDuration:
		// Nanoseconds, as json.Marshal writes a time.Duration.
		return strconv.AppendInt(buf, int64(v.Duration()), 10), true
	case slog.KindTime:
		return appendTime(buf, v.Time())
	}
	return buf, false
}

// appendTime writes t quoted in RFC 3339 with nanoseconds, trailing zeros
// dropped, as slog's appendJSONTime does. For a year outside 0..9999 slog
// writes an error string before the time (not valid JSON, but its output);
// that case is left to slog, detected from the text rather than with a
// second date computation: a year in range is exactly four digits then '-'.
func appendTime(buf []byte, t time.Time) ([]byte, bool) {
	buf = append(buf, '"')
	n := len(buf)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	if len(buf) < n+5 || buf[n] < '0' || buf[n] > '9' || buf[n+4] != '-' {
		return buf, false
	}
	return append(buf, '"'), true
}

// appendLevel appends slog.Level.String without building a string:
// "INFO", or the nearest named level below with a signed offset ("INFO+2",
// "DEBUG-2").
func appendLevel(buf []byte, l slog.Level) []byte {
	var base string
	var off slog.Level
	switch {
	case l < slog.LevelInfo:
		base, off = "DEBUG", l-slog.LevelDebug
	case l < slog.LevelWarn:
		base, off = "INFO", l-slog.LevelInfo
	case l < slog.LevelError:
		base, off = "WARN", l-slog.LevelWarn
	default:
		base, off = "ERROR", l-slog.LevelError
	}
	buf = append(buf, base...)
	if off > 0 {
		buf = append(buf, '+')
	}
	if off != 0 {
		buf = strconv.AppendInt(buf, int64(off), 10)
	}
	return buf
}

// appendFloat writes f as encoding/json does (slog hands floats to
// json.Marshal): ES6 number formatting, exponent form below 1e-6 and from
// 1e21 on, with the exponent's leading zero removed. NaN and infinities are
// errors in encoding/json, written by slog as "!ERROR:..." strings; they are
// left to slog.
func appendFloat(buf []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return buf, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 -> 1e-7
		n := len(buf)
		if buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, true
}

// appendString appends s quoted and escaped as slog's appendEscapedJSONString
// does: encoding/json's rules without HTML escaping (<, > and & are left as
// they are), \n \r \t and \" \\ short forms, other control bytes as \u00XX,
// each invalid UTF-8 byte as \ufffd, and U+2028 and U+2029 escaped.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	// Keys and most values are plain ASCII: find that out in a tight loop
	// and copy them in one go.
	i := 0
	for i < len(s) && safe[s[i]] {
		i++
	}
	if i < len(s) {
		buf = appendEscaped(buf, s, i)
	} else {
		buf = append(buf, s...)
	}
	return append(buf, '"')
}

// appendEscaped appends s, of which s[:start] needs no escaping, escaped.
// It is slog's loop (copied from encoding/json's), byte for byte the same
// decisions.
func appendEscaped(buf []byte, s string, start int) []byte {
	i := start
	start = 0
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\')
			switch b {
			case '\\', '"':
				buf = append(buf, b)
			case '\n':
				buf = append(buf, 'n')
			case '\r':
				buf = append(buf, 'r')
			case '\t':
				buf = append(buf, 't')
			default:
				buf = append(buf, 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(buf, s[start:]...)
}

const hex = "0123456789abcdef"

// safe reports, for each byte, whether it is ASCII that goes into a JSON
// string as it is: all but the control characters, '"' and '\\'. (That is
// encoding/json's safeSet, which slog copies; bytes from 0x80 up are false
// here so that one lookup answers both questions.)
var safe = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// bufPool holds line buffers. A line is a few hundred bytes; the odd huge
// one is left to the garbage collector rather than kept for ever.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

const maxPooledBuf = 64 << 10

func putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	bufPool.Put(bp)
}
