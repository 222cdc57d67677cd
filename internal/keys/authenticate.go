package keys

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/metrics"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// Authenticator decides whether a presented credential names a usable key:
// its checksum, its secret, its environment, its account, its status, its
// IP allowlist, and then its rate limit. The API asks it once per request
// (Admit).
type Authenticator struct {
	store   *store.Store
	fresh   *fresh.Tracker
	lim     ratelimit.Decider
	log     *slog.Logger
	metrics *metrics.Metrics
	// background counts the audit writes started and not waited for.
	background *sync.WaitGroup
	// expired remembers keys whose use after expiry is already in the audit trail.
	expired sync.Map
	cache   *keyCache
}

// AuthConfig is what an Authenticator works with.
type AuthConfig struct {
	Store *store.Store
	// Fresh keeps the keys held in memory fresh; nil: a tracker of Store
	// without Redis (fresh.New).
	Fresh *fresh.Tracker
	// Limiter decides each admitted key's rate limit; nil: an in-process
	// limiter of this Authenticator's own.
	Limiter ratelimit.Limiter
	// Log receives failed audit writes (nil: discarded); Metrics the
	// lookup's duration (nil is fine); Background counts the audit writes
	// a request starts and does not wait for, so that a graceful stop can
	// (nil: not counted).
	Log        *slog.Logger
	Metrics    *metrics.Metrics
	Background *sync.WaitGroup
}

// NewAuthenticator returns an Authenticator reading keys from c.Store.
func NewAuthenticator(c AuthConfig) (*Authenticator, error) {
	if c.Store == nil {
		return nil, errors.New("authenticator: no store")
	}
	a := &Authenticator{store: c.Store, fresh: c.Fresh, log: cmp.Or(c.Log, slog.New(slog.DiscardHandler)), metrics: c.Metrics,
		background: cmp.Or(c.Background, &sync.WaitGroup{}), cache: newKeyCache(keyCacheMax)}
	if a.fresh == nil {
		a.fresh = fresh.New(c.Store, fresh.Options{})
	}
	switch l := c.Limiter.(type) {
	case nil:
		a.lim = ratelimit.NewMemory(nil)
	case ratelimit.Decider:
		a.lim = l
	default:
		a.lim = plainLimiter{l}
	}
	a.fresh.Hold(a.cache)
	return a, nil
}

// plainLimiter is a Limiter that decides no Ask beyond its key and limit.
type plainLimiter struct{ ratelimit.Limiter }

func (p plainLimiter) Decide(ctx context.Context, a ratelimit.Ask) (ratelimit.Result, ratelimit.Verdict, error) {
	res, err := p.Allow(ctx, a.Key, a.Limit)
	return res, ratelimit.Verdict{}, err
}

func (plainLimiter) Shared() bool { return false }

// Refused is the refusal of a credential. Every refusal gets the same
// answer, the invalid_credentials error it unwraps to; Reason (malformed,
// unknown, wrong_secret, env_mismatch, account_inactive, revoked, expired)
// is for metrics only. Key is the key the credential proved it names (its
// secret matched) when it was refused all the same — revoked, expired,
// env_mismatch, account_inactive — so that the request is recorded for
// its account (internal/usage); zero otherwise: a known prefix with a
// wrong secret identifies nobody, since prefixes are not secret.
type Refused struct {
	Reason string
	Key    domain.APIKey
}

func (e *Refused) Error() string { return "API key refused: " + e.Reason }

// Unwrap is the error the client gets, whatever the reason.
func (e *Refused) Unwrap() error {
	return domain.Errorf(domain.CodeInvalidCredentials, "The API key is invalid.")
}

// Authenticate returns the key the credential token names when it may be
// used at now; a *Refused error when it may not; any other error when the
// store failed before a key was identified.
//
// Timing tells no reason from another: a malformed token (failed checksum)
// is refused before any lookup; an unknown prefix costs the hash comparison
// a known one does; and every refusal of a found key costs the database
// read an unknown prefix makes (equaliseRefusal). Only admitted
// requests are spared it.
func (a *Authenticator) Authenticate(ctx context.Context, token string, now time.Time) (domain.APIKey, error) {
	cred, err := credential.Parse(token)
	if err != nil {
		return domain.APIKey{}, &Refused{Reason: "malformed"}
	}
	l, err := a.lookup(ctx, cred.Prefix, token)
	if err != nil {
		return domain.APIKey{}, err
	}
	return a.check(ctx, l, token, cred, now, false)
}

// expiredInUse puts the first use of an expired key into the account's
// audit trail (the console shows it), once per key per process; the store
// write happens off the request path.
func (a *Authenticator) expiredInUse(ctx context.Context, k domain.APIKey, now time.Time) {
	if _, seen := a.expired.LoadOrStore(k.ID, true); seen {
		return
	}
	ev := domain.AuditEvent{
		ID: domain.NewID(domain.PrefixEvent, now), AccountID: k.AccountID, KeyID: k.ID,
		Action: domain.AuditExpiredInUse, Actor: "system", Detail: "a request used the key after it expired",
		CreatedAt: now.Truncate(time.Millisecond),
	}
	a.background.Add(1)
	go func() {
		defer a.background.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.store.AddAuditEvent(ctx, ev); err != nil {
			a.log.Warn("audit expired key use", "key_prefix", k.Prefix, "err", err)
			a.expired.Delete(k.ID)
		}
	}()
}

// AddressRefused is the refusal of a valid key used from outside its IP
// allowlist (docs/api.md, "IP allowlists"); Key is the key, so that the
// request is recorded for its account. Such a refusal counts against the
// address's limiter, never against the key's limit.
type AddressRefused struct{ Key domain.APIKey }

func (e *AddressRefused) Error() string { return "API key used from outside its IP allowlist" }

// Unwrap is the error the client gets.
func (e *AddressRefused) Unwrap() error {
	return domain.Errorf(domain.CodeAccessDenied, "This API key may not be used from this address.")
}

// LimitFailed is a rate-limit decision that failed for a key that was
// identified (Key): the answer is a 500, not a refusal.
type LimitFailed struct {
	Key domain.APIKey
	Err error
}

func (e *LimitFailed) Error() string { return "rate limit: " + e.Err.Error() }
func (e *LimitFailed) Unwrap() error { return e.Err }

// Request is a credential presented for admission.
type Request struct {
	Token string
	// Addr is the client's address (text; what is not an address matches
	// no allowlist entry), checked against the key's allowlist.
	Addr string
	Now  time.Time
	// List asks for the account's agent-list version, read with the
	// decision (a request for the agent list).
	List bool
}

// Admission is an admitted credential: its key and rate-limit decision
// (Limit.Allowed false: refused for its limit), and, when Request.List
// asked and the decision was made in Redis on a Mirrored store, the
// account's agent-list version.
type Admission struct {
	Key   domain.APIKey
	Limit ratelimit.Result
	List  fresh.ListVersion
}

// staleRetries bounds how often Admit re-reads the store when the mirror
// disagrees with it; past it the decision is made without the guard, for
// the key the store has just vouched for.
const staleRetries = 2

// Admit authenticates the credential (Authenticate's rules), checks the
// key's IP allowlist against Request.Addr and decides its rate limit. On a
// Mirrored store (fresh.Tracker.Mirrored) with a limiter that shares its
// decisions, a key held in memory is used without asking the store, for
// as long as the mirror in Redis vouches for what it is held under (the
// decision's guard): while nothing changes a request costs one Redis
// round trip and no store round trip. A refusal from memory is given only
// once the store confirms it; a key the tracker knows is stale is read
// again whatever the mirror says; a mirror found behind the store is
// raised. Elsewhere, and while Redis is away, the key is looked up for
// each request (lookupKey: from memory while the store's check says
// nothing changed).
//
// Errors: *Refused and *AddressRefused are refusals; *LimitFailed a
// decision that failed for an identified key; any other, the store failed
// before a key was identified.
func (a *Authenticator) Admit(ctx context.Context, req Request) (Admission, error) {
	cred, err := credential.Parse(req.Token)
	if err != nil {
		return Admission{}, &Refused{Reason: "malformed"}
	}
	r := &admission{a: a, req: req, cred: cred, mirrored: a.fresh.Mirrored()}
	if r.mirrored && a.lim.Shared() {
		// With Redis away nothing can vouch for a held key: the store is
		// asked, as without a mirror.
		if r.l, r.held = a.heldKey(cred.Prefix); r.held {
			a.cache.hits.Add(1)
		}
	}
	return r.run(ctx)
}

// admission is one Admit.
type admission struct {
	a        *Authenticator
	req      Request
	cred     credential.Credential
	mirrored bool
	// l is the key as last read; held: from memory, not yet read from the
	// store during this request. An attempt with held false reads it.
	l    keyLookup
	held bool
	// behind is the mirror as a decision found it when it did not vouch
	// for the key (-2: not found so); the next read raises it if behind.
	behind int64
	// attempt counts the passes through run; past staleRetries the
	// decision is not guarded.
	attempt int
}

// run identifies the key and decides its limit, reading the store again
// (next attempt) whenever memory or the mirror cannot vouch for the key.
func (r *admission) run(ctx context.Context) (Admission, error) {
	r.behind = -2
	for ; ; r.attempt++ {
		k, ok, err := r.identify(ctx)
		if err != nil {
			return Admission{}, err
		}
		if !ok {
			continue
		}
		ad, ok, err := r.decide(ctx, k)
		if ok || err != nil {
			return ad, err
		}
	}
}

// identify applies Authenticate's rules (check) and the allowlist to the
// key, read from the store (lookup) unless held. A refusal from memory is
// not given: the store confirms it, so ok is false and the next attempt
// reads the key. So is a held key the tracker knows to be stale.
func (r *admission) identify(ctx context.Context) (k domain.APIKey, ok bool, err error) {
	a := r.a
	if r.held && r.attempt <= staleRetries && a.fresh.Stale(r.l.held()) {
		r.held = false
		return domain.APIKey{}, false, nil
	}
	if !r.held {
		if r.l, err = a.lookup(ctx, r.cred.Prefix, r.req.Token); err != nil {
			return domain.APIKey{}, false, err
		}
		if r.behind > -2 {
			a.fresh.Behind(ctx, r.l.Key.AccountID, r.behind, r.l.held())
			r.behind = -2
		}
	}
	k, err = a.check(ctx, r.l, r.req.Token, r.cred, r.req.Now, r.held)
	if err == nil && !k.AllowedIPs.AllowsAddr(r.req.Addr) {
		err = &AddressRefused{Key: k}
	}
	if err != nil && r.held {
		r.held = false
		return domain.APIKey{}, false, nil
	}
	return k, err == nil, err
}

// decide asks the limiter to decide for k; ok says the decision stands.
// The limiter records nothing when the mirror does not vouch for a held
// key: the next attempt reads the key again, and raises the mirror if it
// was behind. A decision made in process (Redis away) stands once the
// store vouches for a held key.
func (r *admission) decide(ctx context.Context, k domain.APIKey) (Admission, bool, error) {
	a := r.a
	var g ratelimit.Guard
	if r.mirrored && r.attempt <= staleRetries {
		g = a.fresh.Guard(k.AccountID, r.l.held())
	}
	if r.req.List && r.mirrored {
		g.Read = a.fresh.ListKey(k.AccountID)
	}
	res, v, err := a.lim.Decide(ctx, ratelimit.Ask{Key: k.ID, Group: k.AccountID, Limit: k.RateLimitPerMinute, Guard: g})
	ad := Admission{Key: k, Limit: res, List: fresh.ListVersion{Value: v.Read.Value, OK: v.Read.OK}}
	switch {
	case err != nil:
		return Admission{}, true, &LimitFailed{Key: k, Err: err}
	case v.Held || !r.held && !v.Shared:
		return ad, true, nil
	case !v.Shared:
		// The decision made in process stands if the store vouches for
		// the held key: it is read again.
		r.held = false
		if k, _, err = r.identify(ctx); err != nil {
			return Admission{}, true, err
		}
		return Admission{Key: k, Limit: res}, true, nil
	}
	r.behind, r.held = v.Found, false
	return Admission{}, false, nil
}

// errFromMemory marks a refusal decided on a key held in memory, which
// Admit confirms against the store before giving it.
var errFromMemory = errors.New("refused from memory")

// lookup reads the key (lookupKey), refusing an unknown prefix as
// Authenticate does.
func (a *Authenticator) lookup(ctx context.Context, prefix, token string) (keyLookup, error) {
	start := time.Now()
	l, err := a.lookupKey(ctx, prefix)
	a.metrics.Store("key_by_prefix", time.Since(start))
	if errors.Is(err, domain.ErrNotFound) {
		credential.Equal(credential.DummyHash[:], token)
		return keyLookup{}, &Refused{Reason: "unknown"}
	}
	if err != nil {
		return keyLookup{}, fmt.Errorf("look up key: %w", err)
	}
	return l, nil
}

// check applies Authenticate's rules to a looked-up key. fromMemory: a
// refusal is errFromMemory, for the caller to confirm.
func (a *Authenticator) check(ctx context.Context, l keyLookup, token string, cred credential.Credential, now time.Time, fromMemory bool) (domain.APIKey, error) {
	k := l.Key
	reason := refusal(k, l.AccountActive, token, cred, now)
	if reason == "" {
		return k, nil
	}
	if fromMemory {
		return domain.APIKey{}, errFromMemory
	}
	if reason == "expired" {
		a.expiredInUse(ctx, k, now)
	}
	if err := a.equaliseRefusal(ctx, l); err != nil {
		return domain.APIKey{}, fmt.Errorf("look up key: %w", err)
	}
	refused := &Refused{Reason: reason}
	if reason != "wrong_secret" {
		refused.Key = k
	}
	return domain.APIKey{}, refused
}

// refusal is why k may not be used at now, "" when it may.
func refusal(k domain.APIKey, accountActive bool, token string, cred credential.Credential, now time.Time) string {
	switch {
	case !credential.Equal(k.Hash, token):
		return "wrong_secret"
	case k.Env != cred.Env:
		return "env_mismatch"
	case !accountActive:
		return "account_inactive"
	}
	switch k.Status(now) {
	case domain.KeyRevoked:
		return "revoked"
	case domain.KeyExpired:
		return "expired"
	}
	return ""
}
