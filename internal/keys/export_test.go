package keys

import (
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
)

// HeldKey is heldKey: the key held in memory for prefix, if any.
func (a *Authenticator) HeldKey(prefix string) (keyLookup, bool) { return a.heldKey(prefix) }

// Epoch is the key epoch under which the lookup's key was read.
func (l keyLookup) Epoch() int64 { return l.epoch }

// KeyByPrefix is lookupKey: the key through the Authenticator's cache.
func (a *Authenticator) KeyByPrefix(ctx context.Context, prefix string) (domain.APIKey, bool, error) {
	l, err := a.lookupKey(ctx, prefix)
	return l.Key, l.AccountActive, err
}

// AdmitFrom is Admit of token from addr at now.
func (a *Authenticator) AdmitFrom(ctx context.Context, token string, now time.Time, addr string) (domain.APIKey, ratelimit.Result, error) {
	ad, err := a.Admit(ctx, Request{Token: token, Now: now, Addr: addr})
	return ad.Key, ad.Limit, err
}
