package console

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"time"
	"unsafe"

	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/keys"
)

// formLimits bound a form's body: its bytes and its fields (name=value
// pairs). docs/console.md, Form limits.
type formLimits struct {
	bytes  int64
	fields int
}

var (
	// pageForm fits the largest form a signed-in user posts: 10,000 code
	// points of agent instructions at up to 4 bytes each, percent-encoded
	// (×3), in maxFormBytes; the key form, with the most fields (an agent
	// restriction of up to keys.MaxAgents, a page of the picker's others,
	// the scopes and a dozen more), in maxFormFields.
	pageForm = formLimits{bytes: maxFormBytes, fields: keys.MaxAgents + 256}
	// signInForm fits the sign-in form: email, password (at most 1,024
	// bytes, ×3 percent-encoded), its token and where to go next.
	signInForm = formLimits{bytes: 8 << 10, fields: 8}
)

var (
	errFormTooLarge  = &pageError{Status: http.StatusRequestEntityTooLarge, Message: "The form is too large to be read."}
	errFormTooMany   = &pageError{Status: http.StatusRequestEntityTooLarge, Message: "The form has too many fields to be read."}
	errFormsBusy     = &pageError{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, Message: "The server is reading as many forms as it can hold; try again in a moment."}
	errFormsTooFast  = &pageError{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Message: "Too many forms are being sent at once; try again in a moment."}
	urlencodedFormMT = "application/x-www-form-urlencoded"
)

// formOwner is whose share of the body budget a form counts in: the
// signed-in user's account, or without a session the client address (an
// IPv6 client's /64), as the API counts its bodies.
func (c *Console) formOwner(r *http.Request, s *session) string {
	if s != nil {
		return "account:" + s.user.AccountID
	}
	return "addr:" + clientaddr.Group(c.ClientAddr.Addr(r))
}

// readForm reads a POST's form into r.PostForm, within lim and under the
// body budget the API's bodies share (Config.Bodies), reserved as the
// bytes arrive and held until the request ends. A declared length over
// lim is refused before anything is read; the fields are counted before
// they are parsed. r.Form is the same map: the console reads only
// r.PostForm, and nothing builds a second copy. A body that is not a
// urlencoded form has no fields (as Request.ParseForm leaves it).
func (c *Console) readForm(w http.ResponseWriter, r *http.Request, owner string, lim formLimits) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != urlencodedFormMT {
		r.PostForm = url.Values{}
		r.Form = r.PostForm
		return nil
	}
	if r.ContentLength > lim.bytes {
		w.Header().Set("Connection", "close") // the body stays unread
		return errFormTooLarge
	}
	hold := c.Bodies.Hold(owner)
	if !keepUntilDone(r, hold) {
		defer hold.Release()
	}
	body, err := hold.Read(r.Context(), http.MaxBytesReader(w, r.Body, lim.bytes), r.ContentLength, lim.bytes)
	if err != nil {
		return formReadError(w, err)
	}
	if bytes.Count(body, []byte("&"))+1 > lim.fields {
		return errFormTooMany
	}
	// The values are parsed from the body's own bytes, not a copy of them:
	// nothing writes to body after Read, and the values (substrings of it
	// where nothing was escaped) keep it alive as long as they need it.
	vals, err := url.ParseQuery(unsafe.String(unsafe.SliceData(body), len(body)))
	if err != nil {
		return errUnreadableForm
	}
	r.PostForm = vals
	r.Form = vals
	return nil
}

// formReadError is the page of a form body that could not be read whole.
func formReadError(w http.ResponseWriter, err error) error {
	w.Header().Set("Connection", "close") // the rest of the body stays unread
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return errFormTooLarge
	case errors.Is(err, bodybudget.ErrShare):
		return errFormsTooFast
	case errors.Is(err, bodybudget.ErrBusy):
		return errFormsBusy
	}
	return errUnreadableForm
}

// heldForms are the reservations of a request's form, given back when the
// request ends (bounded), after the handler is done with r.PostForm.
type heldForms struct{ holds []*bodybudget.Hold }

type heldFormsKey struct{}

// withHeldForms gives r's context a place for its form's reservation, and
// returns the function that gives it back.
func withHeldForms(ctx context.Context) (context.Context, func()) {
	h := new(heldForms)
	return context.WithValue(ctx, heldFormsKey{}, h), func() {
		for _, hold := range h.holds {
			hold.Release()
		}
	}
}

// keepUntilDone keeps hold for r's end, if r has a place for it.
func keepUntilDone(r *http.Request, hold *bodybudget.Hold) bool {
	h, ok := r.Context().Value(heldFormsKey{}).(*heldForms)
	if ok {
		h.holds = append(h.holds, hold)
	}
	return ok
}
