package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
)

// precedence is the order of validation failures (docs/api.md, Order of
// checks, step 8): when several apply, error.code is the earliest of them
// and error.errors lists them all.
var precedence = []domain.Code{
	domain.CodeInvalidField, // unknown query parameter (and, after the body checks, unknown attribute)
	domain.CodeUnsupportedType,
	domain.CodeFileTooLarge,
	domain.CodeInvalidJSON,
	domain.CodeMissingField,
	domain.CodeDatatypeMismatch,
	domain.CodeInvalidValue,
}

// maxFieldErrors bounds error.errors (docs/api.md, Errors); the
// message says how many problems there were in all.
const maxFieldErrors = 20

// maxEchoRunes bounds a name the client made up (an unknown parameter or
// attribute) where an entry repeats it: 20 entries stay under 16 KiB even
// when every character takes JSON's longest escape.
const maxEchoRunes = 32

// problems collects what is wrong with a request before its handler runs.
// However many problems a request has, only maxFieldErrors of them are
// kept, and nothing is built for the rest: they are only counted.
type problems struct {
	fields []domain.FieldError // the first maxFieldErrors problems found
	count  int                 // every problem added, kept or not
	// spilled is the first problem of each code found after fields was
	// full, when fields has none of that code: error.code may be it.
	spilled []domain.FieldError
	body    *domain.Error // the body-level failure, if any
	twice   int           // attributes given more than once (body lists the first of them)
}

func (p *problems) add(field string, code domain.Code, format string, args ...any) {
	if p.skip(code) {
		return
	}
	p.count++
	fe := domain.FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
	if len(p.fields) < maxFieldErrors {
		p.fields = append(p.fields, fe)
	} else {
		p.spilled = append(p.spilled, fe)
	}
}

// skip reports whether a problem of code would not be kept (fields is
// full and already has one of code), and if so counts it. A loop over what
// a client sent asks before it formats a message that nobody would read.
func (p *problems) skip(code domain.Code) bool {
	if len(p.fields) < maxFieldErrors {
		return false
	}
	if _, ok := p.first(code); ok {
		p.count++
		return true
	}
	return false
}

// first is the first problem of code found, kept in fields or spilled.
func (p *problems) first(code domain.Code) (domain.FieldError, bool) {
	for _, list := range [][]domain.FieldError{p.fields, p.spilled} {
		if i := slices.IndexFunc(list, func(f domain.FieldError) bool { return f.Code == code }); i >= 0 {
			return list[i], true
		}
	}
	return domain.FieldError{}, false
}

// err returns nil when the request is valid, else the single envelope that
// reports it.
func (p *problems) err() error {
	if p.count == 0 && p.body == nil {
		return nil
	}
	all, total := p.entries()
	e := &domain.Error{Code: domain.CodeInvalidValue, Message: "The request is not valid."}
	lead := p.headline(e, total)
	e.Fields = clipEntries(all, lead)
	return e
}

// entries lists the problems in the order the checks ran: the query's
// first, then the body's (an attribute given twice). total counts every
// problem, kept or not.
func (p *problems) entries() (all []domain.FieldError, total int) {
	all = p.fields
	total = p.count + p.twice
	if p.body != nil && len(p.body.Fields) > 0 {
		all = append(slices.Clip(p.fields), p.body.Fields...)
		total = max(total, len(all))
	}
	return all, total
}

// headline sets e's code and message from the earliest problem in
// precedence order, and returns the entry they come from (nil when it is
// a body-level failure without entries).
func (p *problems) headline(e *domain.Error, total int) *domain.FieldError {
	for _, code := range precedence {
		if p.body != nil && p.body.Code == code {
			e.Code, e.Message = code, p.body.Message
			if len(p.body.Fields) > 0 {
				return &p.body.Fields[0]
			}
			return nil
		}
		if f, ok := p.first(code); ok {
			e.Code, e.Message = code, summary(f.Message, total)
			return &f
		}
	}
	return nil
}

// summary is error.message when the first of total problems says msg:
// msg itself when it is the only one, else msg and how many more.
func summary(msg string, total int) string {
	if total <= 1 {
		return msg
	}
	more := "problems"
	if total == 2 {
		more = "problem"
	}
	see := "see errors"
	if total > maxFieldErrors {
		see = fmt.Sprintf("errors lists the first %d", maxFieldErrors)
	}
	return fmt.Sprintf("%s (and %d more %s; %s)", strings.TrimSuffix(msg, "."), total-1, more, see)
}

// clipEntries keeps the first maxFieldErrors entries of all; the entry
// that gave error.code (lead) is listed, whatever came first.
func clipEntries(all []domain.FieldError, lead *domain.FieldError) []domain.FieldError {
	if len(all) <= maxFieldErrors {
		return all
	}
	all = slices.Clone(all[:maxFieldErrors])
	if lead != nil && !slices.Contains(all, *lead) {
		all[maxFieldErrors-1] = *lead
	}
	return all
}

// echo is a name the client made up, as an entry names it: text JSON can
// carry (bytes that are not UTF-8 become U+FFFD, as JSON would show them)
// and at most maxEchoRunes characters.
func echo(name string) string {
	return clipRunes(strings.ToValidUTF8(name, "\uFFFD"), maxEchoRunes)
}

// query checks the query string against the parameters the route accepts:
// unknown ones are invalid_field, repeated ones invalid_value. It returns the
// single value of each accepted parameter that was given. Entries follow the
// order of the query string, so error.errors is stable.
func (p *problems) query(r *http.Request, allowed ...string) map[string]string {
	params, ok := parseQuery(r.URL.RawQuery)
	if !ok {
		p.add("query", domain.CodeInvalidValue, "The query string is not valid URL encoding.")
	}
	out := make(map[string]string, len(allowed))
	count := make(map[string]int)
	var repeated []string
	for _, q := range params {
		count[q.name]++
		switch {
		case !slices.Contains(allowed, q.name):
			if count[q.name] == 1 && !p.skip(domain.CodeInvalidField) {
				name := echo(q.name)
				p.add(name, domain.CodeInvalidField, "%q is not a query parameter of this endpoint.", name)
			}
		case count[q.name] == 2:
			repeated = append(repeated, q.name)
			delete(out, q.name)
		case count[q.name] == 1:
			out[q.name] = q.value
		}
	}
	// Repeated parameters come last in the order of docs/api.md.
	for _, name := range repeated {
		p.add(name, domain.CodeInvalidValue, "The query parameter %q is given more than once.", name)
	}
	return out
}

type queryParam struct{ name, value string }

// parseQuery splits a raw query string in order. Unlike url.ParseQuery it
// keeps the order, and it reports (rather than drops) undecodable parts.
func parseQuery(raw string) (params []queryParam, ok bool) {
	ok = true
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		if strings.Contains(part, ";") {
			ok = false
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		n, err1 := url.QueryUnescape(name)
		v, err2 := url.QueryUnescape(value)
		if err1 != nil || err2 != nil {
			ok = false
			continue
		}
		params = append(params, queryParam{n, v})
	}
	return params, ok
}

// object reads the body and checks its attribute names against the route's
// contract; it returns the allowed members by name.
func (p *problems) object(w http.ResponseWriter, r *http.Request, allowed ...string) map[string]json.RawMessage {
	body, twice, bodyErr := readObject(w, r)
	if bodyErr != nil {
		p.body, p.twice = bodyErr, twice
		return nil
	}
	out := make(map[string]json.RawMessage, len(allowed))
	decided := false
	for quoted, raw := range body.members {
		if decided {
			p.countMember(body, quoted, raw, allowed, out)
			continue
		}
		if i := body.index(quoted, allowed); i >= 0 {
			out[allowed[i]] = raw
		} else if !p.skip(domain.CodeInvalidField) {
			name := echo(unquote(quoted))
			p.add(name, domain.CodeInvalidField, "%q is not an attribute of this request.", name)
			_, has := p.first(domain.CodeInvalidField)
			decided = len(p.fields) == maxFieldErrors && has
		}
	}
	if body.crowded && p.count == 0 {
		// Over maxMembers attributes, every one of the route's: names
		// repeated, which were not looked for.
		p.body = domain.Errorf(domain.CodeInvalidJSON,
			"The request body's object has more than %d attributes; its attributes repeat.", maxMembers)
		return nil
	}
	return out
}

// countMember reads a member once the answer is decided (error.errors
// holds maxFieldErrors entries, an unknown attribute among them, so
// error.code is invalid_field and nothing read later is listed): an
// unknown attribute is only counted, for the message, and an allowed one
// kept, for the checks that count what else is wrong; neither costs more
// than comparing its name (plainIndex), and no message is made.
func (p *problems) countMember(body object, quoted, raw []byte, allowed []string, out map[string]json.RawMessage) {
	if i := body.plainIndex(quoted, allowed); i >= 0 {
		out[allowed[i]] = raw
	} else {
		p.count++
	}
}

// name validates a required name attribute: null counts as absent.
func (p *problems) name(obj map[string]json.RawMessage, field string, required bool) (string, bool) {
	raw, present := obj[field]
	if !present || jsonKind(raw) == "null" {
		if required && obj != nil {
			p.add(field, domain.CodeMissingField, "%s is required.", field)
		}
		return "", false
	}
	if longJSON(raw, maxNameJSON) {
		p.add(field, domain.CodeInvalidValue, "%s", domain.NameTooLong.Message(field))
		return "", false
	}
	s, ok := p.str(raw, field)
	if !ok {
		return "", false
	}
	s, problem := domain.CheckName(s)
	if problem != domain.NameOK {
		p.add(field, domain.CodeInvalidValue, "%s", problem.Message(field))
		return "", false
	}
	return s, true
}

// text validates an optional free-text attribute that may span lines.
func (p *problems) text(obj map[string]json.RawMessage, field string, max int, required bool) (string, bool) {
	raw, present := obj[field]
	if !present || (required && jsonKind(raw) == "null") {
		if required && obj != nil {
			p.add(field, domain.CodeMissingField, "%s is required.", field)
		}
		return "", false
	}
	if longJSON(raw, 12*max+2) { // a character is at most 12 bytes of JSON (\uD83D\uDE00)
		p.add(field, domain.CodeInvalidValue, "%s must be at most %d characters.", field, max)
		return "", false
	}
	s, ok := p.str(raw, field)
	if !ok {
		return "", false
	}
	switch {
	case required && strings.TrimSpace(s) == "":
		p.add(field, domain.CodeInvalidValue, "%s must not be blank.", field)
	case domain.CheckText(s, max) == domain.TextTooLong:
		p.add(field, domain.CodeInvalidValue, "%s must be at most %d characters.", field, max)
	case domain.CheckText(s, max) == domain.TextControl:
		p.add(field, domain.CodeInvalidValue, "%s must not contain control characters other than line breaks and tabs.", field)
	default:
		return s, true
	}
	return "", false
}

// maxNameJSON bounds the JSON text of a name that is decoded: a name is
// counted after trimming, so its text may be longer than 200 characters
// of 12 bytes, but not without bound (docs/api.md: a request costs at most
// 256 KiB beyond its body).
const maxNameJSON = 16 << 10

// longJSON reports a JSON string whose text is longer than n bytes, which
// is refused without being decoded (decoding would cost its length again).
func longJSON(raw json.RawMessage, n int) bool {
	return jsonKind(raw) == "string" && len(raw) > n
}

// str decodes a string attribute. encoding/json turns an escaped UTF-16
// surrogate that is not half of a pair ("\ud800") into U+FFFD; that would
// store something other than what was sent, so it is refused instead.
func (p *problems) str(raw json.RawMessage, field string) (string, bool) {
	var s string
	if jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		p.add(field, domain.CodeDatatypeMismatch, "%s must be a string.", field)
		return "", false
	}
	if strings.ContainsRune(s, utf8.RuneError) && loneSurrogate(raw) {
		p.add(field, domain.CodeInvalidValue, `%s must not contain an unpaired UTF-16 surrogate escape (\uD800 to \uDFFF).`, field)
		return "", false
	}
	return s, true
}

// loneSurrogate reports whether the JSON string raw, valid JSON, has a \u
// escape of a surrogate that is not half of a pair: unescape decodes it
// as U+FFFD, which an escape of U+FFFD itself is not.
func loneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, n := unescape(raw[i:])
		if r == utf8.RuneError && utf16.IsSurrogate(hex4(raw[i+2:])) {
			return true
		}
		i += n - 1
	}
	return false
}

// hex4 decodes the four hexadecimal digits that b, valid JSON after \u,
// starts with.
func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v)
}

// boolean validates a required boolean: anything but true or false, null
// included, is invalid_value (the contract's rule 3).
func (p *problems) boolean(obj map[string]json.RawMessage, field string) (bool, bool) {
	raw, present := obj[field]
	if !present {
		if obj != nil {
			p.add(field, domain.CodeMissingField, "%s is required.", field)
		}
		return false, false
	}
	if jsonKind(raw) != "boolean" { // then raw is true or false: valid JSON
		p.add(field, domain.CodeInvalidValue, "%s must be true or false.", field)
		return false, false
	}
	return raw[0] == 't', true
}
