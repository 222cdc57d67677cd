package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The contract's error codes; clients branch on Error.Code.
const (
	CodeMissingField       = "missing_field"
	CodeInvalidValue       = "invalid_value"
	CodeDatatypeMismatch   = "datatype_mismatch"
	CodeInvalidField       = "invalid_field"
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidCredentials = "invalid_credentials"
	CodeTokenExpired       = "token_expired"
	CodeAccessDenied       = "access_denied"
	CodeFeatureNotEnabled  = "feature_not_enabled"
	CodeNotFound           = "not_found"
	CodeDuplicateValue     = "duplicate_value"
	CodeImmutableState     = "immutable_state"
	CodeInconsistentState  = "inconsistent_state"
	CodeFileTooLarge       = "file_too_large"
	CodeUnsupportedType    = "unsupported_type"
	CodeRateLimitExceeded  = "rate_limit_exceeded"
	CodeServerError        = "server_error"
)

// Error is an answer of the API other than 2xx: the contract's error
// envelope plus what the response's headers said. Use errors.As to get it.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is error.code, for example "not_found". A non-2xx response that
	// did not carry the API's envelope (a proxy's 502 page, say) has
	// server_error for a 5xx and an empty Code otherwise.
	Code string
	// Message is error.message, a human-readable sentence.
	Message string
	// Errors lists the fields at fault, when specific fields are.
	Errors []FieldError
	// ExistingID is the record already holding the value, on 409 duplicate_value.
	ExistingID string
	// RequestID is the X-Request-Id header; quote it to support.
	RequestID string
	// RetryAfter is the Retry-After header (on 429), zero when absent or
	// unusable: not in the future, or more than 24 hours away.
	RetryAfter time.Duration
	// RateLimit holds the X-RateLimit-* headers.
	RateLimit RateLimit
}

// FieldError is one entry of error.errors.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RateLimit is what the X-RateLimit-* headers said. Zero values mean the
// header was absent.
type RateLimit struct {
	Limit     int       // requests allowed per minute for the key
	Remaining int       // requests left in the current window
	Reset     time.Time // when the oldest counted request leaves the window
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentapi: %d", e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if len(e.Errors) > 0 {
		fields := make([]string, len(e.Errors))
		for i, f := range e.Errors {
			fields[i] = f.Field + ": " + f.Code
		}
		b.WriteString(" [" + strings.Join(fields, "; ") + "]")
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// IsCode reports whether err is, or wraps, an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// parseError builds the *Error of a non-2xx response.
func parseError(status int, h http.Header, body []byte) *Error {
	e := &Error{
		StatusCode: status, RequestID: h.Get("X-Request-Id"),
		RetryAfter: parseRetryAfter(h.Get("Retry-After")), RateLimit: parseRateLimit(h),
	}
	// Each field is read on its own, so one field of an unexpected type
	// does not hide the code that callers branch on.
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		str := func(name string) string {
			var s string
			_ = json.Unmarshal(env.Error[name], &s)
			return s
		}
		if code := str("code"); code != "" {
			e.Code, e.Message, e.ExistingID = code, str("message"), str("existing_id")
			_ = json.Unmarshal(env.Error["errors"], &e.Errors)
			return e
		}
	}
	if status >= 500 {
		e.Code = CodeServerError
	}
	e.Message = fmt.Sprintf("unexpected %d %s response without the API's error envelope", status, http.StatusText(status))
	return e
}
