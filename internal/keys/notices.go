package keys

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// DismissNotice dismisses the console notice of key keyID's anomaly of
// reason, the one event eventID raised (docs/console.md, Key notices):
// Owners and Admins of the account only, and audited. A notice dismissed
// already, replaced by a newer anomaly, or not the account's is not_found.
func (s *Service) DismissNotice(ctx context.Context, actor Actor, accountID, keyID, reason, eventID string) error {
	if actor.User == nil || actor.User.AccountID != accountID || !actor.User.Active || !actor.User.Role.CanManageKeys() {
		return domain.Errorf(domain.CodeAccessDenied, "%s is not an Owner or Admin of account %s", actor.label(), accountID)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	detail := "the " + strings.ReplaceAll(reason, "_", " ") + " notice raised by " + eventID
	ev := actor.event(accountID, keyID, domain.AuditNoticeDismissed, detail, now)
	err := s.store.DismissKeyAnomaly(ctx, accountID, keyID, reason, eventID, ev)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Errorf(domain.CodeNotFound, "no notice %s of key %q to dismiss", reason, keyID)
	}
	return err
}
