package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestUserError: what the user may see of an error, and where a form
// marks it.
func TestUserError(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int // 0: not the user's to see
		field  string
	}{
		{"console field error", fieldError("name", "Give a name."), http.StatusUnprocessableEntity, "name"},
		{"wrapped console error", fmt.Errorf("create: %w", fieldError("env", "Choose live or test.")), http.StatusUnprocessableEntity, "env"},
		{"contract field error", &domain.Error{Code: domain.CodeInvalidValue, Message: "bad",
			Fields: []domain.FieldError{{Field: "scopes", Code: domain.CodeInvalidValue, Message: "bad"}}}, http.StatusUnprocessableEntity, "scopes"},
		{"duplicate", domain.Errorf(domain.CodeDuplicateValue, "taken"), http.StatusUnprocessableEntity, ""},
		{"immutable", domain.Errorf(domain.CodeImmutableState, "key k is revoked"), http.StatusConflict, ""},
		{"not found", domain.Errorf(domain.CodeNotFound, "no key"), http.StatusNotFound, ""},
		{"access denied is not found", domain.Errorf(domain.CodeAccessDenied, "not a manager"), http.StatusNotFound, ""},
		{"server error code", domain.Errorf(domain.CodeServerError, "boom"), 0, ""},
		{"store sentinel", domain.ErrNotFound, 0, ""},
		{"anything else", errors.New("dial tcp: refused"), 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := userError(c.err)
			if c.status == 0 {
				if ok {
					t.Fatalf("shown to the user: %+v", e)
				}
				return
			}
			if !ok || e.Status != c.status || e.Field != c.field || e.Message == "" {
				t.Fatalf("got %+v %v, want status %d field %q", e, ok, c.status, c.field)
			}
		})
	}
}

// TestFormReRendersUserErrors: a form handler's user error re-renders the
// form (with the field), with Retry-After when given; not found, an
// unreadable form and internal errors go on to fail.
func TestFormReRendersUserErrors(t *testing.T) {
	internal := errors.New("internal")
	for _, c := range []struct {
		name  string
		err   error
		shown bool
	}{
		{"field", fieldError("email", "Give an email."), true},
		{"busy", errBusy(busyHashing), true},
		{"not found", errNotFound, false},
		{"unreadable", errUnreadableForm, false},
		{"internal", internal, false},
		{"redirect", seeOther("/console/"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *pageError
			h := form(func(http.ResponseWriter, *http.Request, *session) error { return c.err },
				func(_ http.ResponseWriter, _ *http.Request, _ *session, e *pageError) error { got = e; return nil })
			rec := httptest.NewRecorder()
			err := h(rec, httptest.NewRequest(http.MethodPost, "/console/users", nil), nil)
			if c.shown {
				if err != nil || got == nil || got != c.err {
					t.Fatalf("not re-rendered: %v, %+v", err, got)
				}
				if (got.RetryAfter > 0) != (rec.Header().Get("Retry-After") != "") {
					t.Fatalf("Retry-After %q for %v", rec.Header().Get("Retry-After"), got.RetryAfter)
				}
				return
			}
			if got != nil || !errors.Is(err, c.err) {
				t.Fatalf("re-rendered or lost: %v, %+v", err, got)
			}
		})
	}
}
