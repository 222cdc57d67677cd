package api

import (
	"context"
	"errors"
	"net/http"
	"path"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// auth is what the authentication step learned about a request.
type auth struct {
	key domain.APIKey
	now time.Time
	// listVersion is the account's agent-list version, read with the rate
	// limit decision of a GET /v1/ai-agents (keys.Request.List).
	listVersion agents.ListVersion
}

// authFrom is the key serveV1 admitted for the request of ctx.
func authFrom(ctx context.Context) auth {
	return ctx.Value(ctxLogAttrs).(*recorder).auth
}

// refuseQueryCredential answers, and reports true, a request with a
// credential in its query string.
func (s *Server) refuseQueryCredential(w http.ResponseWriter, r *http.Request) bool {
	if !hasQueryCredential(r.URL.RawQuery) {
		return false
	}
	s.metrics.AuthFailure("query_credential")
	if s.limitAnonymous(w, r, false) {
		writeError(w, r, s.log, domain.Errorf(domain.CodeAccessDenied,
			"API keys are accepted only in the Authorization header, never in the query string; this request was refused and the key should be considered exposed."))
	}
	return true
}

// serveV1 runs the order of checks (docs/api.md) up to routing.
func (s *Server) serveV1(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rec := ctx.Value(ctxLogAttrs).(*recorder) // New puts serveV1 under observe
	// 1. A credential in the query string is refused before anything else.
	rec.route = "/v1 (refused before routing)"
	// The contract refuses it "before anything else is done": it carries
	// the per-address limiter's headers, but past that limit it is still
	// 403, never 429 (docs/api.md, Authentication).
	if s.refuseQueryCredential(w, r) {
		return
	}
	// 2. Exactly one Authorization header with a Bearer token.
	headers := r.Header["Authorization"] // canonical key: no Values lookup
	token, ok := "", len(headers) == 1
	if ok {
		token, ok = credential.ParseBearer(headers[0])
	}
	if !ok {
		s.metrics.AuthFailure("header")
		s.refuseAnonymous(w, r, domain.Errorf(domain.CodeInvalidCredentials,
			"The Authorization header is missing or malformed; send Authorization: Bearer <API key>."))
		return
	}
	// 3. The key itself, its IP allowlist (against the address
	// --trusted-proxies yields) and 4. its rate limit (refused requests
	// are not counted), in one step: with Redis on PostgreSQL a key held
	// in memory is checked and limited in one Redis round trip
	// (keys.Authenticator.Admit).
	now := s.now().UTC()
	ad, err := s.authn.Admit(ctx, keys.Request{Token: token, Addr: rec.client, Now: now,
		List: r.Method == http.MethodGet && r.URL.Path == "/v1/ai-agents"})
	var refused *keys.Refused
	var outside *keys.AddressRefused
	var limitFailed *keys.LimitFailed
	switch {
	case errors.As(err, &refused):
		// A key identified (its secret proven) and refused all the same
		// is recorded for its account: its owner sees what it sent.
		rec.keyID, rec.acctID = refused.Key.ID, refused.Key.AccountID
		s.metrics.AuthFailure(refused.Reason)
		s.refuseAnonymous(w, r, err)
		return
	case errors.As(err, &outside):
		// A refusal counts against the address's limiter, never against
		// the key's limit.
		rec.keyPfx = outside.Key.Prefix
		rec.keyID, rec.acctID = outside.Key.ID, outside.Key.AccountID
		s.metrics.AuthFailure("address_not_allowed")
		s.refuseAnonymous(w, r, err)
		return
	case errors.As(err, &limitFailed):
		rec.keyPfx = limitFailed.Key.Prefix
		rec.keyID, rec.acctID = limitFailed.Key.ID, limitFailed.Key.AccountID
		writeError(w, r, s.log, err)
		return
	case err != nil:
		// The store failed before any key was identified: the answer is
		// the 500, with the per-address limiter's headers, as every /v1
		// response carries rate-limit headers.
		if s.limitAnonymous(w, r, false) {
			writeError(w, r, s.log, err)
		}
		return
	}
	key, res := ad.Key, ad.Limit
	rec.keyPfx = key.Prefix
	rec.keyID, rec.acctID = key.ID, key.AccountID
	setRateHeaders(w.Header(), res, now, "per-key")
	if !res.Allowed {
		s.metrics.RateLimited("key")
		s.writeRateLimited(w, r, res)
		return
	}
	s.toucher.Touch(key.ID, now)
	// 5. Routing: an unclean path is no endpoint (a mux would redirect it),
	// and HEAD is a method no /v1 route has (a mux would answer it as GET;
	// docs/api.md: a method the path does not have is 404).
	if p := r.URL.Path; r.Method == http.MethodHead || p != "/v1/" && path.Clean(p) != p {
		rec.route = "unmatched"
		writeError(w, r, s.log, notFoundRoute(r))
		return
	}
	// The key reaches the handlers through the request's recorder, which
	// its context already holds (authFrom): no second copy of the request.
	rec.auth = auth{key: key, now: now, listVersion: ad.List}
	s.mux.ServeHTTP(w, r)
	rec.route = r.Pattern
}
