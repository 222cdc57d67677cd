package keys

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// SetAllowedIPs replaces a key's IP allowlist (empty: any address) and
// records it in the audit trail and the key's history: "allowed_ips_changed"
// with the old and the new list. Setting the list the key has records
// nothing. A revoked key's list cannot change: it is used from nowhere.
// The change applies on the key's next request on every instance, as a
// revocation does (the store bumps the key epoch).
func (s *Service) SetAllowedIPs(ctx context.Context, actor Actor, accountID, keyID string, list domain.AllowList) (domain.APIKey, error) {
	if actor.User != nil && actor.User.AccountID != accountID {
		return domain.APIKey{}, domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), accountID)
	}
	list, err := domain.NewAllowList(list.Strings())
	if err != nil {
		return domain.APIKey{}, err
	}
	k, err := s.Get(ctx, accountID, keyID)
	if err != nil {
		return k, err
	}
	if k.RevokedAt != nil {
		return k, revokedErr(keyID, "its IP allowlist")
	}
	if slices.Equal(k.AllowedIPs, list) {
		return k, nil
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	detail := describeAllowList(k.AllowedIPs) + " → " + describeAllowList(list)
	ev := actor.event(accountID, keyID, domain.AuditAllowedIPsChanged, detail, now)
	err = s.store.SetKeyAllowedIPs(ctx, accountID, keyID, list, ev)
	if errors.Is(err, domain.ErrRevoked) { // since it was read
		return k, revokedErr(keyID, "its IP allowlist")
	}
	if err := keyError(err, "set allowed ips", accountID, keyID); err != nil {
		return k, err
	}
	k.AllowedIPs = list
	return k, nil
}

// describeAllowList is a list as the audit trail shows it.
func describeAllowList(l domain.AllowList) string {
	if len(l) == 0 {
		return "any address"
	}
	return l.String()
}
