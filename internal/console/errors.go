package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// handler is a console page. It writes its answer, or returns what went
// wrong without writing anything, and fail shows that. A route's steps
// (steps.go) have the same shape: nil lets the request on.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// pageError is what the user is shown instead of the page: a status, a message
// they can act on, and, when one form field is at fault, its name, so that a
// form re-rendered with the error can mark it. Internal causes are never one.
type pageError struct {
	Status  int
	Message string
	// Field is the form field at fault (its name attribute), "" for the
	// whole request.
	Field string
	// RetryAfter, when positive, is sent as Retry-After (429, 503).
	RetryAfter time.Duration
}

func (e *pageError) Error() string {
	if e.Field != "" {
		return strconv.Itoa(e.Status) + " " + e.Field + ": " + e.Message
	}
	return strconv.Itoa(e.Status) + " " + e.Message
}

// fieldError is a form field the user must fix.
func fieldError(field, msg string) *pageError {
	return &pageError{Status: http.StatusUnprocessableEntity, Message: msg, Field: field}
}

var (
	// errNotFound is every page that does not exist or is not the user's:
	// a route's existence is not revealed to a role that may not use it.
	errNotFound = &pageError{Status: http.StatusNotFound, Message: "There is no such page."}
	// errUnreadableForm is a body that is not a form or exceeds maxFormBytes.
	errUnreadableForm = &pageError{Status: http.StatusBadRequest, Message: "The form could not be read."}
)

// seeOther is a step's or handler's "not here: go there" (303).
type seeOther string

func (s seeOther) Error() string { return "see other: " + string(s) }

// userError is err as the user may see it: an *pageError as it is, and a
// contract error by its code (an unknown or forbidden thing is "no such
// page"; a value the user gave is theirs to fix). Anything else is not for
// the user's eyes.
func userError(err error) (*pageError, bool) {
	var e *pageError
	if errors.As(err, &e) {
		return e, true
	}
	var de *domain.Error
	if !errors.As(err, &de) {
		return nil, false
	}
	msg, field := capitalize(strings.TrimSuffix(de.Message, "."))+".", fieldOf(de)
	switch de.Code {
	case domain.CodeNotFound, domain.CodeAccessDenied:
		return errNotFound, true
	case domain.CodeMissingField, domain.CodeInvalidValue, domain.CodeDuplicateValue:
		return &pageError{Status: http.StatusUnprocessableEntity, Message: msg, Field: field}, true
	case domain.CodeImmutableState, domain.CodeInconsistentState:
		return &pageError{Status: http.StatusConflict, Message: msg, Field: field}, true
	}
	return nil, false
}

// fail answers err: a redirect, a user error on the error page with its
// status, or anything else as the 500 page. The cause of a 500 is logged
// with the request id (the API's observe names every response) and never
// shown; the page gives the id to quote.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var to seeOther
	if errors.As(err, &to) {
		http.Redirect(w, r, string(to), http.StatusSeeOther)
		return
	}
	if e, ok := userError(err); ok {
		retryAfter(w, e)
		c.renderError(w, r, s, e.Status, e.Message)
		return
	}
	id := w.Header().Get("X-Request-Id")
	c.Log.ErrorContext(r.Context(), "console", "request_id", id, "path", r.URL.Path, "err", err)
	msg := "Something went wrong on our side. Please try again."
	if id != "" {
		msg += " If it happens again, quote request id " + id + "."
	}
	c.renderError(w, r, s, http.StatusInternalServerError, msg)
}

func retryAfter(w http.ResponseWriter, e *pageError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(e.RetryAfter, time.Second)/time.Second)))
	}
}

// shower shows a form's page: as a GET shows it when e is nil, else again
// as posted, with what to fix.
type shower func(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error

// blank is show's page as a GET shows it.
func blank(show shower) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error { return show(w, r, s, nil) }
}

// formError is a form's error as its page shows it: what to fix, and the
// form field at fault ("" when the message is about the whole form).
type formError struct{ Error, Field string }

func (f *formError) set(e *pageError) { f.Error, f.Field = e.Message, e.Field }

// renderForm shows a form's page p: with 200 when e is nil, else with e's
// status and e on the page.
func (c *Console) renderForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError, page, title string, p interface{ set(*pageError) }) error {
	status := http.StatusOK
	if e != nil {
		status = e.Status
		p.set(e)
	}
	return c.render(w, r, s, status, page, title, p)
}

// form re-renders a form with the user error its handler returned, by
// show, so the user keeps what they typed and sees what to fix (and, by
// Error.Field, where). A page that is not there, an unreadable form and
// anything internal go to fail instead.
func form(h handler, show shower) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		err := h(w, r, s)
		e, ok := userError(err)
		if !ok || e == errNotFound || e == errUnreadableForm {
			return err
		}
		retryAfter(w, e)
		return show(w, r, s, e)
	}
}
