package api

import (
	"net/http"

	"github.com/agentapi/agentapi/internal/wire"
)

// keyObject is the contract's API key object, as GET /me describes it.
type keyObject = wire.Me

func handleMe(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r); err != nil {
		return err
	}
	a := authFrom(r.Context())
	k := a.key
	// The stored last_used_at lags by up to a second (write-behind);
	// this request is the latest use, so it is what /me shows.
	writeJSON(w, http.StatusOK, single{Data: keyObject{Key: wire.Key{
		ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix, Scopes: k.Scopes,
		RateLimitPerMinute: k.RateLimitPerMinute, LastUsedAt: formatTimePtr(&a.now), ExpiresAt: formatTimePtr(k.ExpiresAt),
	}, AllowedIPs: k.AllowedIPs.Strings()}})
	return nil
}
