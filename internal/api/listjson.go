package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// The agent list is written by this append encoder rather than through
// encoding/json's reflection: without it a page of 100 agents cost serve
// 116 µs of CPU instead of 71 on SQLite, and serve + PostgreSQL + Redis
// 156 µs instead of 112 (+65 % and +40 % end to end; bench/RESULTS.md).
// It writes the very bytes json.Marshal writes for collection of wire.AgentItem,
// newline included; listjson_test.go holds it to that.

// appendBufPool holds encode buffers; ones grown past 64 KiB are dropped
// rather than kept for every later request.
var appendBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// putAppendBuf returns buf to appendBufPool unless it grew past 64 KiB.
func putAppendBuf(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		appendBufPool.Put(buf)
	}
}

// writeAgentPage sends a page of the agent list.
func writeAgentPage(w http.ResponseWriter, agents []store.AgentItem, m meta) {
	buf := appendBufPool.Get().(*[]byte)
	*buf = appendAgentPage((*buf)[:0], agents, m)
	writeJSONBytes(w, http.StatusOK, *buf)
	putAppendBuf(buf)
}

// appendTime appends t as wire.Time writes it, quoted, by hand: the
// layout interpreter of AppendFormat was most of a list page's encoding.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, wire.TimeFormat)
		return append(dst, '"')
	}
	h, mi, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(dst, '"',
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

// jsonEscapes and logEscapes map each ASCII byte to what stands for it
// inside a JSON string, "" where it stands for itself. encoding/json
// (jsonEscapes) writes \b and \f short and escapes <, > and & for HTML, as
// json.Encoder does by default; slog's JSON handler (logEscapes) writes
// \u0008 and \u000c and leaves <, > and & as they are.
var jsonEscapes, logEscapes = escapeTable(`\b`, `\f`, true), escapeTable(`\u0008`, `\u000c`, false)

func escapeTable(bs, ff string, html bool) (t [utf8.RuneSelf]string) {
	const hex = "0123456789abcdef"
	for c := range 0x20 {
		t[c] = `\u00` + string(hex[c>>4]) + string(hex[c&0xF])
	}
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'], t['"'], t['\\'] = bs, ff, `\n`, `\r`, `\t`, `\"`, `\\`
	if html {
		t['<'], t['>'], t['&'] = `\u003c`, `\u003e`, `\u0026`
	}
	return t
}

// appendString appends s as a JSON string exactly as encoding/json does:
// ASCII as jsonEscapes says, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendString(dst []byte, s string) []byte { return appendEscaped(dst, s, &jsonEscapes) }

// appendLogString appends s as slog's JSON handler writes a string.
func appendLogString(dst []byte, s string) []byte { return appendEscaped(dst, s, &logEscapes) }

func appendEscaped(dst []byte, s string, esc *[utf8.RuneSelf]string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if e := esc[b]; e != "" {
				dst = append(append(dst, s[start:i]...), e...)
				start = i + 1
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), `\u202`...)
			dst = append(dst, "89"[r&1])
			start = i + size
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *s)
}

// appendAgentPage appends the collection envelope of an agent list page
// and a newline; created_at is formatted here, straight into the buffer.
func appendAgentPage(dst []byte, agents []store.AgentItem, m meta) []byte {
	dst = append(dst, `{"data":[`...)
	for i, ag := range agents {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = appendString(dst, ag.ID)
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, ag.Name)
		dst = append(dst, `,"enabled":`...)
		dst = strconv.AppendBool(dst, ag.Enabled)
		dst = append(dst, `,"created_at":`...)
		dst = appendTime(dst, ag.CreatedAt)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"meta":{"limit":`...)
	dst = strconv.AppendInt(dst, int64(m.Limit), 10)
	dst = append(dst, `,"next":`...)
	dst = appendOptString(dst, m.Next)
	dst = append(dst, `,"has_more":`...)
	dst = strconv.AppendBool(dst, m.HasMore)
	return append(dst, "}}\n"...)
}
