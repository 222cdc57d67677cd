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

// Admit is AdmitWatching without a watch.
func (a *Authenticator) Admit(ctx context.Context, token string, now time.Time, lim ratelimit.Limiter, gate func(domain.APIKey) error) (domain.APIKey, ratelimit.Result, error) {
	k, res, _, err := a.AdmitWatching(ctx, token, now, lim, gate, nil)
	return k, res, err
}
