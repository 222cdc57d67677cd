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

// writeAgentPage sends a page of the agent list.
func writeAgentPage(w http.ResponseWriter, agents []store.AgentItem, m meta) {
	buf := appendBufPool.Get().(*[]byte)
	*buf = appendAgentPage((*buf)[:0], agents, m)
	writeJSONBytes(w, http.StatusOK, *buf)
	if cap(*buf) <= 64<<10 {
		appendBufPool.Put(buf)
	}
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

// htmlSafe marks the ASCII bytes encoding/json writes unescaped (it
// escapes <, > and & for HTML, as json.Encoder does by default).
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string exactly as encoding/json does:
// short escapes for \b \f \n \r \t " \, \u00XX for other control bytes and
// <, >, &; invalid UTF-8 as \ufffd; U+2028 and U+2029 escaped.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
