// Package domain holds agentapi's vocabulary: accounts, users, API keys,
// scopes, AI agents, and the contract's error codes. It does no I/O and knows
// nothing of HTTP or SQL; the store, the API and the CLI all speak it.
package domain

import (
	"errors"
	"fmt"
)

// Code is one of the contract's stable, machine-readable error codes.
type Code string

// The contract's error table, in its order. HTTP statuses live in the API
// package; the store and services only ever name a Code.
const (
	CodeMissingField       Code = "missing_field"
	CodeInvalidValue       Code = "invalid_value"
	CodeDatatypeMismatch   Code = "datatype_mismatch"
	CodeInvalidField       Code = "invalid_field"
	CodeInvalidJSON        Code = "invalid_json"
	CodeInvalidCredentials Code = "invalid_credentials"
	CodeTokenExpired       Code = "token_expired"
	CodeAccessDenied       Code = "access_denied"
	CodeFeatureNotEnabled  Code = "feature_not_enabled"
	CodeNotFound           Code = "not_found"
	CodeDuplicateValue     Code = "duplicate_value"
	CodeImmutableState     Code = "immutable_state"
	CodeInconsistentState  Code = "inconsistent_state"
	CodeFileTooLarge       Code = "file_too_large"
	CodeUnsupportedType    Code = "unsupported_type"
	CodeRateLimitExceeded  Code = "rate_limit_exceeded"
	CodeServerError        Code = "server_error"
)

// Codes lists every code of the contract's error table.
var Codes = []Code{
	CodeMissingField, CodeInvalidValue, CodeDatatypeMismatch, CodeInvalidField,
	CodeInvalidJSON, CodeInvalidCredentials, CodeTokenExpired, CodeAccessDenied,
	CodeFeatureNotEnabled, CodeNotFound, CodeDuplicateValue, CodeImmutableState,
	CodeInconsistentState, CodeFileTooLarge, CodeUnsupportedType,
	CodeRateLimitExceeded, CodeServerError,
}

// FieldError names one attribute at fault, as an entry of error.errors.
type FieldError struct {
	Field   string `json:"field"`
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error is the one error type that crosses package boundaries with a
// contract code. Anything else reaching the API is a server_error.
type Error struct {
	Code       Code
	Message    string
	Fields     []FieldError
	ExistingID string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErr is an error about one field, which the envelope's errors name.
func FieldErr(code Code, field, msg string) *Error {
	return &Error{Code: code, Message: msg, Fields: []FieldError{{Field: field, Code: code, Message: msg}}}
}

// ErrorCode returns the contract code carried by err, or server_error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeServerError
}

// IsCode reports whether err carries the given contract code.
func IsCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ErrNotFound is what stores return when a lookup matches no row. Callers
// turn it into a contract error with the right message.
var ErrNotFound = errors.New("not found")

// ErrRevoked is what stores return when a change to an API key finds it
// revoked: a revoked key changes no more. Callers turn it into a contract
// error (immutable_state) naming what could not change.
var ErrRevoked = errors.New("key is revoked")

// DuplicateError is what stores return on a unique violation.
type DuplicateError struct {
	// ExistingID is the id of the record already holding the value, when known.
	ExistingID string
}

func (e *DuplicateError) Error() string { return "duplicate value (existing id " + e.ExistingID + ")" }
