// Package console is agentapi's server-rendered web console, mounted at
// /console/ beside the API: sign-in for an account's users, Settings →
// Developers (API keys, their rotation and audit trail, webhook
// endpoints and their deliveries) for Owners and Admins, users for Owners,
// and the account's AI agents.
//
// Every page is plain HTML from html/template with embedded CSS and one
// small script (copy buttons, confirmation dialogs); everything works
// without it. State lives in the store (sessions, keys) and in the shared
// rate limiter (sign-in throttle), and the device cookie's key is a server
// secret in the store, so any number of instances can serve it.
package console

import (
	"cmp"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/webhooks"
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
	// Webhooks manages the account's webhook endpoints (serve builds it
	// with --webhook-allow); nil: webhooks.New(Store, Now, nil), which
	// accepts https:// endpoints only.
	Webhooks *webhooks.Service
	// Bodies is the budget of request-body memory that forms are read
	// under, the API's (serve --max-body-memory); nil: a budget of the
	// console's own, of bodybudget.DefaultTotal.
	Bodies *bodybudget.Budget
	// MailEnabled reports whether serve sends notice emails (--smtp-url);
	// without it the console's notices say that no email is sent.
	MailEnabled bool
	// LiveTail bounds the Logs page's live tail; a zero field is
	// DefaultLiveTail's.
	LiveTail LiveTail
}

// Console serves /console/: its Config, defaults filled in, and what it
// builds from it.
type Console struct {
	Config
	agents    *agents.Service
	accounts  *accounts.Service
	deviceKey serverKey
	revealKey serverKey
	pages     map[string]*template.Template
	handler   http.Handler
	tails     tails
}

// New returns the console's handler, to be mounted at /console/.
func New(cfg Config) *Console {
	c := &Console{Config: cfg, deviceKey: serverKey{name: deviceSecret}, revealKey: serverKey{name: revealSecret}}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	// A zero or negative ceiling or TTL is the default's.
	lim := &c.SignInLimits
	lim.PerAddress = cmp.Or(max(lim.PerAddress, 0), DefaultSignInLimits.PerAddress)
	lim.PerEmailAddress = cmp.Or(max(lim.PerEmailAddress, 0), DefaultSignInLimits.PerEmailAddress)
	lim.PerEmail = cmp.Or(max(lim.PerEmail, 0), DefaultSignInLimits.PerEmail)
	c.SessionTTL = cmp.Or(max(c.SessionTTL, 0), DefaultSessionTTL)
	if c.Passwords == nil {
		c.Passwords = password.NewGate(0, 0)
	}
	if c.Bodies == nil {
		c.Bodies = bodybudget.New(bodybudget.DefaultTotal, 0)
	}
	// The API's agent rules, on the same store and clock.
	c.agents = agents.New(c.Store, c.Now)
	// Users' rules; its hashes go through the console's capped gate.
	c.accounts = accounts.New(c.Store, c.Passwords.Hash, c.Now)
	if c.Webhooks == nil {
		c.Webhooks = webhooks.New(c.Store, c.Now, nil)
	}
	c.LiveTail.MaxDuration = cmp.Or(max(c.LiveTail.MaxDuration, 0), DefaultLiveTail.MaxDuration)
	c.LiveTail.PerSession = cmp.Or(max(c.LiveTail.PerSession, 0), DefaultLiveTail.PerSession)
	c.LiveTail.Poll = cmp.Or(max(c.LiveTail.Poll, 0), DefaultLiveTail.Poll)
	c.pages = parsePages(c.Now)
	mux := http.NewServeMux()
	c.routes(mux)
	c.handler = securityHeaders(c.crossOrigin(bounded(mux)))
	return c
}

// pageTimeout bounds a console request, as the API bounds its own: a store
// that stops answering without closing its connection costs a page a 500
// after at most this long, and nothing the page started outlives it.
const pageTimeout = 10 * time.Second

// bounded runs a request within pageTimeout; a POST's form keeps its share
// of the body budget (readForm) until the request ends.
func bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == tailPath {
			// A stream, bounded by LiveTail.MaxDuration; each of its
			// reads by pageTimeout (logs_tail.go).
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
		defer cancel()
		if r.Method == http.MethodPost {
			var release func()
			ctx, release = withHeldForms(ctx)
			defer release()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// routes lists every console page in one place. Access levels (steps.go):
// public (no session), anyUser (any active user, even one who must still
// choose a password), signedIn, manager (Owner or Admin, by
// keys.Service.Manager; anyone else gets 404), owner (Owners only; 404).
// crossOrigin guards every route, around the mux.
func (c *Console) routes(mux *http.ServeMux) {
	public := func(h handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r, nil); err != nil {
				c.fail(w, r, nil, err)
			}
		})
	}
	anyUser := func(h handler) http.Handler { return c.page(h, c.formToken) }
	signedIn := func(h handler) http.Handler { return c.page(h, passwordChosen, c.formToken) }
	manager := func(h handler) http.Handler { return c.page(h, passwordChosen, c.managerOnly, c.formToken) }
	owner := func(h handler) http.Handler { return c.page(h, passwordChosen, ownerOnly, c.formToken) }

	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console/static/", c.staticHandler(static))

	mux.Handle("GET /console/signin", public(c.handleSignInForm))
	mux.Handle("POST /console/signin", public(form(c.handleSignIn, c.showSignIn)))
	mux.Handle("POST /console/signout", anyUser(c.handleSignOut))
	mux.Handle("GET /console/password", anyUser(blank(c.showPassword)))
	mux.Handle("POST /console/password", anyUser(form(c.handlePassword, c.showPassword)))
	mux.Handle("GET "+notificationsPath, signedIn(c.handleNotifications))
	mux.Handle("GET /console/{$}", signedIn(c.handleHome))
	mux.Handle("POST "+searchPath, signedIn(handleSearch))

	mux.Handle("GET /console/developers", manager(c.handleKeys))
	mux.Handle("GET /console/developers/keys/new", manager(blank(c.showNewKeyForm)))
	mux.Handle("POST /console/developers/keys", manager(form(c.handleCreateKey, c.showNewKeyForm)))
	mux.Handle("GET /console/developers/keys/{id}/created", manager(c.handleCreated))
	// The addresses forms post to, opened with GET (a bookmark, a history
	// entry), land on the page of what they make.
	mux.Handle("GET /console/developers/keys", manager(func(http.ResponseWriter, *http.Request, *session) error {
		return seeOther("/console/developers")
	}))
	mux.Handle("GET /console/developers/keys/{id}", manager(c.handleKey))
	mux.Handle("GET /console/developers/keys/{id}/rotate", manager(blank(c.showRotateForm)))
	mux.Handle("POST /console/developers/keys/{id}/rotate", manager(form(c.handleRotateKey, c.showRotateForm)))
	mux.Handle("GET /console/developers/keys/{id}/edit", manager(blank(c.showEditForm)))
	mux.Handle("POST /console/developers/keys/{id}/edit", manager(form(c.handleEditKey, c.showEditForm)))
	mux.Handle("GET /console/developers/keys/{id}/revoke", manager(c.handleRevokeForm))
	mux.Handle("POST /console/developers/keys/{id}/revoke", manager(c.handleRevokeKey))
	mux.Handle("POST /console/developers/keys/{id}/notices/dismiss", manager(c.handleDismissNotice))
	mux.Handle("GET /console/developers/audit", manager(c.handleAudit))
	mux.Handle("GET /console/developers/health", manager(c.handleKeyHealth))
	mux.Handle("GET /console/developers/policy", manager(blank(c.showPolicy)))
	mux.Handle("POST /console/developers/policy", owner(form(c.handleSetPolicy, c.showPolicy)))
	mux.Handle("GET /console/developers/logs", manager(c.handleLogs))
	mux.Handle("GET "+tailPath, manager(c.handleTail))
	mux.Handle("GET /console/developers/logs/{id}", manager(c.handleLog))
	mux.Handle("GET /console/overview", manager(c.handleOverview))
	mux.Handle("GET /console/account", manager(blank(c.showAccount)))
	mux.Handle("POST /console/account", owner(form(c.handleRenameAccount, c.showAccount)))
	c.webhookRoutes(mux, manager)

	mux.Handle("GET /console/users", owner(blank(c.showUsers)))
	mux.Handle("POST /console/users", owner(form(c.handleInvite, c.showUsers)))
	mux.Handle("GET /console/users/{id}", owner(blank(c.showUser)))
	mux.Handle("POST /console/users/{id}/role", owner(form(c.handleSetRole, c.showUser)))
	mux.Handle("POST /console/users/{id}/password", owner(form(c.handleResetPassword, c.showUser)))
	mux.Handle("POST /console/users/{id}/reactivate", owner(form(c.handleReactivate, c.showUser)))
	mux.Handle("GET /console/users/{id}/deactivate", owner(c.handleDeactivateForm))
	mux.Handle("POST /console/users/{id}/deactivate", owner(c.handleDeactivate))

	mux.Handle("GET /console/agents", signedIn(blank(c.showAgents)))
	mux.Handle("POST /console/agents", manager(form(c.handleCreateAgent, c.showAgents)))
	mux.Handle("GET /console/agents/{id}", signedIn(blank(c.showAgentForm)))
	mux.Handle("POST /console/agents/{id}", manager(form(c.handleUpdateAgent, c.showAgentForm)))
	mux.Handle("POST /console/agents/{id}/name", manager(form(c.handleRenameAgent, c.showAgentForm)))
	mux.Handle("POST /console/agents/{id}/enabled", manager(c.handleSetAgentEnabled))

	// Everything else, including other methods on the paths above, is a
	// plain 404: the console reveals no route a user may not use.
	mux.Handle("/console/", signedIn(func(http.ResponseWriter, *http.Request, *session) error { return errNotFound }))
}

// securityHeaders puts the console's protections on every response: a
// CSP allowing only the console's own script and style (no inline code)
// and connections (the Logs page's live tail) to its own origin only, no
// framing, no MIME sniffing, no referrer beyond the origin, and no caching
// of pages (static assets override Cache-Control).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
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

// staticHandler serves the console's assets. A path that names no file (a
// directory included: no listings) gets the console's own 404 page, as
// every other console path does, not net/http's plain text.
func (c *Console) staticHandler(root fs.FS) http.Handler {
	files := http.StripPrefix("/console/static/", http.FileServerFS(root))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/console/static/")
		if st, err := fs.Stat(root, name); err != nil || st.IsDir() {
			c.renderError(w, r, nil, http.StatusNotFound, errNotFound.Message)
			return
		}
		// Assets hold nothing private and change only with the binary.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
