package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
)

// statusOf maps each contract code to its HTTP status: the contract's error
// table, in one place.
func statusOf(code domain.Code) int {
	switch code {
	case domain.CodeMissingField, domain.CodeInvalidValue, domain.CodeDatatypeMismatch,
		domain.CodeInvalidField, domain.CodeInvalidJSON:
		return http.StatusBadRequest
	case domain.CodeInvalidCredentials, domain.CodeTokenExpired:
		return http.StatusUnauthorized
	case domain.CodeAccessDenied, domain.CodeFeatureNotEnabled:
		return http.StatusForbidden
	case domain.CodeNotFound:
		return http.StatusNotFound
	case domain.CodeDuplicateValue, domain.CodeImmutableState, domain.CodeInconsistentState:
		return http.StatusConflict
	case domain.CodeFileTooLarge:
		return http.StatusRequestEntityTooLarge
	case domain.CodeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case domain.CodeRateLimitExceeded:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// retryLater is a refusal that a retry may pass once the load falls: its
// status (429 or 503) and Retry-After seconds go with its contract error.
type retryLater struct {
	status, after int
	err           *domain.Error
}

func (e *retryLater) Error() string { return e.err.Error() }
func (e *retryLater) Unwrap() error { return e.err }

// busy is the instance at a capacity bound: HTTP 503 with server_error,
// the contract's code for "safe to retry with backoff".
func busy(msg string) error {
	return &retryLater{status: http.StatusServiceUnavailable, after: 1, err: domain.Errorf(domain.CodeServerError, "%s", msg)}
}

type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Code       domain.Code         `json:"code"`
	Message    string              `json:"message"`
	Errors     []domain.FieldError `json:"errors,omitempty"`
	ExistingID string              `json:"existing_id,omitempty"`
}

// handlerFunc is a /v1 handler, or a check before one: it writes its
// answer, or returns the error to answer with.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serve is the one adapter from handlerFunc to http.Handler: an error a
// handler returns is answered by writeError, in the contract's envelope.
func (s *Server) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// writeError is the only way an error reaches a client, as asDomain shows it.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	de := asDomain(r, log, err)
	rec := r.Context().Value(ctxLogAttrs).(*recorder)
	rec.code = string(de.Code) // for the request log (usage.go)
	if de.Code == domain.CodeInvalidCredentials || de.Code == domain.CodeTokenExpired {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentapi"`)
	}
	status := statusOf(de.Code)
	rl := (*retryLater)(nil)
	if errors.As(err, &rl) {
		status = rl.status
		w.Header().Set("Retry-After", strconv.Itoa(rl.after))
	}
	rec.gone = status >= 500 && clientWentAway(r, err, rl != nil)
	if r.Method == http.MethodHead {
		// The headers GET would get, without the body (net/http would
		// drop it too; a handler wrapping this one would not).
		w = headWriter{w}
	}
	writeJSON(w, status, envelope(de))
}

// clientWentAway reports whether err, answered with a 5xx, is the client
// having closed the request (its context canceled, which only the client
// does: the server's own bound is a deadline) while the service waited on
// something, a store or a body budget (retry): the request is then
// recorded as 499, not as a failure of the service. A *domain.Error
// server_error (a panic recovered) stays a 5xx.
func clientWentAway(r *http.Request, err error, retry bool) bool {
	var de *domain.Error
	return (retry || !errors.As(err, &de)) && errors.Is(r.Context().Err(), context.Canceled)
}

// asDomain is err as the client may see it: a *domain.Error as it is;
// anything else is an internal cause, logged with the request id (at INFO
// when the client went away, as the cause then is) and answered with a
// bare server_error naming the request id.
func asDomain(r *http.Request, log *slog.Logger, err error) *domain.Error {
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	id := requestID(r.Context())
	if errors.Is(r.Context().Err(), context.Canceled) {
		log.InfoContext(r.Context(), "client went away", "request_id", id, "err", err)
	} else {
		log.ErrorContext(r.Context(), "internal error", "request_id", id, "err", err)
	}
	return domain.Errorf(domain.CodeServerError, "The service failed to handle this request; it is safe to retry with backoff (request id %s).", id)
}

// envelope is the error body for de, bounded, with anything shaped like a
// credential that the client sent (an unknown parameter's name, an id in
// the path) shown as its public prefix only.
func envelope(de *domain.Error) errorBody {
	f := bounded(errorFields{Code: de.Code, Message: de.Message, Errors: de.Fields, ExistingID: de.ExistingID})
	f.Message = credential.RedactText(f.Message)
	f.Errors = slices.Clone(f.Errors)
	for i, e := range f.Errors {
		f.Errors[i].Field, f.Errors[i].Message = credential.RedactText(e.Field), credential.RedactText(e.Message)
	}
	return errorBody{Error: f}
}

// maxErrorBytes bounds every error response, whatever the input
// (docs/api.md, Errors).
const maxErrorBytes = 16 << 10

// bounded keeps an error within maxFieldErrors entries and maxErrorBytes.
// Validation already keeps at most that many entries and cuts the names it
// echoes short (problems); this is the guard for any other text.
func bounded(f errorFields) errorFields {
	if len(f.Errors) > maxFieldErrors {
		f.Errors = f.Errors[:maxFieldErrors]
	}
	// JSON's longest escape of one byte of text is six bytes (\u00XX).
	worst := 6*(len(f.Message)+len(f.ExistingID)) + 128
	for _, e := range f.Errors {
		worst += 6*(len(e.Field)+len(e.Message)) + 64
	}
	if worst <= maxErrorBytes {
		return f
	}
	fits := func() bool {
		b, err := json.Marshal(errorBody{Error: f})
		return err != nil || len(b) < maxErrorBytes // <: writeJSON adds a newline
	}
	for len(f.Errors) > 0 && !fits() {
		f.Errors = f.Errors[:len(f.Errors)-1]
	}
	if !fits() { // at most 6 × (1,024 + 64) bytes of strings are left
		f.Message = clipRunes(f.Message, 1024)
		f.ExistingID = clipRunes(f.ExistingID, 64)
	}
	return f
}

// clipRunes cuts s to at most n characters, marking the cut.
func clipRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// headWriter answers a HEAD request: it sends the status and headers and
// drops the body.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }
