package keys

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// The account's key policy (docs/console.md, Key policy): what every new
// key of the account must have. Create applies it wherever a key is made
// (the console, the operator CLI, a rotation); existing keys are not
// changed by it, and edits of a key are not checked against it.

// Policy is the account's key policy (the zero policy when none was set).
func (s *Service) Policy(ctx context.Context, accountID string) (domain.KeyPolicy, error) {
	p, err := s.store.GetKeyPolicy(ctx, accountID)
	if err != nil {
		return p, fmt.Errorf("key policy: %w", err)
	}
	return p, nil
}

// SetPolicy makes p the account's key policy: Owners only. The change, its
// audit entry (key_policy_updated, each changed part old → new) and its
// key_policy.updated event are one transaction; a policy that asks what
// the account's does already writes nothing. It returns the policy in
// force.
func (s *Service) SetPolicy(ctx context.Context, actor Actor, accountID string, p domain.KeyPolicy) (domain.KeyPolicy, error) {
	if actor.User == nil || actor.User.AccountID != accountID || !actor.User.Active || actor.User.Role != domain.RoleOwner {
		return domain.KeyPolicy{}, domain.Errorf(domain.CodeAccessDenied, "only an Owner of account %s can change its key policy", accountID)
	}
	if d := p.MaxKeyLifetimeDays; d != 0 && (d < domain.MinKeyLifetimeDays || d > domain.MaxKeyLifetimeDays) {
		return domain.KeyPolicy{}, fieldErr("max_key_lifetime_days", domain.CodeInvalidValue,
			"the maximum key lifetime is none or %d to %d days", domain.MinKeyLifetimeDays, domain.MaxKeyLifetimeDays)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	p.UpdatedAt = now
	audit := func(before, after domain.KeyPolicy) domain.AuditEvent {
		return actor.event(accountID, "", domain.AuditKeyPolicyUpdated, policyChange(before, after), now)
	}
	out, _, err := s.store.SetKeyPolicy(ctx, accountID, p, &domain.EventActor{Type: "user", ID: actor.User.ID}, audit)
	if errors.Is(err, domain.ErrNotFound) {
		return out, domain.Errorf(domain.CodeNotFound, "no account %q", accountID)
	}
	if err != nil {
		return out, fmt.Errorf("set key policy: %w", err)
	}
	return out, nil
}

// policyChange is the audit detail of before becoming after: each changed
// part, old → new.
func policyChange(before, after domain.KeyPolicy) string {
	var parts []string
	if before.MaxKeyLifetimeDays != after.MaxKeyLifetimeDays {
		parts = append(parts, "maximum key lifetime "+before.LifetimeWords()+" → "+after.LifetimeWords())
	}
	if before.RequireAllowedIPs != after.RequireAllowedIPs {
		parts = append(parts, "allowed addresses "+requiredWords(before.RequireAllowedIPs)+" → "+requiredWords(after.RequireAllowedIPs))
	}
	return strings.Join(parts, "; ")
}

func requiredWords(b bool) string {
	if b {
		return "required"
	}
	return "optional"
}

// checkPolicy refuses a new key k that the account's policy pol does not
// allow at now: one field error for each of expires_at (none, or beyond
// the maximum lifetime) and allowed_ips (none when required), joined.
func checkPolicy(pol domain.KeyPolicy, k domain.APIKey, now time.Time) error {
	var fields []domain.FieldError
	if limit := pol.MaxLifetime(); limit > 0 {
		switch {
		case k.ExpiresAt == nil:
			fields = append(fields, domain.FieldError{Field: "expires_at", Code: domain.CodeMissingField,
				Message: "a key needs an expiry within " + pol.LifetimeWords() + " (the account's key policy)"})
		case k.ExpiresAt.Sub(now) > limit:
			fields = append(fields, domain.FieldError{Field: "expires_at", Code: domain.CodeInvalidValue,
				Message: "a key must expire within " + pol.LifetimeWords() + " (the account's key policy)"})
		}
	}
	if pol.RequireAllowedIPs && len(k.AllowedIPs) == 0 {
		fields = append(fields, domain.FieldError{Field: "allowed_ips", Code: domain.CodeMissingField,
			Message: "a key needs allowed addresses (the account's key policy)"})
	}
	if len(fields) == 0 {
		return nil
	}
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = f.Message
	}
	return &domain.Error{Code: fields[0].Code, Message: strings.Join(msgs, "; "), Fields: fields}
}

// rotationWithinPolicy fits a rotation's new key p to the account's policy:
// an expiry beyond the maximum lifetime, or none, becomes now plus the
// maximum (the replacement cannot outlive what the policy allows new keys);
// a key without allowed addresses under a policy that requires them is
// refused on allowed_ips, saying what to do, as addresses cannot be made
// up.
func (s *Service) rotationWithinPolicy(ctx context.Context, old domain.APIKey, p *CreateParams, now time.Time) error {
	pol, err := s.Policy(ctx, old.AccountID)
	if err != nil {
		return err
	}
	if limit := pol.MaxLifetime(); limit > 0 && (p.ExpiresAt == nil || p.ExpiresAt.Sub(now) > limit) {
		e := now.Add(limit)
		p.ExpiresAt = &e
	}
	if pol.RequireAllowedIPs && len(old.AllowedIPs) == 0 {
		return fieldErr("allowed_ips", domain.CodeMissingField,
			"key %s names no allowed addresses, which the account's key policy requires of new keys, and a rotation makes a new key: add its addresses (Edit), then rotate it", old.ID)
	}
	return nil
}
