package api

import (
	"errors"
	"log/slog"
	"net/http"

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

type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Code       domain.Code         `json:"code"`
	Message    string              `json:"message"`
	Errors     []domain.FieldError `json:"errors,omitempty"`
	ExistingID string              `json:"existing_id,omitempty"`
}

// writeError is the only way an error reaches a client. A *domain.Error is
// sent as it is; anything else is an internal cause: logged with the request
// id, and answered with a bare server_error that names the request id.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		id := requestID(r.Context())
		log.ErrorContext(r.Context(), "internal error", "request_id", id, "err", err)
		de = domain.Errorf(domain.CodeServerError, "The service failed to handle this request; it is safe to retry with backoff (request id %s).", id)
	}
	if de.Code == domain.CodeInvalidCredentials || de.Code == domain.CodeTokenExpired {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentapi"`)
	}
	if r.Method == http.MethodHead {
		// The headers GET would get, without the body (net/http would
		// drop it too; a handler wrapping this one would not).
		w = headWriter{w}
	}
	writeJSON(w, statusOf(de.Code), errorBody{Error: errorFields{
		Code: de.Code, Message: de.Message, Errors: de.Fields, ExistingID: de.ExistingID,
	}})
}

// headWriter answers a HEAD request: it sends the status and headers and
// drops the body.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }
