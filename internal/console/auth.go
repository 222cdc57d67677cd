package console

import (
	"cmp"
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
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/clientaddr"
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
	// instructions at up to 4 bytes each, percent-encoded (×3). See
	// pageForm.
	maxFormBytes = 256 << 10
)

// session is the signed-in user of a request.
type session struct {
	user      domain.User
	csrf      string
	tokenHash []byte
	// account is the user's account's name and features, as the session
	// read them (no query of its own).
	account domain.Account
}

// session returns the request's signed-in user, or ErrNotFound.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 100 {
		return nil, domain.ErrNotFound
	}
	h := sha256.Sum256([]byte(ck.Value))
	sess, u, err := c.Store.SessionUser(r.Context(), h[:], c.Now())
	if err != nil {
		return nil, err
	}
	return &session{user: u, csrf: sess.CSRF, tokenHash: sess.TokenHash,
		account: domain.Account{ID: u.AccountID, Name: sess.AccountName, Active: true, Features: sess.AccountFeatures}}, nil
}

func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func newToken() string { return rand.Text() + rand.Text() }

// setCookie sets cookie name for cookiePath, HttpOnly, SameSite=Lax and
// Secure when the browser came over TLS; a negative maxAge deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: cookiePath, MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r),
	})
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

type signInPage struct {
	Email, Next, LoginCSRF, Error string
}

func (c *Console) handleSignInForm(w http.ResponseWriter, r *http.Request, _ *session) error {
	if s, err := c.session(r); err == nil && s != nil {
		return seeOther("/console/")
	}
	return c.renderSignIn(w, r, http.StatusOK, signInPage{Next: safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, p signInPage) error {
	p.LoginCSRF = newToken()
	setCookie(w, r, loginCookie, p.LoginCSRF, time.Hour)
	return c.render(w, r, nil, status, "signin", "Sign in", p)
}

// showSignIn is the sign-in form again, with what was typed (never the
// password) and why it was refused.
func (c *Console) showSignIn(w http.ResponseWriter, r *http.Request, _ *session, e *pageError) error {
	return c.renderSignIn(w, r, e.Status, signInPage{
		Email: domain.NormalizeEmail(r.PostForm.Get("email")), Next: safeNext(r.PostForm.Get("next")), Error: e.Message,
	})
}

// badSignIn is the one message for every refused sign-in: unknown email,
// wrong password, deactivated user or account.
const badSignIn = "The email or password is incorrect, or this user cannot sign in."

// handleSignIn applies the client address's throttle before it reads the
// form (an attempt refused costs no parsing), reads the small form within
// signInForm, checks its own token (a double-submit cookie: there is no
// session yet), the throttle's email ceilings and the password, then starts
// a session. crossOrigin has refused posts from other sites already.
func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request, _ *session) error {
	if retry, ok := c.allow(r, c.addressCeiling(r)); !ok {
		return tooManySignIns(retry)
	}
	if err := c.readForm(w, r, c.formOwner(r, nil), signInForm); err != nil {
		return err
	}
	email := domain.NormalizeEmail(r.PostForm.Get("email"))
	ck, err := r.Cookie(loginCookie)
	if err != nil || !tokenEqual(r.PostForm.Get("csrf"), ck.Value) {
		return &pageError{Status: http.StatusForbidden, Message: "This form has expired. Please sign in again."}
	}
	if retry, ok := c.allow(r, c.emailCeilings(r, email)...); !ok {
		return tooManySignIns(retry)
	}
	u, ok, err := c.checkPassword(r.Context(), email, r.PostForm.Get("password"))
	if busy(r, err) {
		return errBusy(busySignIn)
	}
	if err != nil {
		return err
	}
	if !ok {
		return &pageError{Status: http.StatusUnauthorized, Message: badSignIn}
	}
	// A session this browser already had ends: one sign-in, one session.
	if old, err := r.Cookie(sessionCookie); err == nil && old.Value != "" {
		h := sha256.Sum256([]byte(old.Value))
		if err := c.Store.DeleteSession(r.Context(), h[:]); err != nil {
			return err
		}
	}
	if err := c.startSession(w, r, u); err != nil {
		return err
	}
	setCookie(w, r, loginCookie, "", -time.Second)
	c.setDeviceCookie(w, r, u.Email)
	c.Log.Info("console sign-in", "user_id", u.ID, "account_id", u.AccountID)
	if u.MustChangePassword {
		return seeOther("/console/password")
	}
	return seeOther(cmp.Or(safeNext(r.PostForm.Get("next")), "/console/"))
}

// busySignIn is the answer (503) when every password-hashing slot stayed
// taken for the Gate's whole wait.
const (
	busySignIn = "Too many sign-in attempts; try again shortly."
	busyRetry  = 2 * time.Second // password.DefaultWait
	// busyHashing is the same for a page other than sign-in.
	busyHashing = "The server is busy; try again shortly."
)

// errBusy is the 503 of a password Gate that stayed full.
func errBusy(msg string) *pageError {
	return &pageError{Status: http.StatusServiceUnavailable, Message: msg, RetryAfter: busyRetry}
}

// busy reports whether err is the password Gate's refusal, or the client
// gave up while waiting for a slot.
func busy(r *http.Request, err error) bool {
	return errors.Is(err, password.ErrBusy) || (err != nil && r.Context().Err() != nil)
}

func tooManySignIns(retry time.Duration) *pageError {
	return &pageError{Status: http.StatusTooManyRequests, RetryAfter: retry,
		Message: fmt.Sprintf("Too many sign-in attempts. Try again in %d seconds.", int(retry.Seconds()))}
}

// ceiling is one of the sign-in throttle's windows: its limiter key and
// its attempts a minute.
type ceiling struct {
	key   string
	limit int
}

// allowSignIn applies the throttle (SignInLimits) to an attempt on email
// from the request's client address: per address, per (email, address),
// then per email unless the browser carries email's device cookie. An
// attempt a ceiling refuses is not counted by the ones after it: one
// address spending its own budget cannot also spend a user's. Sign-in
// applies the first before it reads its form, the others after.
func (c *Console) allowSignIn(r *http.Request, email string) (time.Duration, bool) {
	return c.allow(r, append([]ceiling{c.addressCeiling(r)}, c.emailCeilings(r, email)...)...)
}

// addressCeiling counts the client address's attempts (IPv6 per /64).
func (c *Console) addressCeiling(r *http.Request) ceiling {
	return ceiling{"console-signin:addr:" + clientaddr.Group(c.ClientAddr.Addr(r)), c.SignInLimits.PerAddress}
}

// emailCeilings count attempts on email from the address, and from every
// address unless the browser carries email's device cookie. The limiter's
// keys are namespaced apart from API keys' windows and name the email by
// a digest (any length of text may be posted as an email).
func (c *Console) emailCeilings(r *http.Request, email string) []ceiling {
	addr := clientaddr.Group(c.ClientAddr.Addr(r))
	sum := sha256.Sum256([]byte(email))
	id := hex.EncodeToString(sum[:16])
	ceilings := []ceiling{{"console-signin:email-addr:" + id + ":" + addr, c.SignInLimits.PerEmailAddress}}
	if !c.knownDevice(r, email) {
		ceilings = append(ceilings, ceiling{"console-signin:email:" + id, c.SignInLimits.PerEmail})
	}
	return ceilings
}

// allow counts an attempt in each ceiling in turn, stopping at the first
// that refuses it. When the limiter fails, the attempt is refused rather
// than left unthrottled.
func (c *Console) allow(r *http.Request, ceilings ...ceiling) (time.Duration, bool) {
	for _, k := range ceilings {
		res, err := c.Limiter.Allow(r.Context(), k.key, k.limit)
		if err != nil {
			c.Log.Error("sign-in throttle", "err", err)
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
	u, err := c.Store.GetUserByEmail(ctx, email)
	if errors.Is(err, domain.ErrNotFound) {
		if err := c.Passwords.DummyVerify(ctx, pw); err != nil {
			return domain.User{}, false, fmt.Errorf("dummy verify: %w", err)
		}
		return domain.User{}, false, nil
	}
	if err != nil {
		return domain.User{}, false, fmt.Errorf("get user: %w", err)
	}
	ok, err := c.Passwords.Verify(ctx, u.PasswordHash, pw)
	if err != nil {
		return domain.User{}, false, fmt.Errorf("verify password of %s: %w", u.ID, err)
	}
	if !ok || !u.Active {
		return domain.User{}, false, nil
	}
	a, err := c.Store.GetAccount(ctx, u.AccountID)
	if err != nil {
		return domain.User{}, false, fmt.Errorf("get account: %w", err)
	}
	return u, a.Active, nil
}

func (c *Console) startSession(w http.ResponseWriter, r *http.Request, u domain.User) error {
	now := c.Now().UTC()
	// Expired rows are never served; clearing them here keeps the table small.
	if _, err := c.Store.DeleteExpiredSessions(r.Context(), now); err != nil {
		c.Log.Warn("delete expired sessions", "err", err)
	}
	token := newToken()
	h := sha256.Sum256([]byte(token))
	if err := c.Store.CreateSession(r.Context(), domain.Session{
		TokenHash: h[:], UserID: u.ID, CSRF: newToken(), CreatedAt: now, ExpiresAt: now.Add(c.SessionTTL),
	}); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	setCookie(w, r, sessionCookie, token, c.SessionTTL)
	return nil
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := c.Store.DeleteSession(r.Context(), s.tokenHash); err != nil {
		return err
	}
	setCookie(w, r, sessionCookie, "", -time.Second)
	return seeOther("/console/signin")
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

type passwordPage struct {
	Forced bool
	formError
}

func (c *Console) showPassword(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	return c.renderForm(w, r, s, e, "password", "Choose a password", &passwordPage{Forced: s.user.MustChangePassword})
}

func (c *Console) handlePassword(w http.ResponseWriter, r *http.Request, s *session) error {
	current, next, confirm := r.PostForm.Get("current"), r.PostForm.Get("new"), r.PostForm.Get("confirm")
	// The current password is asked for a voluntary change: a session left
	// open on someone's screen must not be enough to take the account over.
	// A forced change follows a sign-in with the one-time password moments ago.
	if !s.user.MustChangePassword {
		// Each guess of the current password counts as a sign-in attempt
		// of this user from this address: the same throttle, the same
		// budget, so a session is no faster way to guess than sign-in.
		if retry, ok := c.allowSignIn(r, s.user.Email); !ok {
			return &pageError{Status: http.StatusTooManyRequests, RetryAfter: retry, Field: "current",
				Message: fmt.Sprintf("Too many password attempts. Try again in %d seconds.", int(retry.Seconds()))}
		}
		if ok, err := c.Passwords.Verify(r.Context(), s.user.PasswordHash, current); busy(r, err) {
			return errBusy(busySignIn)
		} else if err != nil {
			return err
		} else if !ok {
			return fieldError("current", "The current password is incorrect.")
		}
	}
	if err := password.Check(next); err != nil {
		return fieldError("new", capitalize(err.Error())+".")
	}
	if next != confirm {
		return fieldError("confirm", "The two new passwords differ.")
	}
	if same, err := c.Passwords.Verify(r.Context(), s.user.PasswordHash, next); busy(r, err) {
		return errBusy(busySignIn)
	} else if err == nil && same {
		return fieldError("new", "Choose a password different from the current one.")
	}
	hash, err := c.Passwords.Hash(r.Context(), next)
	if busy(r, err) {
		return errBusy(busySignIn)
	}
	if err != nil {
		return err
	}
	if err := c.Store.ChangePassword(r.Context(), s.user.ID, hash, s.tokenHash); err != nil {
		return err
	}
	return seeOther("/console/?done=password")
}

// capitalize upper-cases the first letter of a service message, never a
// byte of a multi-byte character.
func capitalize(s string) string {
	if s == "" || s[0] >= utf8.RuneSelf {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (c *Console) handleHome(w http.ResponseWriter, r *http.Request, s *session) error {
	target := "/console/agents"
	if s.user.Role.CanManageKeys() {
		target = "/console/developers"
	}
	if r.URL.Query().Get("done") == "password" {
		target += "?done=password"
	}
	return seeOther(target)
}
