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
// is for metrics only.
type Refused struct{ Reason string }

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
	start := time.Now()
	l, err := a.store.LookupKey(ctx, cred.Prefix)
	a.metrics.Store("key_by_prefix", time.Since(start))
	if errors.Is(err, domain.ErrNotFound) {
		credential.Equal(credential.DummyHash[:], token)
		return domain.APIKey{}, &Refused{Reason: "unknown"}
	}
	if err != nil {
		return domain.APIKey{}, fmt.Errorf("look up key: %w", err)
	}
	k := l.Key
	reason := ""
	switch {
	case !credential.Equal(k.Hash, token):
		reason = "wrong_secret"
	case k.Env != cred.Env:
		reason = "env_mismatch"
	case !l.AccountActive:
		reason = "account_inactive"
	default:
		switch k.Status(now) {
		case domain.KeyRevoked:
			reason = "revoked"
		case domain.KeyExpired:
			a.expiredInUse(ctx, k, now)
			reason = "expired"
		}
	}
	if reason == "" {
		return k, nil
	}
	if err := a.store.EqualiseRefusal(ctx, l); err != nil {
		return domain.APIKey{}, fmt.Errorf("look up key: %w", err)
	}
	return domain.APIKey{}, &Refused{Reason: reason}
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
