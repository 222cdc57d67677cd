package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
)

// Cookie names. The session cookie is scoped to /console/ and never
// readable by script; the sign-in cookie carries the double-submit CSRF
// token of the sign-in form, the one form shown before there is a session.
const (
	sessionCookie = "agentapi_session"
	loginCookie   = "agentapi_signin"
	cookiePath    = "/console/"
	// maxFormBytes fits the largest form: 10,000 code points of agent
	// instructions at up to 4 bytes each, percent-encoded (×3).
	maxFormBytes = 256 << 10
)

// session is the signed-in user of a request.
type session struct {
	user      domain.User
	csrf      string
	tokenHash []byte
}

// access is what a route requires.
type access int

const (
	signedIn access = 1 << iota
	manager         // Owner or Admin (keys.Service.Manager decides)
	owner
	// allowMustChange lets a user who must still choose a password through
	// (the password page and sign-out); every other page sends them there.
	allowMustChange
)

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// guard runs h for a request that passes, in order: the cross-origin check
// (POST), a live session (else to the sign-in page), the forced password
// change, the role (else 404, so a route's existence is not revealed), and
// the CSRF token (POST).
func (c *Console) guard(need access, h sessionHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		post := r.Method == http.MethodPost
		if post && !sameOrigin(r) {
			c.renderError(w, r, nil, http.StatusForbidden, "This request came from another site and was refused.")
			return
		}
		s, err := c.session(r)
		if err != nil {
			if !errors.Is(err, domain.ErrNotFound) {
				c.serverError(w, r, nil, err)
				return
			}
			clearCookie(w, r, sessionCookie)
			target := "/console/signin"
			if !post && r.URL.Path != "/console/" {
				target += "?next=" + url.QueryEscape(r.URL.Path)
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		if s.user.MustChangePassword && need&allowMustChange == 0 {
			http.Redirect(w, r, "/console/password", http.StatusSeeOther)
			return
		}
		switch {
		case need&owner != 0 && s.user.Role != domain.RoleOwner:
			c.notFound(w, r, s)
			return
		case need&manager != 0:
			// The role rule lives in keys.Service; anyone it refuses sees 404.
			if _, err := c.keys.Manager(r.Context(), s.user.AccountID, s.user.Email); err != nil {
				if domain.IsCode(err, domain.CodeAccessDenied) || domain.IsCode(err, domain.CodeNotFound) {
					c.notFound(w, r, s)
				} else {
					c.serverError(w, r, s, err)
				}
				return
			}
		}
		if post {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				c.renderError(w, r, s, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !tokenEqual(r.PostForm.Get("csrf"), s.csrf) {
				c.renderError(w, r, s, http.StatusForbidden, "This form has expired or did not come from this console. Go back, reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	})
}

// session returns the request's signed-in user, or ErrNotFound.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 100 {
		return nil, domain.ErrNotFound
	}
	h := sha256.Sum256([]byte(ck.Value))
	sess, u, err := c.store.SessionUser(r.Context(), h[:], c.now())
	if err != nil {
		return nil, err
	}
	return &session{user: u, csrf: sess.CSRF, tokenHash: sess.TokenHash}, nil
}

// sameOrigin refuses cross-site form posts by the browser's own headers:
// Sec-Fetch-Site when sent, else Origin, compared by host with the request's
// Host (the scheme is not compared, so TLS may end at a proxy). A request
// with neither (an old browser, or not a browser) still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func newToken() string { return rand.Text() + rand.Text() }

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: cookiePath, MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r),
	})
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: cookiePath, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r)})
}

// overTLS reports whether the browser reached us over TLS: this server
// terminates it (r.TLS), or the TLS-terminating proxy in front says so in
// X-Forwarded-Proto (production runs behind one). Trusting the header is
// safe here because it can only add Secure: a client that forges it merely
// gets a cookie its own plain-HTTP browser will not send back.
func overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// --- sign-in ---

type signInPage struct {
	Email, Next, LoginCSRF, Error string
}

func (c *Console) handleSignInForm(w http.ResponseWriter, r *http.Request) {
	if s, err := c.session(r); err == nil && s != nil {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.renderSignIn(w, r, http.StatusOK, signInPage{Next: safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, p signInPage) {
	p.LoginCSRF = newToken()
	setCookie(w, r, loginCookie, p.LoginCSRF, time.Hour)
	c.render(w, r, nil, status, "signin", "Sign in", p)
}

// badSignIn is the one message for every refused sign-in: unknown email,
// wrong password, deactivated user or account.
const badSignIn = "The email or password is incorrect, or this user cannot sign in."

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.renderError(w, r, nil, http.StatusForbidden, "This request came from another site and was refused.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	email := domain.NormalizeEmail(r.PostForm.Get("email"))
	pw := r.PostForm.Get("password")
	p := signInPage{Email: email, Next: safeNext(r.PostForm.Get("next"))}
	ck, err := r.Cookie(loginCookie)
	if err != nil || !tokenEqual(r.PostForm.Get("csrf"), ck.Value) {
		p.Error = "This form has expired. Please sign in again."
		c.renderSignIn(w, r, http.StatusForbidden, p)
		return
	}
	if retry, ok := c.allowSignIn(r, email); !ok {
		w.Header().Set("Retry-After", fmt.Sprint(int(retry.Seconds())))
		p.Error = fmt.Sprintf("Too many sign-in attempts. Try again in %d seconds.", int(retry.Seconds()))
		c.renderSignIn(w, r, http.StatusTooManyRequests, p)
		return
	}
	u, ok, err := c.checkPassword(r.Context(), email, pw)
	if busy(r, err) {
		w.Header().Set("Retry-After", busyRetry)
		p.Error = busySignIn
		c.renderSignIn(w, r, http.StatusServiceUnavailable, p)
		return
	}
	if err != nil {
		c.serverError(w, r, nil, err)
		return
	}
	if !ok {
		p.Error = badSignIn
		c.renderSignIn(w, r, http.StatusUnauthorized, p)
		return
	}
	// A session this browser already had ends: one sign-in, one session.
	if old, err := r.Cookie(sessionCookie); err == nil && old.Value != "" {
		h := sha256.Sum256([]byte(old.Value))
		if err := c.store.DeleteSession(r.Context(), h[:]); err != nil {
			c.serverError(w, r, nil, err)
			return
		}
	}
	if err := c.startSession(w, r, u); err != nil {
		c.serverError(w, r, nil, err)
		return
	}
	clearCookie(w, r, loginCookie)
	c.setDeviceCookie(w, r, u.Email)
	c.log.Info("console sign-in", "user_id", u.ID, "account_id", u.AccountID)
	target := "/console/"
	if u.MustChangePassword {
		target = "/console/password"
	} else if p.Next != "" {
		target = p.Next
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// busySignIn is the answer (503) when every password-hashing slot stayed
// taken for the Gate's whole wait.
const (
	busySignIn = "Too many sign-in attempts; try again shortly."
	busyRetry  = "2" // seconds, password.DefaultWait
	// busyHashing is the same for a page other than sign-in.
	busyHashing = "The server is busy; try again shortly."
)

// busy reports whether err is the password Gate's refusal, or the client
// gave up while waiting for a slot.
func busy(r *http.Request, err error) bool {
	return errors.Is(err, password.ErrBusy) || (err != nil && r.Context().Err() != nil)
}

// allowSignIn applies the throttle (SignInLimits) to an attempt on email
// from the request's client address: per address, per (email, address),
// then per email unless the browser carries email's device cookie. An
// attempt a ceiling refuses is not counted by the ones after it: one
// address spending its own budget cannot also spend a user's. The limiter's
// keys are namespaced apart from API keys' windows and name the email by a
// digest (any length of text may be posted as an email). When the limiter
// fails, sign-in is refused rather than left unthrottled.
func (c *Console) allowSignIn(r *http.Request, email string) (time.Duration, bool) {
	addr := c.clients.Addr(r)
	sum := sha256.Sum256([]byte(email))
	id := hex.EncodeToString(sum[:16])
	type ceiling struct {
		key   string
		limit int
	}
	ceilings := []ceiling{
		{"console-signin:addr:" + addr, c.limits.PerAddress},
		{"console-signin:email-addr:" + id + ":" + addr, c.limits.PerEmailAddress},
	}
	if !c.knownDevice(r, email) {
		ceilings = append(ceilings, ceiling{"console-signin:email:" + id, c.limits.PerEmail})
	}
	for _, k := range ceilings {
		res, err := c.limiter.Allow(r.Context(), k.key, k.limit)
		if err != nil {
			c.log.Error("sign-in throttle", "err", err)
			return time.Minute, false
		}
		if !res.Allowed {
			return max(res.RetryAfter, time.Second), false
		}
	}
	return 0, true
}

// checkPassword returns the user if the email names an active user of an
// active account and pw is their password. An unknown email costs the same
// argon2 work as a wrong password, through the same Gate.
func (c *Console) checkPassword(ctx context.Context, email, pw string) (domain.User, bool, error) {
	u, err := c.store.GetUserByEmail(ctx, email)
	if errors.Is(err, domain.ErrNotFound) {
		if err := c.passwords.DummyVerify(ctx, pw); err != nil {
			return domain.User{}, false, fmt.Errorf("dummy verify: %w", err)
		}
		return domain.User{}, false, nil
	}
	if err != nil {
		return domain.User{}, false, fmt.Errorf("get user: %w", err)
	}
	ok, err := c.passwords.Verify(ctx, u.PasswordHash, pw)
	if err != nil {
		return domain.User{}, false, fmt.Errorf("verify password of %s: %w", u.ID, err)
	}
	if !ok || !u.Active {
		return domain.User{}, false, nil
	}
	a, err := c.store.GetAccount(ctx, u.AccountID)
	if err != nil {
		return domain.User{}, false, fmt.Errorf("get account: %w", err)
	}
	return u, a.Active, nil
}

func (c *Console) startSession(w http.ResponseWriter, r *http.Request, u domain.User) error {
	now := c.now().UTC()
	// Expired rows are never served; clearing them here keeps the table small.
	if _, err := c.store.DeleteExpiredSessions(r.Context(), now); err != nil {
		c.log.Warn("delete expired sessions", "err", err)
	}
	token := newToken()
	h := sha256.Sum256([]byte(token))
	if err := c.store.CreateSession(r.Context(), domain.Session{
		TokenHash: h[:], UserID: u.ID, CSRF: newToken(), CreatedAt: now, ExpiresAt: now.Add(c.sessionTTL),
	}); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	setCookie(w, r, sessionCookie, token, c.sessionTTL)
	return nil
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request, s *session) {
	if err := c.store.DeleteSession(r.Context(), s.tokenHash); err != nil {
		c.serverError(w, r, s, err)
		return
	}
	clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in destination only if it is a console path on
// this site (no open redirect).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "/console/signin") {
		return ""
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/console/") {
		return ""
	}
	return next
}

// --- password ---

type passwordPage struct {
	Forced bool
	Error  string
}

func (c *Console) handlePasswordForm(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, r, s, http.StatusOK, "password", "Choose a password", passwordPage{Forced: s.user.MustChangePassword})
}

func (c *Console) handlePassword(w http.ResponseWriter, r *http.Request, s *session) {
	p := passwordPage{Forced: s.user.MustChangePassword}
	fail := func(status int, msg string) {
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", busyRetry)
		}
		p.Error = msg
		c.render(w, r, s, status, "password", "Choose a password", p)
	}
	current, next, confirm := r.PostForm.Get("current"), r.PostForm.Get("new"), r.PostForm.Get("confirm")
	// The current password is asked for a voluntary change: a session left
	// open on someone's screen must not be enough to take the account over.
	// A forced change follows a sign-in with the one-time password moments ago.
	if !p.Forced {
		// Each guess of the current password counts as a sign-in attempt
		// of this user from this address: the same throttle, the same
		// budget, so a session is no faster way to guess than sign-in.
		if retry, ok := c.allowSignIn(r, s.user.Email); !ok {
			w.Header().Set("Retry-After", fmt.Sprint(int(retry.Seconds())))
			p.Error = fmt.Sprintf("Too many password attempts. Try again in %d seconds.", int(retry.Seconds()))
			c.render(w, r, s, http.StatusTooManyRequests, "password", "Choose a password", p)
			return
		}
		if ok, err := c.passwords.Verify(r.Context(), s.user.PasswordHash, current); busy(r, err) {
			fail(http.StatusServiceUnavailable, busySignIn)
			return
		} else if err != nil {
			c.serverError(w, r, s, err)
			return
		} else if !ok {
			fail(http.StatusUnprocessableEntity, "The current password is incorrect.")
			return
		}
	}
	if err := password.Check(next); err != nil {
		fail(http.StatusUnprocessableEntity, capitalize(err.Error())+".")
		return
	}
	if next != confirm {
		fail(http.StatusUnprocessableEntity, "The two new passwords differ.")
		return
	}
	if same, err := c.passwords.Verify(r.Context(), s.user.PasswordHash, next); busy(r, err) {
		fail(http.StatusServiceUnavailable, busySignIn)
		return
	} else if err == nil && same {
		fail(http.StatusUnprocessableEntity, "Choose a password different from the current one.")
		return
	}
	hash, err := c.passwords.Hash(r.Context(), next)
	if busy(r, err) {
		fail(http.StatusServiceUnavailable, busySignIn)
		return
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	if err := c.store.ChangePassword(r.Context(), s.user.ID, hash, s.tokenHash); err != nil {
		c.serverError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/console/?done=password", http.StatusSeeOther)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (c *Console) handleHome(w http.ResponseWriter, r *http.Request, s *session) {
	target := "/console/agents"
	if s.user.Role.CanManageKeys() {
		target = "/console/developers"
	}
	if r.URL.Query().Get("done") == "password" {
		target += "?done=password"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}
