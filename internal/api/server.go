// Package api serves agentapi's public HTTP API under /v1, with the health
// endpoints, and mounts the console beside it on one handler.
//
// Every /v1 request passes the checks of docs/api.md in their order:
// query-string credential, Authorization header, key, rate limit, route,
// scope, agent restriction, validation, then the handler.
package api

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/apidocs"
	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/metrics"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/webhooks"
)

// DefaultUnauthRateLimit is the per-address ceiling for requests that
// identify no key (docs/api.md, Rate limits).
const DefaultUnauthRateLimit = 300

// Config holds a Server's dependencies; nothing is global.
type Config struct {
	Store   *store.Store
	Limiter ratelimit.Limiter // per key
	// ClientAddr finds a request's client address (for the per-address
	// limit and the log); nil: the connection's peer.
	ClientAddr *clientaddr.Resolver
	// UnauthLimiter counts requests that identify no key, per client address.
	UnauthLimiter   ratelimit.Limiter
	UnauthRateLimit int
	Toucher         *keys.Toucher
	Log             *slog.Logger
	Now             func() time.Time
	// CursorKey authenticates pagination cursors; every instance sharing a
	// database must use the same one (store.Secret).
	CursorKey []byte
	// LLM answers questions; nil when no model is configured.
	LLM *llm.Client
	// StreamKeepAlive is the silence after which a streamed answer sends a
	// keep-alive comment; zero means DefaultStreamKeepAlive.
	StreamKeepAlive time.Duration
	// Console is mounted at /console/ when set.
	Console http.Handler
	// Metrics receives request, auth, rate-limit and store figures; nil is fine.
	Metrics *metrics.Metrics
	// Background counts the writes a request starts but does not wait for
	// (the audit event of an expired key's use); a graceful stop waits on it
	// after the server drains, so they are not lost. Nil: not counted.
	Background *sync.WaitGroup
	// SecretScanningKeys verify GitHub's leak reports at POST
	// /secret-scanning/github; nil: the endpoint is off (404).
	SecretScanningKeys *secretscan.Keys
	// Usage records the requests that identified a key (internal/usage);
	// nil: not recorded.
	Usage UsageRecorder
	// Fresh keeps the keys and agent-list pages held in memory fresh
	// (internal/fresh); nil: a tracker of Store without Redis. Serve gives
	// the one whose mirror lives on the Limiter's Redis.
	Fresh *fresh.Tracker
	// Authenticator and ListCache hold keys and agent-list pages in memory
	// (their counters are serve's metrics); nil: new ones.
	Authenticator *keys.Authenticator
	ListCache     *agents.ListCache
	// MaxModelCalls and MaxModelCallsPerAccount cap the questions in
	// progress on this instance and per account; zero: the defaults.
	MaxModelCalls, MaxModelCallsPerAccount int
	// Webhooks manages webhook endpoints; nil: one with no --webhook-allow
	// ranges.
	Webhooks *webhooks.Service
	// MaxBodyMemory bounds the bytes of request bodies read and decoded at
	// once; zero: DefaultMaxBodyMemory. Ignored when Bodies is set.
	MaxBodyMemory int64
	// Bodies is that budget, shared with the console's forms; nil: a new
	// one of MaxBodyMemory bytes.
	Bodies *bodybudget.Budget
}

// DefaultMaxBodyMemory is Config.MaxBodyMemory's default (docs/api.md, Limits).
const DefaultMaxBodyMemory = bodybudget.DefaultTotal

// Server is the /v1 API.
type Server struct {
	store       *store.Store
	fresh       *fresh.Tracker
	limiter     ratelimit.Limiter
	unauth      ratelimit.Limiter
	clients     *clientaddr.Resolver
	unauthLimit int
	toucher     *keys.Toucher
	log         *slog.Logger
	now         func() time.Time
	metrics     *metrics.Metrics
	authn       *keys.Authenticator
	usage       UsageRecorder
	models      *modelCalls
	bodies      *bodybudget.Budget // Config.Bodies
	mux         *http.ServeMux
}

// New returns the whole HTTP handler: /v1, /healthz, /readyz and the console.
// It refuses a Config that lacks a dependency every request needs (Store,
// Limiter, UnauthLimiter, Toucher, CursorKey), rather than fail on the first
// request.
func New(cfg Config) (http.Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	return s.observe(s.dispatch(s.root(cfg))), nil
}

// check names the dependencies every request needs that cfg lacks.
func (cfg *Config) check() error {
	var missing []string
	for _, d := range []struct {
		name   string
		absent bool
	}{
		{"Store", cfg.Store == nil},
		{"Limiter", cfg.Limiter == nil},
		{"UnauthLimiter", cfg.UnauthLimiter == nil},
		{"Toucher", cfg.Toucher == nil},
		{"CursorKey", len(cfg.CursorKey) == 0},
	} {
		if d.absent {
			missing = append(missing, d.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("api: config lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// newServer wires the /v1 API from cfg, its optional settings defaulted,
// with its routes.
func newServer(cfg Config) (*Server, error) {
	tracker := cfg.Fresh
	if tracker == nil {
		tracker = fresh.New(cfg.Store, fresh.Options{})
	}
	authn := cfg.Authenticator
	if authn == nil {
		var err error
		authn, err = keys.NewAuthenticator(keys.AuthConfig{Store: cfg.Store, Fresh: tracker, Limiter: cfg.Limiter,
			Log: cfg.Log, Metrics: cfg.Metrics, Background: cfg.Background})
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	s := &Server{
		store: cfg.Store, limiter: cfg.Limiter, unauth: cfg.UnauthLimiter, clients: cfg.ClientAddr,
		unauthLimit: cfg.UnauthRateLimit, toucher: cfg.Toucher, log: cmp.Or(cfg.Log, slog.New(slog.DiscardHandler)),
		now: cfg.Now, metrics: cfg.Metrics, authn: authn, usage: cfg.Usage, fresh: tracker,
		models: newModelCalls(cfg.MaxModelCalls, cfg.MaxModelCallsPerAccount),
		bodies: cfg.Bodies, mux: http.NewServeMux(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.bodies == nil {
		s.bodies = bodybudget.New(cmp.Or(cfg.MaxBodyMemory, DefaultMaxBodyMemory), 0)
	}
	if s.unauthLimit <= 0 {
		s.unauthLimit = DefaultUnauthRateLimit
	}
	s.routes(s.mux, cfg)
	return s, nil
}

// root serves what is not /v1: the health endpoints, the API reference,
// the secret-scanning endpoint and the console when configured, and 404.
func (s *Server) root(cfg Config) *http.ServeMux {
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	root.HandleFunc("GET /readyz", s.serveReady)
	// The API reference needs no key and no session (internal/apidocs).
	root.Handle("GET "+apidocs.Path, apidocs.Handler())
	root.Handle("GET "+apidocs.BundlePath, apidocs.Handler())
	if cfg.SecretScanningKeys != nil {
		root.Handle("POST /secret-scanning/github", s.serve(s.withBody(s.handleSecretScanning(cfg.SecretScanningKeys, keys.New(cfg.Store, s.now)))))
	}
	if cfg.Console != nil {
		root.Handle("/console/", cfg.Console)
		root.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	}
	root.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, domain.Errorf(domain.CodeNotFound, "There is no such endpoint; the API lives under /v1."))
	}))
	return root
}

// dispatch sends /v1 requests to the API and the rest to root.
//
// /v1 bypasses root's ServeMux: a mux would redirect unclean paths
// (//, /./) before authentication, and the contract wants every /v1
// request authenticated first and unknown paths answered 404.
func (s *Server) dispatch(root http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isV1(r.URL.Path) {
			if uncleanPath(r.URL.Path) {
				// A mux would answer 301 to the cleaned path; an API answers 404.
				writeError(w, r, s.log, domain.Errorf(domain.CodeNotFound, "There is no such endpoint; the API lives under /v1."))
				return
			}
			root.ServeHTTP(w, r)
			return
		}
		setCORS(w.Header())
		switch {
		case isPreflight(r):
			s.servePreflight(w, r)
		case isOpenAPIRequest(r):
			// No key needed, so it counts against the address's limit of
			// requests without one, and carries its headers like every
			// other /v1 response.
			if s.limitAnonymous(w, r, true) {
				serveOpenAPI(w, r)
			}
		default:
			s.serveV1(w, r)
		}
	})
}

// isOpenAPIRequest reports whether r asks for the API description:
// GET or HEAD of /v1/openapi.json without a query string.
func isOpenAPIRequest(r *http.Request) bool {
	return r.URL.Path == "/v1/openapi.json" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.RawQuery == ""
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), store.AuthReadTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorFields{
			Code: domain.CodeServerError, Message: "The store is unreachable.",
		}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// uncleanPath reports a path with empty, "." or ".." segments.
func uncleanPath(p string) bool {
	return strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") || !strings.HasPrefix(p, "/")
}
