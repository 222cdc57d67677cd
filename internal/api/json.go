package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
)

// MaxBodyBytes is the largest request body accepted (decisions.md: 1 MiB).
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
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// timeFormat is how every timestamp leaves the service: RFC 3339, UTC,
// millisecond precision (what the store keeps), ending in Z.
const timeFormat = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// member is one attribute of a request object, in the order sent.
type member struct {
	name string
	raw  json.RawMessage
}

// readObject reads a request body that must be one JSON object. It returns
// the body-level problem (415, 413, invalid_json) as *domain.Error, or the
// object's members. Duplicate attribute names are invalid JSON here: RFC 8259
// leaves them undefined, and silently keeping one would lose data.
func readObject(w http.ResponseWriter, r *http.Request) ([]member, *domain.Error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" || len(r.Header.Values("Content-Type")) > 1 {
		return nil, domain.Errorf(domain.CodeUnsupportedType, "Send the body as JSON with Content-Type: application/json.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, domain.Errorf(domain.CodeFileTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
	case err != nil:
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The request body could not be read.")
	}
	return parseObject(body)
}

// parseObject is readObject's parser, separate so it can be fuzzed.
func parseObject(body []byte) ([]member, *domain.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The request body is empty; send a JSON object.")
	}
	if !utf8.Valid(body) {
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid UTF-8.")
	}
	bad := func() ([]member, *domain.Error) {
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The request body is not valid JSON.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return bad()
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The request body must be a JSON object.")
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad()
		}
		name, ok := tok.(string)
		if !ok {
			return bad()
		}
		if seen[name] {
			return nil, domain.Errorf(domain.CodeInvalidJSON, "The attribute %q appears more than once.", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bad()
		}
		members = append(members, member{name: name, raw: raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bad()
	}
	if _, err := dec.Token(); err != io.EOF { // nothing may follow the object
		return bad()
	}
	return members, nil
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
