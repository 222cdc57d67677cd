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
	"github.com/agentapi/agentapi/internal/metrics"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// Authenticator decides whether a presented credential names a usable key:
// its checksum, its secret, its environment, its account, its status. The
// API asks it once per request.
type Authenticator struct {
	store   *store.Store
	log     *slog.Logger
	metrics *metrics.Metrics
	// background counts the audit writes started and not waited for.
	background *sync.WaitGroup
	// expired remembers keys whose use after expiry is already in the audit trail.
	expired sync.Map
	cache   *keyCache
}

// NewAuthenticator returns an Authenticator reading keys from st. log
// receives failed audit writes (nil: discarded); m receives the lookup's
// duration (nil is fine); background counts the audit writes a request
// starts and does not wait for, so that a graceful stop can (nil: not
// counted).
func NewAuthenticator(st *store.Store, log *slog.Logger, m *metrics.Metrics, background *sync.WaitGroup) (*Authenticator, error) {
	if st == nil {
		return nil, errors.New("authenticator: no store")
	}
	return &Authenticator{store: st, log: cmp.Or(log, slog.New(slog.DiscardHandler)), metrics: m,
		background: cmp.Or(background, &sync.WaitGroup{}), cache: newKeyCache(keyCacheMax)}, nil
}

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

// LimitFailed is a rate-limit decision that failed for a key that was
// identified (AdmitWatching): the answer is a 500, not a refusal.
type LimitFailed struct{ Err error }

func (e *LimitFailed) Error() string { return "rate limit: " + e.Err.Error() }
func (e *LimitFailed) Unwrap() error { return e.Err }

// staleRetries bounds how often AdmitWatching re-reads the store when the
// mirror disagrees with it; past it the decision is made without the
// comparison, for the key the store has just vouched for.
const staleRetries = 2

// AdmitWatching authenticates the credential (Authenticate), checks gate
// of the key and decides its rate limit in lim. On a Mirrored store with a
// limiter that compares epochs (a *ratelimit.Redis), a key held in
// memory is used without asking the store, for as long as the mirror in
// Redis vouches for the epoch it is held under (admission.decide): while
// nothing changes a request costs one Redis round trip and no store round
// trip. A refusal from memory is given only once the store confirms it
// (admission.identify); a key held under an epoch below the highest this
// instance has learned of is read again whatever the mirror says
// (admission.epoch); a mirror that disagrees with the store is raised when
// behind (admission.decide, syncMirror). Without a Mirrored store or such
// a limiter the store is read per request (admitFromStore); so it is while
// Redis is away (ratelimit.Redis.Down), when a held key is not used.
//
// gate (nil: none) is what the caller checks of an authenticated key
// before the limit is decided (the IP allowlist); its error is returned as
// it is, once the store confirms a key held in memory.
//
// It also reads, in the rate-limit decision's round trip, the Redis key
// watch names for the admitted key ("" or a nil watch: none), as
// ratelimit.Versions needs. The value read is OK only when the decision
// was made in Redis on a Mirrored store.
func (a *Authenticator) AdmitWatching(ctx context.Context, token string, now time.Time, lim ratelimit.Limiter, gate func(domain.APIKey) error, watch func(domain.APIKey) string) (domain.APIKey, ratelimit.Result, ratelimit.Watched, error) {
	if gate == nil {
		gate = func(domain.APIKey) error { return nil }
	}
	el, ok := lim.(*ratelimit.Redis)
	if !ok || !a.store.Mirrored() {
		k, res, err := a.admitFromStore(ctx, token, now, lim, gate)
		return k, res, ratelimit.Watched{}, err
	}
	cred, err := credential.Parse(token)
	if err != nil {
		return domain.APIKey{}, ratelimit.Result{}, ratelimit.Watched{}, &Refused{Reason: "malformed"}
	}
	r := &admission{a: a, token: token, cred: cred, now: now, lim: el, gate: gate, watch: watch}
	r.l, r.held = a.heldKey(cred.Prefix)
	if r.held {
		a.cache.hits.Add(1)
	}
	if r.held && el.Down() {
		// Redis away: nothing can vouch for the held key, so the store is
		// asked, as without a mirror.
		r.held = false
	}
	return r.run(ctx)
}

// admitFromStore is AdmitWatching without a mirror to compare with: the
// store is read for every request (Authenticate), then gate, then lim
// decides.
func (a *Authenticator) admitFromStore(ctx context.Context, token string, now time.Time, lim ratelimit.Limiter, gate func(domain.APIKey) error) (domain.APIKey, ratelimit.Result, error) {
	k, err := a.Authenticate(ctx, token, now)
	if err == nil {
		err = gate(k)
	}
	if err != nil {
		return domain.APIKey{}, ratelimit.Result{}, err
	}
	res, err := lim.Allow(ctx, k.ID, k.RateLimitPerMinute)
	if err != nil {
		return k, ratelimit.Result{}, &LimitFailed{Err: err}
	}
	return k, res, nil
}

// admission is one AdmitWatching on a Mirrored store with a Redis limiter.
type admission struct {
	a     *Authenticator
	token string
	cred  credential.Credential
	now   time.Time
	lim   *ratelimit.Redis
	gate  func(domain.APIKey) error
	// watch names the Redis key read with the decision (nil: none).
	watch func(domain.APIKey) string
	// l is the key as last read; held: from memory, not yet read from the
	// store during this request. An attempt with held false reads it.
	l    keyLookup
	held bool
	// attempt counts the passes through run; past staleRetries the
	// decision is made without comparing epochs.
	attempt int
}

// run identifies the key and decides its limit, reading the store again
// (next attempt) whenever memory or the mirror cannot vouch for the key.
func (r *admission) run(ctx context.Context) (domain.APIKey, ratelimit.Result, ratelimit.Watched, error) {
	for ; ; r.attempt++ {
		k, ok, err := r.identify(ctx)
		if err != nil {
			return domain.APIKey{}, ratelimit.Result{}, ratelimit.Watched{}, err
		}
		if !ok {
			continue
		}
		epoch, ok := r.epoch()
		if !ok {
			continue
		}
		k, res, w, ok, err := r.decide(ctx, k, epoch)
		if ok || err != nil {
			return k, res, w, err
		}
	}
}

// identify applies Authenticate's rules (check) and gate to the key, read
// from the store (lookup) unless held. A refusal from memory
// (errFromMemory, or gate refusing a held key) is not given: the store
// confirms it, so ok is false and the next attempt reads the key.
func (r *admission) identify(ctx context.Context) (k domain.APIKey, ok bool, err error) {
	if !r.held {
		if r.l, err = r.a.lookup(ctx, r.cred.Prefix, r.token); err != nil {
			return domain.APIKey{}, false, err
		}
	}
	k, err = r.a.check(ctx, r.l, r.token, r.cred, r.now, r.held)
	if err == nil {
		err = r.gate(k)
	}
	if err != nil && r.held {
		r.held = false
		return domain.APIKey{}, false, nil
	}
	return k, err == nil, err
}

// epoch is the key epoch the decision compares with the mirror: the
// epoch the key is held under, or -1 (no comparison) past staleRetries.
// A key whose epoch is below the highest this instance has learned of
// (store.SeenKeyEpoch) cannot be vouched for by the mirror, even if Redis
// went back to exactly that epoch: ok is false and the next attempt reads
// the key again.
func (r *admission) epoch() (epoch int64, ok bool) {
	epoch = r.l.epoch
	if epoch < r.a.store.SeenKeyEpoch() && r.attempt <= staleRetries {
		r.held = false
		return 0, false
	}
	if r.attempt > staleRetries {
		epoch = -1
	}
	return epoch, true
}

// decide asks the limiter to decide for k under epoch; ok says the
// decision stands. The limiter records nothing when the mirror differs
// from epoch (stale): the store's epoch is read, the mirror raised if
// Redis had lost it or went back (syncMirror), and ok is false so that the
// next attempt reads the key again. A decision Redis did not check (it
// went away during the call) stands, once the store vouches for a held key.
func (r *admission) decide(ctx context.Context, k domain.APIKey, epoch int64) (domain.APIKey, ratelimit.Result, ratelimit.Watched, bool, error) {
	watch := ""
	if r.watch != nil {
		watch = r.watch(k)
	}
	res, v, err := r.lim.AllowAt(ctx, k.ID, k.RateLimitPerMinute, epoch, watch)
	switch {
	case err != nil:
		return k, ratelimit.Result{}, ratelimit.Watched{}, true, &LimitFailed{Err: err}
	case v.Current:
		return k, res, v.Watched, true, nil
	case !v.Checked && !r.held:
		return k, res, ratelimit.Watched{}, true, nil // read from the store for this request
	case !v.Checked:
		// The decision made in process stands if the store vouches for
		// the held key: it is read again.
		r.held = false
		if k, _, err = r.identify(ctx); err != nil {
			return domain.APIKey{}, ratelimit.Result{}, ratelimit.Watched{}, true, err
		}
		return k, res, ratelimit.Watched{}, true, nil
	}
	if err := r.a.syncMirror(ctx, v.Mirror); err != nil {
		return domain.APIKey{}, ratelimit.Result{}, ratelimit.Watched{}, true, err
	}
	r.held = false
	return domain.APIKey{}, ratelimit.Result{}, ratelimit.Watched{}, false, nil
}

// errFromMemory marks a refusal decided on a key held in memory, which
// AdmitWatching confirms against the store before giving it.
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

// syncMirror reads the store's epoch after the mirror was found to
// differ, and raises the mirror when it is behind (Redis lost it, or went
// back to an older copy). The next lookup shares this read.
func (a *Authenticator) syncMirror(ctx context.Context, mirror int64) error {
	epoch, err := a.store.CurrentKeyEpoch(ctx)
	if err != nil {
		return fmt.Errorf("look up key: %w", err)
	}
	if mirror < epoch {
		if err := a.store.RaiseMirror(ctx, epoch); err != nil {
			a.log.Warn("key epoch mirror behind the store and not raised", "err", err)
		}
	}
	return nil
}
