package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
)

// SetKeyAllowedIPs replaces a key's IP allowlist and records ev, in one
// transaction that also bumps the key epoch: instances hold keys, with
// their allowlists, in memory, and the change must reach every one of them
// on its next request, as a revocation does. ErrNotFound unless the key is
// in accountID; ErrRevoked, and nothing changes, when it is revoked (by
// the time of this write, whatever the caller read before it).
func (s *Store) SetKeyAllowedIPs(ctx context.Context, accountID, id string, list domain.AllowList, ev domain.AuditEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		return tx.changeKey(ctx, s.d, accountID, id, keyEvent{typ: domain.EventKeyUpdated, audit: []domain.AuditEvent{ev}}, func() error {
			res, err := tx.ExecContext(ctx, `UPDATE api_keys SET allowed_ips = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL`,
				strings.Join(list.Strings(), " "), id, accountID)
			if err != nil {
				return fmt.Errorf("update key allowed ips: %w", err)
			}
			return keyUpdated(ctx, tx, res, accountID, id) // revoked meanwhile: ErrRevoked
		})
	})
}
