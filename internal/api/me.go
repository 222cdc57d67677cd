package api

import (
	"net/http"

	"github.com/agentapi/agentapi/internal/domain"
)

// keyObject is the contract's API key object, as GET /me describes it.
type keyObject struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	Description        string         `json:"description"`
	Prefix             string         `json:"prefix"`
	Scopes             []domain.Scope `json:"scopes"`
	RateLimitPerMinute int            `json:"rate_limit_per_minute"`
	LastUsedAt         *string        `json:"last_used_at"`
	ExpiresAt          *string        `json:"expires_at"`
	// AllowedIPs is the key's IP allowlist; [] when any address may use it.
	AllowedIPs []string `json:"allowed_ips"`
}

func (s *Server) handleMe() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.noQuery(w, r) {
			return
		}
		a := authFrom(r.Context())
		k := a.key
		// The stored last_used_at lags by up to a second (write-behind);
		// this request is the latest use, so it is what /me shows.
		now := a.now
		buf := getAppendBuf()
		defer putAppendBuf(buf)
		*buf = appendKeyBody(*buf, keyObject{
			ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix,
			Scopes: k.Scopes, RateLimitPerMinute: k.RateLimitPerMinute,
			LastUsedAt: formatTimePtr(&now), ExpiresAt: formatTimePtr(k.ExpiresAt),
			AllowedIPs: k.AllowedIPs.Strings(),
		})
		writeJSONBytes(w, http.StatusOK, *buf)
	})
}
