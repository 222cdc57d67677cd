package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/domain"
)

// MaxBodyBytes is the largest request body accepted (docs/api.md, Limits: 1 MiB).
const MaxBodyBytes = 1 << 20

// writeJSON sends v as JSON. Every v is the wire types, errorBody, maps
// of strings or secret-scanning answers: strings, numbers and booleans,
// which json.Marshal cannot fail to encode.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	writeJSONBytes(w, status, append(body, '\n'))
}

// writeJSONBytes sends body, an already encoded JSON value.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// object is a request body checked to be one JSON object whose attribute
// names are unique. Its members are found in the body again when asked
// for, and names are known by a hash of their text (seeded per body, so
// no client can aim at a collision): holding and checking it costs
// nothing per member, so a body of 128,000 attributes costs its bytes and
// at most namesPerPass hashes. A json.Decoder token walk allocated 30 MiB
// for that body (a string and an interface a token); TestHostileBodyCost
// holds the bound of docs/api.md.
type object struct {
	body []byte
	hash *maphash.Hash // seeded once per body
	// crowded: more members than maxMembers, whose names were not checked
	// for repeats (problems.object refuses it whatever they are).
	crowded bool
}

// maxMembers is the most attributes a body's object may have for its
// names to be checked for repeats: no request takes more than a handful,
// so a body with more is refused whatever they are, and each of the rest
// costs only its counting (docs/api.md, Limits).
const maxMembers = 1000

// members calls yield with each member's quoted name and value, in the
// order sent.
func (o object) members(yield func(quoted []byte, raw json.RawMessage) bool) {
	walkObject(o.body, func(quoted, raw []byte, _ int) bool { return yield(quoted, raw) })
}

// index is the position in names of the member name quoted, or -1.
func (o object) index(quoted []byte, names []string) int {
	if nameHashed != nil {
		nameHashed()
	}
	h := hashName(o.hash, quoted)
	for i, n := range names {
		if maphash.String(o.hash.Seed(), n) == h {
			return i
		}
	}
	return -1
}

// nameHashed, when a test sets it, is called each time index hashes a
// name: the work a body's members cost beyond walking its bytes.
var nameHashed func()

// plainIndex is index for a member read only to be counted, once the
// answer is decided (problems.object): a name without escapes is compared
// as it is, and one with escapes too long to spell any of names (a
// character is at most 6 bytes escaped, and names are ASCII) is none of
// them, so that only a short escaped name is hashed.
func (o object) plainIndex(quoted []byte, names []string) int {
	s := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		for i, n := range names {
			if string(s) == n { // compared without a copy
				return i
			}
		}
		return -1
	}
	for _, n := range names {
		if len(s) <= 6*len(n) {
			return o.index(quoted, names)
		}
	}
	return -1
}

// heldBody is a request body read whole (withBody) for Idempotency-Key and
// the handler to share: err is what reading it met.
type heldBody struct {
	io.ReadCloser
	b   []byte
	err error
}

// withBody reads a request's body before Idempotency-Key and the handler,
// under the budget of bodies read and decoded at once (Config.Bodies),
// reserved as the bytes arrive and held until the handler returns. The
// body is its account's, or without a key its client address's: an owner
// that stays at its share of the budget for the whole wait is refused
// with 429, and a body that finds the budget full with 503 (docs/api.md,
// Limits). Either way the rest of the body stays unread and the
// connection closes.
func (s *Server) withBody(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		hold := s.bodies.Hold(bodyOwner(r))
		defer hold.Release()
		b, err := readBody(r.Context(), hold, http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
		switch {
		case errors.Is(err, bodybudget.ErrShare):
			w.Header().Set("Connection", "close")
			return &retryLater{status: http.StatusTooManyRequests, after: 1, err: domain.Errorf(domain.CodeRateLimitExceeded,
				"This account is sending as many request bodies at once as it may; retry after 1 second.")}
		case errors.Is(err, bodybudget.ErrBusy):
			w.Header().Set("Connection", "close")
			return busy("The service is reading as many request bodies as it can hold; retry after 1 second.")
		}
		r.Body = &heldBody{ReadCloser: r.Body, b: b, err: err}
		return next(w, r)
	}
}

// bodyOwner names whose share of the body budget r's body counts in: its
// key's account, or the client address (an IPv6 client's /64) of a
// request without one.
func bodyOwner(r *http.Request) string {
	rec := r.Context().Value(ctxLogAttrs).(*recorder)
	if id := rec.auth.key.AccountID; id != "" {
		return "account:" + id
	}
	return "addr:" + clientaddr.Group(rec.client)
}

// bodyOf is r's body as withBody held it: every route that reads a body
// runs under withBody.
func bodyOf(r *http.Request) ([]byte, error) {
	h := r.Body.(*heldBody)
	return h.b, h.err
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
	if compressed(r.Header) {
		return object{}, 0, domain.Errorf(domain.CodeUnsupportedType, "Compressed bodies are not accepted (Content-Encoding); send the body uncompressed.")
	}
	body, err := bodyOf(r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		// The rest of the body stays unread: the connection closes after
		// the answer, rather than wait for bytes that a client that
		// declared too much may never send.
		w.Header().Set("Connection", "close")
		return object{}, 0, domain.Errorf(domain.CodeFileTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
	case err != nil:
		return object{}, 0, domain.Errorf(domain.CodeInvalidJSON, "The request body could not be read.")
	}
	return decodeObject(body)
}

// readBody reads a body of at most MaxBodyBytes under hold
// (bodybudget.Hold.Read: the reservation grows as the bytes arrive). A
// declared length over MaxBodyBytes is refused before anything is read,
// as *http.MaxBytesError: reading it waited for bytes that would be
// refused anyway, until the read time-out, and answered 400 instead of 413.
func readBody(ctx context.Context, hold *bodybudget.Hold, r io.Reader, declared int64) ([]byte, error) {
	if declared > MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: MaxBodyBytes}
	}
	return hold.Read(ctx, r, declared, MaxBodyBytes)
}

func decodeObject(body []byte) (object, int, *domain.Error) {
	if err := checkJSON(body); err != nil {
		return object{}, 0, err
	}
	o := object{body: body, hash: new(maphash.Hash)}
	n := 0
	walkObject(body, func([]byte, []byte, int) bool { n++; return true })
	if n > maxMembers {
		o.crowded = true
		return o, 0, nil
	}
	twice, firsts := duplicates(o, n)
	if twice == 0 {
		return o, 0, nil
	}
	// Well-formed JSON whose object repeats names: a specific attribute is
	// at fault, so errors names each, in the order they first appear, up to
	// its bound.
	var fields []domain.FieldError
	for _, at := range firsts {
		shown := echo(unquote(body[at:endOfString(body, at)]))
		fields = append(fields, domain.FieldError{Field: shown, Code: domain.CodeInvalidJSON,
			Message: fmt.Sprintf("The attribute %q appears more than once.", shown)})
	}
	e := &domain.Error{Code: domain.CodeInvalidJSON, Message: fields[0].Message, Fields: fields}
	switch {
	case twice > len(fields):
		e.Message = fmt.Sprintf("%d attributes appear more than once; errors lists the first %d.", twice, len(fields))
	case twice > 1:
		e.Message = fmt.Sprintf("%d attributes appear more than once; see errors.", twice)
	}
	return object{}, twice, e
}

// checkJSON refuses a body that is not one JSON object of UTF-8 text.
func checkJSON(body []byte) *domain.Error {
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		return domain.Errorf(domain.CodeInvalidJSON, "The request body is empty; send a JSON object.")
	case len(body) > MaxBodyBytes:
		return domain.Errorf(domain.CodeFileTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
	case !utf8.Valid(body):
		return domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid UTF-8.")
	case nestingDepth(body) > maxJSONDepth: // asked first: encoding/json's scanner would grow a stack to find it
		return domain.Errorf(domain.CodeInvalidJSON,
			"The request body nests arrays or objects more than %d levels deep.", maxJSONDepth)
	case !json.Valid(body):
		return domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid JSON.")
	case body[skipSpace(body, 0)] != '{':
		return domain.Errorf(domain.CodeInvalidJSON, "The request body must be a JSON object.")
	}
	return nil
}

// namesPerPass bounds the names whose hashes duplicates sorts at once:
// 128 KiB of them.
const namesPerPass = 16 << 10

// offsetBits hold a name's offset in the body (at most MaxBodyBytes)
// below its hash's top bits, so that one sort finds both the names given
// twice and where each first appears.
const offsetBits = 20

// duplicates counts the names given more than once in o (of n members),
// and finds the offsets of the first maxFieldErrors of them in the order
// they first appear. The hashes are sorted in passes, each over the names
// whose hash falls in its share, so that no shape of body costs more than
// namesPerPass of them.
func duplicates(o object, n int) (twice int, firsts []int) {
	passes := uint64(n/namesPerPass + 1)
	buf := make([]uint64, 0, min(n, namesPerPass+namesPerPass/4))
	for pass := range passes {
		buf = buf[:0]
		walkObject(o.body, func(quoted, _ []byte, at int) bool {
			if h := hashName(o.hash, quoted); h%passes == pass {
				if len(buf) == cap(buf) {
					buf = twoEach(buf)
				}
				buf = append(buf, h>>offsetBits<<offsetBits|uint64(at))
			}
			return true
		})
		slices.Sort(buf)
		t, f := repeated(buf)
		twice += t
		firsts = append(firsts, f...)
		slices.Sort(firsts)
		firsts = firsts[:min(len(firsts), maxFieldErrors)]
	}
	return twice, firsts
}

// twoEach sorts buf and keeps the first two entries of each hash: all
// that repeated needs, so that one name given many times fills no more.
func twoEach(buf []uint64) []uint64 {
	slices.Sort(buf)
	kept := 0
	for i, v := range buf {
		if kept < 2 || v>>offsetBits != buf[kept-2]>>offsetBits {
			buf[kept] = buf[i]
			kept++
		}
	}
	return buf[:kept]
}

// repeated counts the hashes given more than once in sorted, and finds
// where the first maxFieldErrors of them (by offset) first appear.
func repeated(sorted []uint64) (twice int, firsts []int) {
	const mask = 1<<offsetBits - 1
	out := make([]int, 0, maxFieldErrors)
	for i := 1; i < len(sorted); i++ {
		h := sorted[i] >> offsetBits
		if h != sorted[i-1]>>offsetBits || i > 1 && h == sorted[i-2]>>offsetBits {
			continue
		}
		twice++
		if at := int(sorted[i-1] & mask); len(out) < maxFieldErrors {
			out = append(out, at)
		} else if j := slices.Index(out, slices.Max(out)); at < out[j] {
			out[j] = at
		}
	}
	return twice, out
}

// walkObject calls fn with the quoted name of each member of the object
// b holds, its value, and where the name starts, until fn returns false.
// b must be valid JSON (json.Valid) whose value is an object: the walk
// checks nothing, it only finds the ends of things.
func walkObject(b []byte, fn func(quoted, raw []byte, at int) bool) {
	i := skipSpace(b, 0) + 1 // past {
	for {
		i = skipSpace(b, i)
		if b[i] == '}' {
			return
		}
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		at, end := i, endOfString(b, i)
		start := skipSpace(b, skipSpace(b, end)+1) // past :
		i = endOfValue(b, start)
		if !fn(b[at:end], b[start:i:i], at) {
			return
		}
	}
}

// hashName hashes the text of a quoted JSON name, escapes decoded, so
// that names equal as text hash equal however they were written.
func hashName(h *maphash.Hash, quoted []byte) uint64 {
	s := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return maphash.Bytes(h.Seed(), s)
	}
	h.Reset()
	for i := bytes.IndexByte(s, '\\'); i >= 0; i = bytes.IndexByte(s, '\\') {
		_, _ = h.Write(s[:i])
		r, n := unescape(s[i:])
		if r < utf8.RuneSelf {
			_ = h.WriteByte(byte(r))
		} else {
			_, _ = h.WriteString(string(r))
		}
		s = s[i+n:]
	}
	_, _ = h.Write(s)
	return h.Sum64()
}

// unescape decodes the escape that s, text of a valid JSON string,
// starts with: its character and its length. A surrogate that is not
// half of a pair is U+FFFD, as encoding/json decodes it.
func unescape(s []byte) (rune, int) {
	if s[1] != 'u' {
		return rune("\"\\/\b\f\n\r\t"[strings.IndexByte(`"\/bfnrt`, s[1])]), 2
	}
	v := hex4(s[2:])
	if !utf16.IsSurrogate(v) {
		return v, 6
	}
	if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if w := hex4(s[8:]); utf16.DecodeRune(v, w) != utf8.RuneError {
			return utf16.DecodeRune(v, w), 12
		}
	}
	return utf8.RuneError, 6
}

// unquote decodes a valid quoted JSON string.
func unquote(quoted []byte) string {
	var s string
	_ = json.Unmarshal(quoted, &s) // valid JSON: it cannot fail
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index just past the JSON string that starts at i.
func endOfString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
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
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = endOfString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !endsScalar[b[i]] {
		i++
	}
	return i
}

// endsScalar marks the bytes that end a number, true, false or null: a
// table, as a search of the seven for each byte cost a fifth of a body
// of unknown attributes' CPU.
var endsScalar = [256]bool{',': true, '}': true, ']': true, ' ': true, '\t': true, '\r': true, '\n': true}

// jsonKind names the JSON type of a member's value by its first byte
// (walkObject's values start at it: no space before).
func jsonKind(raw json.RawMessage) string {
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
