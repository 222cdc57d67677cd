package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// UpdateKeyAccess sets a key's scopes, agent restriction and expiry and
// records ev, in one transaction that bumps the key epoch, so that every
// instance's key memory sees the change on its next request. The key must
// be in accountID, not revoked, and expire no earlier than expiresAt (an
// expiry only comes earlier; nil: the key must not expire), else nothing
// changes: ErrRevoked for a revoked key, else ErrNotFound.
func (s *Store) UpdateKeyAccess(ctx context.Context, accountID, id string, scopes []domain.Scope, agentIDs []string,
	expiresAt *time.Time, ev domain.AuditEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	cond := ` AND expires_at IS NULL`
	if expiresAt != nil {
		cond = ` AND (expires_at IS NULL OR expires_at >= $4)`
	}
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET scopes = $1, expires_at = $4
			WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL`+cond,
			joinList(scopes), id, accountID, toNullMS(expiresAt))
		if err != nil {
			return fmt.Errorf("update key access: %w", err)
		}
		if err := keyUpdated(ctx, tx, res, accountID, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM api_key_agents WHERE key_id = $1`, id); err != nil {
			return fmt.Errorf("clear key agents: %w", err)
		}
		if err := insertKeyAgents(ctx, tx, id, agentIDs); err != nil {
			return err
		}
		// A restricted key's agent list is its restriction.
		tx.changedAgents(accountID)
		if err := bumpKeyEpoch(ctx, tx); err != nil {
			return err
		}
		return insertKeyEvent(ctx, tx, ev)
	})
}

// DeleteClaims removes the claims (Claim) whose name starts with prefix
// made before before: a claim that guards something short-lived, such as
// a credential's one showing, need not outlive it.
func (s *Store) DeleteClaims(ctx context.Context, prefix string, before time.Time) error {
	return s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM claims WHERE name LIKE $1 ESCAPE '\' AND claimed_at < $2`,
			likePrefix(prefix), toMS(before))
		if err != nil {
			return fmt.Errorf("delete claims: %w", err)
		}
		return nil
	})
}
