package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
)

// refuseAnonymous answers a request that identified no key. Such requests
// are limited per client address; past the limit they get 429 instead.
func (s *Server) refuseAnonymous(w http.ResponseWriter, r *http.Request, refusal error) {
	if s.limitAnonymous(w, r, true) {
		writeError(w, r, s.log, refusal)
	}
}

// limitAnonymous counts a request that identifies no key against its client
// address's limit and sets that limiter's headers. Past the limit it
// answers 429 itself when refuse is set, and reports false; it also
// answers, and reports false, when the limiter fails.
func (s *Server) limitAnonymous(w http.ResponseWriter, r *http.Request, refuse bool) bool {
	// The client address as observe resolved it (New puts everything
	// under observe). IPv6 counts per /64 (clientaddr.Group): a host is
	// routinely given a whole /64. The request log keeps the full address.
	addr := r.Context().Value(ctxLogAttrs).(*recorder).client
	res, err := s.unauth.Allow(r.Context(), "addr:"+clientaddr.Group(addr), s.unauthLimit)
	if err != nil {
		writeError(w, r, s.log, fmt.Errorf("rate limit: %w", err))
		return false
	}
	setRateHeaders(w.Header(), res, s.now(), "per-address")
	if !res.Allowed && refuse {
		s.metrics.RateLimited("address")
		s.writeRateLimited(w, r, res)
		return false
	}
	return true
}

// setRateHeaders writes the contract's X-RateLimit-* fields and, consistent
// with them, the IETF httpapi RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers: q quota, w window, r remaining,
// t seconds until reset).
//
// The names are spelled as http.Header keeps and sends them (field names
// are case-insensitive: X-Ratelimit-Limit is the contract's
// X-RateLimit-Limit), so Header.Set stores each as given instead of
// building its canonical form again on every request.
func setRateHeaders(h http.Header, res ratelimit.Result, now time.Time, policy string) {
	reset := res.Reset.Unix()
	limit, remaining := strconv.Itoa(res.Limit), strconv.Itoa(res.Remaining)
	h.Set("X-Ratelimit-Limit", limit)
	h.Set("X-Ratelimit-Remaining", remaining)
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset, 10))
	h.Set("Ratelimit-Policy", `"`+policy+`";q=`+limit+";w=60")
	h.Set("Ratelimit", `"`+policy+`";r=`+remaining+";t="+strconv.FormatInt(max(reset-now.Unix(), 0), 10))
}

// writeRateLimited answers 429 for a refused res, with Retry-After, which
// goes with 429 only.
func (s *Server) writeRateLimited(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
	secs := max(int((res.RetryAfter+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, domain.Errorf(domain.CodeRateLimitExceeded,
		"Rate limit of %d requests per minute exceeded; retry after %d seconds.", res.Limit, secs))
}
