// Package console is agentapi's server-rendered web console, mounted at
// /console/ beside the API: sign-in for an account's users, Settings →
// Developers (API keys, their rotation and audit trail) for Owners and
// Admins, users for Owners, and the account's AI agents.
//
// Every page is plain HTML from html/template with embedded CSS and one
// small script (copy buttons, confirmation dialogs); everything works
// without it. State lives in the store (sessions, keys) and in the shared
// rate limiter (sign-in throttle), and the device cookie's key is a server
// secret in the store, so any number of instances can serve it.
package console

import (
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultSessionTTL is Config.SessionTTL when 0.
const DefaultSessionTTL = 12 * time.Hour

// SignInLimits are the sign-in throttle's ceilings, in attempts a minute.
// An attempt must pass all three; one a ceiling refuses is not counted by
// the ceilings after it (in this order).
type SignInLimits struct {
	// PerAddress counts a client address's attempts on any email.
	PerAddress int
	// PerEmailAddress counts attempts on one email from one address: a
	// guesser spends their own budget, not the user's elsewhere.
	PerEmailAddress int
	// PerEmail counts attempts on one email from every address; a browser
	// carrying that email's device cookie (set by a successful sign-in) is
	// exempt, so nobody can lock a user out of the console.
	PerEmail int
}

// DefaultSignInLimits are the decided ceilings.
var DefaultSignInLimits = SignInLimits{PerAddress: 30, PerEmailAddress: 10, PerEmail: 100}

// Config holds the console's dependencies; nothing is global.
type Config struct {
	Store *store.Store
	// Keys is the one place the role rule and the key lifecycle live.
	Keys *keys.Service
	// Limiter throttles sign-in attempts; Redis-backed when instances share
	// state, so the throttle holds across them.
	Limiter ratelimit.Limiter
	Log     *slog.Logger
	Now     func() time.Time
	// SignInLimits are the sign-in throttle's ceilings; a zero field is
	// DefaultSignInLimits's.
	SignInLimits SignInLimits
	// Passwords runs every password hash and verification, capping how
	// many run at once; nil: password.NewGate(0, 0).
	Passwords *password.Gate
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// ClientAddr finds a request's client address, for the sign-in
	// throttle; nil: the connection's peer.
	ClientAddr *clientaddr.Resolver
}

// Console serves /console/.
type Console struct {
	store      *store.Store
	keys       *keys.Service
	limiter    ratelimit.Limiter
	log        *slog.Logger
	now        func() time.Time
	limits     SignInLimits
	passwords  *password.Gate
	sessionTTL time.Duration
	clients    *clientaddr.Resolver
	deviceKey  deviceKey
	pages      map[string]pageTemplate
	handler    http.Handler
}

// New returns the console's handler, to be mounted at /console/.
func New(cfg Config) *Console {
	c := &Console{
		store: cfg.Store, keys: cfg.Keys, limiter: cfg.Limiter, log: cfg.Log, now: cfg.Now,
		limits: cfg.SignInLimits, passwords: cfg.Passwords, sessionTTL: cfg.SessionTTL, clients: cfg.ClientAddr,
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.limits.PerAddress = positiveOr(c.limits.PerAddress, DefaultSignInLimits.PerAddress)
	c.limits.PerEmailAddress = positiveOr(c.limits.PerEmailAddress, DefaultSignInLimits.PerEmailAddress)
	c.limits.PerEmail = positiveOr(c.limits.PerEmail, DefaultSignInLimits.PerEmail)
	if c.passwords == nil {
		c.passwords = password.NewGate(0, 0)
	}
	if c.sessionTTL <= 0 {
		c.sessionTTL = DefaultSessionTTL
	}
	c.pages = parsePages()
	mux := http.NewServeMux()
	c.routes(mux)
	c.handler = securityHeaders(mux)
	return c
}

func positiveOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// routes lists every console page in one place. Access levels: public (no
// session), signedIn (any active user), manager (Owner or Admin, by
// keys.Service.Manager; anyone else gets 404), owner (Owners only; 404).
func (c *Console) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console/static/", staticHandler(static))

	mux.HandleFunc("GET /console/signin", c.handleSignInForm)
	mux.HandleFunc("POST /console/signin", c.handleSignIn)
	mux.Handle("POST /console/signout", c.guard(signedIn|allowMustChange, c.handleSignOut))
	mux.Handle("GET /console/password", c.guard(signedIn|allowMustChange, c.handlePasswordForm))
	mux.Handle("POST /console/password", c.guard(signedIn|allowMustChange, c.handlePassword))
	mux.Handle("GET /console/{$}", c.guard(signedIn, c.handleHome))

	mux.Handle("GET /console/developers", c.guard(manager, c.handleKeys))
	mux.Handle("GET /console/developers/keys/new", c.guard(manager, c.handleNewKeyForm))
	mux.Handle("POST /console/developers/keys", c.guard(manager, c.handleCreateKey))
	// A credential page is the answer to a POST, at the POST's address;
	// going to that address again (Enter in the address bar, a bookmark)
	// lands on the page of what was made, never the credential again.
	mux.Handle("GET /console/developers/keys", c.guard(manager, redirectTo(func(*http.Request) string { return "/console/developers" })))
	mux.Handle("GET /console/developers/keys/{id}", c.guard(manager, c.handleKey))
	mux.Handle("POST /console/developers/keys/{id}/rotate", c.guard(manager, c.handleRotateKey))
	mux.Handle("GET /console/developers/keys/{id}/rotate", c.guard(manager, redirectTo(func(r *http.Request) string {
		return "/console/developers/keys/" + url.PathEscape(r.PathValue("id"))
	})))
	mux.Handle("GET /console/developers/keys/{id}/revoke", c.guard(manager, c.handleRevokeForm))
	mux.Handle("POST /console/developers/keys/{id}/revoke", c.guard(manager, c.handleRevokeKey))
	mux.Handle("GET /console/developers/audit", c.guard(manager, c.handleAudit))

	mux.Handle("GET /console/users", c.guard(owner, c.handleUsers))
	mux.Handle("POST /console/users", c.guard(owner, c.handleInvite))
	mux.Handle("GET /console/users/{id}/deactivate", c.guard(owner, c.handleDeactivateForm))
	mux.Handle("POST /console/users/{id}/deactivate", c.guard(owner, c.handleDeactivate))

	mux.Handle("GET /console/agents", c.guard(signedIn, c.handleAgents))
	mux.Handle("GET /console/agents/{id}", c.guard(signedIn, c.handleAgent))
	mux.Handle("POST /console/agents/{id}", c.guard(manager, c.handleUpdateAgent))

	// Everything else, including other methods on the paths above, is a
	// plain 404: the console reveals no route a user may not use.
	mux.Handle("/console/", c.guard(signedIn, func(w http.ResponseWriter, r *http.Request, s *session) {
		c.notFound(w, r, s)
	}))
}

// redirectTo answers 303 to the address target gives.
func redirectTo(target func(*http.Request) string) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, target(r), http.StatusSeeOther)
	}
}

// securityHeaders puts the console's protections on every response: a
// CSP allowing only the console's own script and style (no inline code), no
// framing, no MIME sniffing, no referrer beyond the origin, and no caching
// of pages (static assets override Cache-Control).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

func staticHandler(root fs.FS) http.Handler {
	files := http.StripPrefix("/console/static/", http.FileServerFS(root))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		// Assets hold nothing private and change only with the binary.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
