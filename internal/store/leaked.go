package store

import (
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// ListAuditEventsByActor returns the account's events of one action by one
// actor (a display name, such as the leak reporter's) at or after since,
// newest first, at most limit: read through audit_events_account by the
// time range, so it costs the window's events, not the account's trail.
func (s *Store) ListAuditEventsByActor(ctx context.Context, accountID string, action domain.AuditAction, actor string, since time.Time, limit int) ([]domain.AuditEvent, error) {
	if !storable(accountID, string(action), actor) || limit <= 0 {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_events
		WHERE account_id = $1 AND created_at >= $2 AND action = $3 AND actor = $4
		ORDER BY created_at DESC, id DESC LIMIT $5`,
		accountID, toMS(since), action, actor, limit)
	return collect("list audit events by actor", rows, err, scanAuditEvent)
}
