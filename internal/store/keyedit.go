package store

import (
	"context"
	"fmt"
	"strings"
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
	return s.inTx(ctx, func(tx *Tx) error {
		return tx.changeKey(ctx, s.d, accountID, id, keyEvent{typ: domain.EventKeyUpdated, audit: []domain.AuditEvent{ev}}, func() error {
			return setKeyAccess(ctx, tx, accountID, id, KeyAccess{Scopes: scopes, AgentIDs: agentIDs, ExpiresAt: expiresAt})
		})
	})
}

// KeyAccess is a key's scopes, agent restriction and expiry.
type KeyAccess struct {
	Scopes    []domain.Scope
	AgentIDs  []string
	ExpiresAt *time.Time
}

// setKeyAccess writes a's parts to an unrevoked key whose expiry is not
// sooner than a's (ErrNotFound otherwise).
func setKeyAccess(ctx context.Context, tx *Tx, accountID, id string, a KeyAccess) error {
	cond := ` AND expires_at IS NULL`
	if a.ExpiresAt != nil {
		cond = ` AND (expires_at IS NULL OR expires_at >= $4)`
	}
	res, err := tx.ExecContext(ctx, `UPDATE api_keys SET scopes = $1, expires_at = $4
		WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL`+cond,
		joinList(a.Scopes), id, accountID, toNullMS(a.ExpiresAt))
	if err != nil {
		return fmt.Errorf("update key access: %w", err)
	}
	if err := keyUpdated(ctx, tx, res, accountID, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM api_key_agents WHERE key_id = $1`, id); err != nil {
		return fmt.Errorf("clear key agents: %w", err)
	}
	// A restricted key's agent list is its restriction.
	tx.agentsChanged(accountID)
	return insertKeyAgents(ctx, tx, id, a.AgentIDs)
}

// applyKeyEdit writes the parts of edit that are set.
func applyKeyEdit(ctx context.Context, tx *Tx, accountID, id string, edit KeyEdit) error {
	if edit.Access != nil {
		if err := setKeyAccess(ctx, tx, accountID, id, *edit.Access); err != nil {
			return err
		}
	}
	if edit.AllowedIPs != nil {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET allowed_ips = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL`,
			strings.Join(edit.AllowedIPs.Strings(), " "), id, accountID)
		if err != nil {
			return fmt.Errorf("update key allowed ips: %w", err)
		}
		if err := keyUpdated(ctx, tx, res, accountID, id); err != nil {
			return err
		}
	}
	if edit.Name == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE api_keys SET name = $1, description = $2 WHERE id = $3 AND account_id = $4`,
		*edit.Name, edit.Description, id, accountID)
	if err != nil {
		return fmt.Errorf("update key text: %w", err)
	}
	return nil
}

// KeyEdit is one save of the console's key form: each part that is set
// is written.
type KeyEdit struct {
	Access     *KeyAccess
	AllowedIPs *domain.AllowList
	Name       *string
	// Description goes with Name.
	Description string
}

// UpdateKey writes every part of edit set, with evs, in one transaction
// that records one api_key.updated event (previous_attributes naming each
// changed field). Access and allowed addresses change only on an unrevoked
// key (and access only to an expiry no later than the key's); otherwise
// ErrNotFound and nothing changes.
func (s *Store) UpdateKey(ctx context.Context, accountID, id string, edit KeyEdit, evs []domain.AuditEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		return tx.changeKey(ctx, s.d, accountID, id, keyEvent{typ: domain.EventKeyUpdated, audit: evs}, func() error {
			return applyKeyEdit(ctx, tx, accountID, id, edit)
		})
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
