package keys

import (
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
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if background == nil {
		background = &sync.WaitGroup{}
	}
	return &Authenticator{store: st, log: log, metrics: m, background: background}, nil
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
// read an unknown prefix makes (store.EqualiseRefusal). Only admitted
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
// identified (Admit): the answer is a 500, not a refusal.
type LimitFailed struct{ Err error }

func (e *LimitFailed) Error() string { return "rate limit: " + e.Err.Error() }
func (e *LimitFailed) Unwrap() error { return e.Err }

// staleRetries bounds how often Admit re-reads the store when the mirror
// disagrees with it; past it the decision is made without the comparison,
// for the key the store has just vouched for.
const staleRetries = 2

// Admit authenticates the credential (Authenticate) and decides its rate
// limit in lim. On a Mirrored store with a limiter that compares epochs
// (ratelimit.EpochLimiter), a key held in memory is used without asking
// the store: the decision's script compares the epoch it is held under
// with the mirror in Redis and decides only when they agree, so while
// nothing changes a request costs one Redis round trip and no store round
// trip. When they disagree nothing is recorded: Admit re-reads the store,
// raises the mirror if Redis had lost it (or went back), and decides again.
// A key refused from memory is refused only after the store confirms it.
// A key held under an epoch below the highest this instance has learned of
// (store.SeenKeyEpoch) is read again whatever the mirror says: a Redis that
// went back to exactly the held epoch is not believed.
// Redis away: the store is checked per request, as without it.
//
// gate (nil: none) is what the caller checks of an authenticated key
// before the limit is decided (the IP allowlist); its error is returned as
// it is, once the store confirms a key held in memory.
func (a *Authenticator) Admit(ctx context.Context, token string, now time.Time, lim ratelimit.Limiter, gate func(domain.APIKey) error) (domain.APIKey, ratelimit.Result, error) {
	if gate == nil {
		gate = func(domain.APIKey) error { return nil }
	}
	el, ok := lim.(ratelimit.EpochLimiter)
	if !ok || !a.store.Mirrored() {
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
	cred, err := credential.Parse(token)
	if err != nil {
		return domain.APIKey{}, ratelimit.Result{}, &Refused{Reason: "malformed"}
	}
	l, held := a.store.HeldKey(cred.Prefix)
	if held && el.Down() {
		held = false // nothing can vouch for the held key: ask the store
	}
	for attempt := 0; ; attempt++ {
		if !held {
			if l, err = a.lookup(ctx, cred.Prefix, token); err != nil {
				return domain.APIKey{}, ratelimit.Result{}, err
			}
		}
		k, err := a.check(ctx, l, token, cred, now, held)
		if err == nil {
			err = gate(k)
		}
		if err != nil {
			if held {
				held = false // a refusal from memory: the store confirms it
				continue
			}
			return domain.APIKey{}, ratelimit.Result{}, err
		}
		epoch := l.Epoch()
		if epoch < a.store.SeenKeyEpoch() && attempt <= staleRetries {
			// This instance knows of a later epoch than the key's: the
			// mirror cannot vouch for it, even if Redis went back to
			// exactly that epoch.
			held = false
			continue
		}
		if attempt > staleRetries {
			epoch = -1
		}
		res, v, err := el.AllowAt(ctx, k.ID, k.RateLimitPerMinute, epoch)
		switch {
		case err != nil:
			return k, ratelimit.Result{}, &LimitFailed{Err: err}
		case v.Current:
			return k, res, nil
		case !v.Checked:
			if !held {
				return k, res, nil // read from the store for this request
			}
			// Redis went away during the call: the store must vouch for
			// the key (the decision made in process stands).
			l, err = a.lookup(ctx, cred.Prefix, token)
			if err != nil {
				return domain.APIKey{}, ratelimit.Result{}, err
			}
			if k, err = a.check(ctx, l, token, cred, now, false); err == nil {
				err = gate(k)
			}
			if err != nil {
				return domain.APIKey{}, ratelimit.Result{}, err
			}
			return k, res, nil
		}
		// Stale: the mirror differs from the epoch the key is held under.
		if err := a.syncMirror(ctx, v.Mirror); err != nil {
			return domain.APIKey{}, ratelimit.Result{}, err
		}
		held = false
	}
}

// errFromMemory marks a refusal decided on a key held in memory, which
// Admit confirms against the store before giving it.
var errFromMemory = errors.New("refused from memory")

// lookup reads the key from the store (LookupKey), refusing an unknown
// prefix as Authenticate does.
func (a *Authenticator) lookup(ctx context.Context, prefix, token string) (store.KeyLookup, error) {
	start := time.Now()
	l, err := a.store.LookupKey(ctx, prefix)
	a.metrics.Store("key_by_prefix", time.Since(start))
	if errors.Is(err, domain.ErrNotFound) {
		credential.Equal(credential.DummyHash[:], token)
		return store.KeyLookup{}, &Refused{Reason: "unknown"}
	}
	if err != nil {
		return store.KeyLookup{}, fmt.Errorf("look up key: %w", err)
	}
	return l, nil
}

// check applies Authenticate's rules to a looked-up key. fromMemory: a
// refusal is errFromMemory, for the caller to confirm.
func (a *Authenticator) check(ctx context.Context, l store.KeyLookup, token string, cred credential.Credential, now time.Time, fromMemory bool) (domain.APIKey, error) {
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
	if err := a.store.EqualiseRefusal(ctx, l); err != nil {
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
