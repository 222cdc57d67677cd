package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// MaxBodyBytes is the largest request body accepted (docs/api.md, Limits: 1 MiB).
const MaxBodyBytes = 1 << 20

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON encodes v fully before writing anything, so a failure to encode
// can still become a clean 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"server_error","message":"The service failed to encode its response."}}` + "\n")
	}
	setJSONHeaders(w.Header(), buf.Len())
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// jsonContentType is every JSON response's Content-Type value, one slice
// shared by all: a header's slice is only ever replaced (Set) or appended
// to (Add, which copies it, its capacity being one), never written into,
// as setCORS's shared values already assume.
var jsonContentType = []string{"application/json"}

// contentLengths holds the Content-Length value of every body shorter than
// maxSharedLength, each a one-value slice of capacity one, cut from one
// string; longer bodies get theirs formatted. GET /me's body and most
// error bodies are under 1 KiB: sharing their values saves two of a
// request's allocations (BenchmarkJSONHeaders).
const maxSharedLength = 2048

var contentLengths = func() *[maxSharedLength][1]string {
	var digits []byte
	ends := make([]int, maxSharedLength)
	for n := range maxSharedLength {
		digits = strconv.AppendInt(digits, int64(n), 10)
		ends[n] = len(digits)
	}
	all := string(digits)
	t := new([maxSharedLength][1]string)
	start := 0
	for n, end := range ends {
		t[n][0] = all[start:end]
		start = end
	}
	return t
}()

// setJSONHeaders sets a JSON body's Content-Type and Content-Length (n
// bytes), under their canonical keys: what Set does, without
// canonicalising each key again.
func setJSONHeaders(h http.Header, n int) {
	h["Content-Type"] = jsonContentType
	if n >= 0 && n < maxSharedLength {
		h["Content-Length"] = contentLengths[n][:]
	} else {
		h["Content-Length"] = []string{strconv.Itoa(n)}
	}
}

// timeFormat is how every timestamp leaves the service (wire.TimeFormat).
const timeFormat = wire.TimeFormat

func formatTime(t time.Time) string { return wire.Time(t) }

func formatTimePtr(t *time.Time) *string { return wire.TimePtr(t) }

// member is one attribute of a request object, in the order sent.
type member struct {
	name string
	raw  json.RawMessage
}

// object is a request body checked to be one JSON object whose attribute
// names are unique. Its members are found in the body again when asked for:
// holding it costs nothing per member, so a body of 100,000 attributes
// costs what its bytes do.
type object struct {
	body []byte
	text string // body as a string: names are cut from it without copying
}

// members calls yield with each member in the order sent.
func (o object) members(yield func(name string, raw json.RawMessage) bool) {
	walkObject(o.text, func(name string, start, end int) bool {
		return yield(name, o.body[start:end:end])
	})
}

// readObject reads a request body that must be one JSON object. It returns
// the body-level problem (415, 413, invalid_json) as *domain.Error, or the
// object. Duplicate attribute names are invalid JSON here: RFC 8259 leaves
// them undefined, and silently keeping one would lose data; twice counts
// them (the error lists the first maxFieldErrors).
func readObject(w http.ResponseWriter, r *http.Request) (_ object, twice int, _ *domain.Error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" || len(r.Header.Values("Content-Type")) > 1 {
		return object{}, 0, domain.Errorf(domain.CodeUnsupportedType, "Send the body as JSON with Content-Type: application/json.")
	}
	// A compressed body is an unsupported content coding (RFC 9110, 415),
	// not JSON that fails to parse.
	for _, v := range r.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return object{}, 0, domain.Errorf(domain.CodeUnsupportedType, "Compressed bodies are not accepted (Content-Encoding); send the body uncompressed.")
			}
		}
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		// The rest of the body stays unread: the connection closes after
		// the answer. net/http decides so itself only while the request it
		// passed on still holds its own body; a wrapper that replaced the
		// body in place (the tests' OpenAPI check does) made it read up to
		// 256 KiB more first, waiting for bytes that a client that
		// declared too much may never send.
		w.Header().Set("Connection", "close")
		return object{}, 0, domain.Errorf(domain.CodeFileTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
	case err != nil:
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body could not be read.")
	}
	return decodeObject(body)
}

// trustedLength is as much of a declared Content-Length as readBody
// reserves before the bytes arrive. Sizing the buffer by the declared
// length makes a body of n bytes cost n bytes, not the 2n and more of
// growing (TestHostileBodiesMemory); but the length is only a claim, and
// reserving all of it let 1,000 connections that sent headers alone hold
// 1 GB of heap until the read time-out. 64 KiB holds every body a valid
// request sends unescaped (10,000 code points of instructions at 4 bytes
// and a 200-character name: about 41 KB), so those still cost their size;
// past it the buffer doubles as bytes arrive, never beyond the declared
// length, so a client holds at most about twice what it has sent.
const trustedLength = 64 << 10

// readBody is io.ReadAll with its buffer sized by the declared length, up
// to trustedLength. A declared length over MaxBodyBytes is refused before
// anything is read, as *http.MaxBytesError: reading it waited for bytes
// that would be refused anyway, until the read time-out, and answered 400
// instead of 413.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	if declared > MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: MaxBodyBytes}
	}
	size, limit := 512, MaxBodyBytes+1 // + 1: room to find the end without growing
	if declared > 0 {
		limit = int(declared) + 1
		size = min(limit, trustedLength)
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			// Full: double, up to the limit (and past it only for a
			// reader that sends more than it declared, which r's own
			// limit then stops).
			grown := 2 * cap(b)
			if cap(b) < limit {
				grown = min(grown, limit)
			}
			b = append(make([]byte, 0, grown), b...)
		}
	}
}

// parseObject is readObject's parser, separate so it can be fuzzed.
func parseObject(body []byte) ([]member, *domain.Error) {
	o, _, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	var members []member
	for name, raw := range o.members {
		members = append(members, member{name, raw})
	}
	return members, nil
}

func decodeObject(body []byte) (object, int, *domain.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body is empty; send a JSON object.")
	}
	if !utf8.Valid(body) {
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid UTF-8.")
	}
	if !json.Valid(body) {
		if nestingDepth(body) > maxJSONDepth {
			return object{}, 0, domain.Errorf(domain.CodeInvalidJSON,
				"The request body nests arrays or objects more than %d levels deep.", maxJSONDepth)
		}
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid JSON.")
	}
	o := object{body: body, text: string(body)}
	if o.text[skipSpace(o.text, 0)] != '{' {
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body must be a JSON object.")
	}
	// Names given twice are found by sorting the names: 16 bytes a member,
	// where a map of them cost 50.
	n := 0
	walkObject(o.text, func(string, int, int) bool { n++; return true })
	if n < 2 {
		return o, 0, nil
	}
	names := make([]string, 0, n)
	walkObject(o.text, func(name string, _, _ int) bool { names = append(names, name); return true })
	slices.Sort(names)
	twice := 0
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] && (i == 1 || names[i-2] != names[i]) {
			twice++
		}
	}
	if twice == 0 {
		return o, 0, nil
	}
	// Well-formed JSON whose object repeats names: a specific attribute is
	// at fault, so errors names each, in the order they first appear, up to
	// its bound.
	var listed []string
	var fields []domain.FieldError
	walkObject(o.text, func(name string, _, _ int) bool {
		if j, _ := slices.BinarySearch(names, name); j+1 < len(names) && names[j+1] == name && !slices.Contains(listed, name) {
			listed = append(listed, name)
			shown := echo(name)
			fields = append(fields, domain.FieldError{Field: shown, Code: domain.CodeInvalidJSON,
				Message: fmt.Sprintf("The attribute %q appears more than once.", shown)})
		}
		return len(fields) < maxFieldErrors
	})
	e := &domain.Error{Code: domain.CodeInvalidJSON, Message: fields[0].Message, Fields: fields}
	switch {
	case twice > len(fields):
		e.Message = fmt.Sprintf("%d attributes appear more than once; errors lists the first %d.", twice, len(fields))
	case twice > 1:
		e.Message = fmt.Sprintf("%d attributes appear more than once; see errors.", twice)
	}
	return object{}, twice, e
}

// walkObject calls fn with the name of each member of the object s holds
// and where its value starts and ends, until fn returns false. s must be
// valid JSON (json.Valid) whose value is an object: the walk checks
// nothing, it only finds the ends of things.
func walkObject(s string, fn func(name string, start, end int) bool) {
	i := skipSpace(s, 0) + 1 // past {
	for {
		i = skipSpace(s, i)
		if s[i] == '}' {
			return
		}
		if s[i] == ',' {
			i = skipSpace(s, i+1)
		}
		end := endOfString(s, i)
		name := s[i+1 : end-1]
		if strings.IndexByte(name, '\\') >= 0 {
			name = unquote(s[i:end])
		}
		start := skipSpace(s, skipSpace(s, end)+1) // past :
		i = endOfValue(s, start)
		if !fn(name, start, i) {
			return
		}
	}
}

// unquote decodes a valid JSON string with escapes.
func unquote(quoted string) string {
	var s string
	_ = json.Unmarshal([]byte(quoted), &s) // valid JSON: it cannot fail
	return s
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index just past the JSON string that starts at i.
func endOfString(s string, i int) int {
	for i++; ; i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// maxJSONDepth is the deepest nesting encoding/json accepts (its
// scanner's limit): a body nested deeper is not valid JSON to it, and the
// error says why.
const maxJSONDepth = 10000

// nestingDepth is the deepest nesting of arrays and objects in body,
// strings skipped, whether or not body is otherwise valid JSON.
func nestingDepth(body []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// endOfValue returns the index just past the JSON value that starts at i.
func endOfValue(s string, i int) int {
	switch s[i] {
	case '"':
		return endOfString(s, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch s[i] {
			case '"':
				i = endOfString(s, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[i])) {
		i++
	}
	return i
}

// jsonKind names the JSON type of a raw value by its first byte.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "number"
}

// The two hottest responses (GET /me and the agent list) are written by the
// append encoders below rather than through encoding/json's reflection.
// They write the very bytes json.Encoder writes for the same structs
// (keyObject, collection of agentItem), newline included; json_test.go
// holds them to that.

// writeJSONBytes sends body, an already encoded JSON value.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	setJSONHeaders(w.Header(), len(body))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// appendBufPool holds encode buffers; ones grown past 64 KiB are dropped
// rather than kept for every later request.
var appendBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getAppendBuf() *[]byte { return appendBufPool.Get().(*[]byte) }

func putAppendBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		appendBufPool.Put(b)
	}
}

// appendTime appends t as formatTime writes it, quoted, by hand: the
// layout interpreter of AppendFormat was most of a list page's encoding.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, timeFormat)
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

// appendStrings appends list as encoding/json does: null when nil.
func appendStrings(dst []byte, list []string) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
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
