package console

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// A route is its handler behind steps, each with one job, run in order:
//
//  1. crossOrigin (around every route): an unsafe method from another
//     site is refused with the console's 403 page;
//  2. signedIn: a live session, else to the sign-in page;
//  3. passwordChosen: a user who must still choose a password goes to the
//     password page;
//  4. managerOnly or ownerOnly: the role, else 404, so that a route's
//     existence is not revealed;
//  5. formToken: a POST's form is read (within its limits, under the
//     body budget) and carries the session's CSRF token (defence in
//     depth beside crossOrigin).
//
// A step returns nil to let the request on, or the error fail shows.

// page serves h to a signed-in user once every step has let the request on.
func (c *Console) page(h handler, steps ...handler) http.Handler {
	steps = append(steps, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := c.signedIn(w, r)
		for _, step := range steps {
			if err != nil {
				break
			}
			err = step(w, r, s)
		}
		if err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// crossOrigin refuses unsafe requests (POST) that a browser says come from
// another origin: Sec-Fetch-Site other than same-origin or none (a
// navigation the user started), else an Origin whose host is not the
// request's Host. The scheme is not compared, so TLS may end at a proxy.
// A request with neither header (an old browser, or not a browser) still
// needs formToken's CSRF token.
func (c *Console) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusForbidden, "This request came from another site and was refused.")
	}))
	return cop.Handler(next)
}

// signedIn returns the request's session, or sends the browser to sign in
// (back to this page afterwards, for a GET).
func (c *Console) signedIn(w http.ResponseWriter, r *http.Request) (*session, error) {
	s, err := c.session(r)
	if errors.Is(err, domain.ErrNotFound) {
		setCookie(w, r, sessionCookie, "", -time.Second)
		target := "/console/signin"
		if r.Method != http.MethodPost && r.URL.Path != "/console/" {
			target += "?next=" + url.QueryEscape(r.URL.Path)
		}
		return nil, seeOther(target)
	}
	return s, err
}

// passwordChosen sends a user who must still replace a one-time password
// to the password page; only that page and sign-out skip this step.
func passwordChosen(_ http.ResponseWriter, _ *http.Request, s *session) error {
	if s.user.MustChangePassword {
		return seeOther("/console/password")
	}
	return nil
}

// managerOnly lets Owners and Admins on; the rule lives in keys.Service.
func (c *Console) managerOnly(_ http.ResponseWriter, r *http.Request, s *session) error {
	_, err := c.Keys.Manager(r.Context(), s.user.AccountID, s.user.Email)
	if domain.IsCode(err, domain.CodeAccessDenied) || domain.IsCode(err, domain.CodeNotFound) {
		return errNotFound
	}
	return err
}

func ownerOnly(_ http.ResponseWriter, _ *http.Request, s *session) error {
	if s.user.Role != domain.RoleOwner {
		return errNotFound
	}
	return nil
}

// formToken reads a POST's form (within pageForm, in the account's share
// of the body budget: readForm) and checks that it carries the session's
// CSRF token.
func (c *Console) formToken(w http.ResponseWriter, r *http.Request, s *session) error {
	if r.Method != http.MethodPost {
		return nil
	}
	if err := c.readForm(w, r, c.formOwner(r, s), pageForm); err != nil {
		return err
	}
	if !tokenEqual(r.PostForm.Get("csrf"), s.csrf) {
		return &pageError{Status: http.StatusForbidden,
			Message: "This form has expired or did not come from this console. Go back, reload the page and try again."}
	}
	return nil
}
