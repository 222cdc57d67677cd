package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
)

// precedence is decisions.md's order of validation failures: when several
// apply, error.code is the earliest of them and error.errors lists them all.
var precedence = []domain.Code{
	domain.CodeInvalidField, // unknown query parameter (and, after the body checks, unknown attribute)
	domain.CodeUnsupportedType,
	domain.CodeFileTooLarge,
	domain.CodeInvalidJSON,
	domain.CodeMissingField,
	domain.CodeDatatypeMismatch,
	domain.CodeInvalidValue,
}

// problems collects what is wrong with a request before its handler runs.
type problems struct {
	fields []domain.FieldError
	body   *domain.Error // the body-level failure, if any
}

func (p *problems) add(field string, code domain.Code, format string, args ...any) {
	p.fields = append(p.fields, domain.FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)})
}

// err returns nil when the request is valid, else the single envelope that
// reports it.
func (p *problems) err() error {
	if len(p.fields) == 0 && p.body == nil {
		return nil
	}
	// The query's problems come first, then the body's (an attribute given
	// twice), as the checks run.
	all := p.fields
	if p.body != nil && len(p.body.Fields) > 0 {
		all = append(slices.Clip(p.fields), p.body.Fields...)
	}
	for _, code := range precedence {
		if p.body != nil && p.body.Code == code {
			return &domain.Error{Code: code, Message: p.body.Message, Fields: all}
		}
		for _, f := range p.fields {
			if f.Code == code {
				msg := f.Message
				if len(all) > 1 {
					more := "problems"
					if len(all) == 2 {
						more = "problem"
					}
					msg = fmt.Sprintf("%s (and %d more %s; see errors)", strings.TrimSuffix(msg, "."), len(all)-1, more)
				}
				return &domain.Error{Code: code, Message: msg, Fields: all}
			}
		}
	}
	return &domain.Error{Code: domain.CodeInvalidValue, Message: "The request is not valid.", Fields: all}
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
	out := make(map[string]string, len(params))
	count := make(map[string]int, len(params))
	var repeated []string
	for _, q := range params {
		count[q.name]++
		switch {
		case !slices.Contains(allowed, q.name):
			if count[q.name] == 1 {
				// As JSON will show it: bytes that are not UTF-8 become
				// U+FFFD in the field, and so in the message.
				name := strings.ToValidUTF8(q.name, "\uFFFD")
				p.add(name, domain.CodeInvalidField, "%q is not a query parameter of this endpoint.", name)
			}
		case count[q.name] == 2:
			repeated = append(repeated, q.name)
			delete(out, q.name)
		case count[q.name] == 1:
			out[q.name] = q.value
		}
	}
	// Repeated parameters come last in decisions.md's order.
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
	members, bodyErr := readObject(w, r)
	if bodyErr != nil {
		p.body = bodyErr
		return nil
	}
	out := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		if !slices.Contains(allowed, m.name) {
			p.add(m.name, domain.CodeInvalidField, "%q is not an attribute of this request.", m.name)
			continue
		}
		out[m.name] = m.raw
	}
	return out
}

// MaxAgentNameLength and friends bound user text (decisions.md).
const (
	MaxAgentNameLength    = domain.MaxAgentNameLength
	MaxInstructionsLength = domain.MaxInstructionsLength
	MaxQuestionLength     = domain.MaxQuestionLength
)

// name validates a required name attribute: null counts as absent.
func (p *problems) name(obj map[string]json.RawMessage, field string, required bool) (string, bool) {
	raw, present := obj[field]
	if !present || jsonKind(raw) == "null" {
		if required && obj != nil {
			p.add(field, domain.CodeMissingField, "%s is required.", field)
		}
		return "", false
	}
	s, ok := p.str(raw, field)
	if !ok {
		return "", false
	}
	s, problem := domain.CheckName(s)
	switch problem {
	case domain.NameOK:
		return s, true
	case domain.NameBlank:
		p.add(field, domain.CodeInvalidValue, "%s must not be blank.", field)
	case domain.NameTooLong:
		p.add(field, domain.CodeInvalidValue, "%s must be at most %d characters.", field, domain.MaxNameLength)
	case domain.NameControl:
		p.add(field, domain.CodeInvalidValue, "%s must not contain control characters.", field)
	case domain.NameInvisible:
		p.add(field, domain.CodeInvalidValue, "%s must contain a visible character: bidirectional controls, zero-width characters and combining marks alone are not a name.", field)
	default: // NameNotUTF8: str decoded JSON, which is always UTF-8.
		p.add(field, domain.CodeInvalidValue, "%s must be UTF-8 text.", field)
	}
	return "", false
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

// loneSurrogate reports whether the JSON string raw has a \u escape of a
// surrogate that is not a high one followed at once by a low one.
func loneSurrogate(raw []byte) bool {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		var v rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				v = v<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return v, true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character: \\ and \" are skipped whole
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		v, ok := hex4(raw[i+1:])
		if !ok {
			return false // not JSON; Unmarshal refused it already
		}
		i += 4
		switch {
		case v >= 0xDC00 && v <= 0xDFFF:
			return true
		case v >= 0xD800 && v <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return true
			}
			if w, ok := hex4(raw[i+3:]); !ok || w < 0xDC00 || w > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
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
	var b bool
	if jsonKind(raw) != "boolean" || json.Unmarshal(raw, &b) != nil {
		p.add(field, domain.CodeInvalidValue, "%s must be true or false.", field)
		return false, false
	}
	return b, true
}
