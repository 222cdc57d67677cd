package api

import (
	"net/http"
)

// CORS (docs/api.md, CORS): keys travel only in the Authorization header,
// never in cookies, so /v1 answers scripts of any origin and never allows
// credentials. The console and the health endpoints send no CORS fields.

// The values are fixed: no response varies by Origin, so none needs Vary.
var (
	corsAllowOrigin   = []string{"*"}
	corsExposeHeaders = []string{"X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, " +
		"RateLimit, RateLimit-Policy, Retry-After, Location, Idempotent-Replayed"}
	corsAllowMethods = []string{"GET, POST, PUT, PATCH, DELETE"}
	corsAllowHeaders = []string{"Authorization, Content-Type, Idempotency-Key"}
	corsMaxAge       = []string{"600"}
)

// isV1 reports a path the API answers (and gives CORS fields).
func isV1(p string) bool {
	return p == "/v1" || len(p) > 3 && p[:4] == "/v1/"
}

// setCORS gives a /v1 response the fields every one carries, before
// anything can answer it: errors carry them too.
func setCORS(h http.Header) {
	// Assigned under their canonical keys: values shared by all, never
	// written into.
	h["Access-Control-Allow-Origin"] = corsAllowOrigin
	h["Access-Control-Expose-Headers"] = corsExposeHeaders
}

// isPreflight reports a CORS preflight: OPTIONS with Origin and
// Access-Control-Request-Method.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// servePreflight answers a preflight on any /v1 path: 204 with what a
// request may use, without a key, after only the query-credential check,
// counted against the client address's limit like any request without a
// key (429 past it).
func (s *Server) servePreflight(w http.ResponseWriter, r *http.Request) {
	r.Context().Value(ctxLogAttrs).(*recorder).route = "/v1 (preflight)"
	if s.refuseQueryCredential(w, r) || !s.limitAnonymous(w, r, true) {
		return
	}
	h := w.Header()
	h["Access-Control-Allow-Methods"] = corsAllowMethods
	h["Access-Control-Allow-Headers"] = corsAllowHeaders
	h["Access-Control-Max-Age"] = corsMaxAge
	w.WriteHeader(http.StatusNoContent)
}
