package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// GetKeyPolicy reads the account's key policy (docs/console.md, Key
// policy): the zero policy when the account never set one.
func (s *Store) GetKeyPolicy(ctx context.Context, accountID string) (domain.KeyPolicy, error) {
	if !storable(accountID) {
		return domain.KeyPolicy{}, nil
	}
	return readKeyPolicy(s.r.QueryRowContext(ctx, `SELECT max_key_lifetime_days, require_allowed_ips, updated_at
		FROM key_policies WHERE account_id = $1`, accountID))
}

func readKeyPolicy(row *sql.Row) (domain.KeyPolicy, error) {
	var (
		p       domain.KeyPolicy
		maxDays sql.NullInt64
		updated int64
	)
	err := row.Scan(&maxDays, &p.RequireAllowedIPs, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.KeyPolicy{}, nil
	}
	if err != nil {
		return domain.KeyPolicy{}, fmt.Errorf("get key policy: %w", err)
	}
	p.MaxKeyLifetimeDays, p.UpdatedAt = int(maxDays.Int64), fromMS(updated)
	return p, nil
}

// SetKeyPolicy makes p (its UpdatedAt the time of the change) the
// account's key policy in one transaction with the audit entry audit makes
// of the old and new policy and a key_policy.updated event (data: the new
// policy; previous_attributes: the changed fields' old values) naming
// actor. A policy that asks what the account's does already writes
// nothing. It returns the policy in force after the call and whether it
// changed.
func (s *Store) SetKeyPolicy(ctx context.Context, accountID string, p domain.KeyPolicy, actor *domain.EventActor,
	audit func(before, after domain.KeyPolicy) domain.AuditEvent) (domain.KeyPolicy, bool, error) {
	if !storable(accountID) {
		return domain.KeyPolicy{}, false, domain.ErrNotFound
	}
	p.UpdatedAt = msTime(p.UpdatedAt)
	var out domain.KeyPolicy
	changed := false
	err := s.inTx(ctx, func(tx *Tx) error {
		// The account's row, held, puts concurrent changes in turn, also
		// when the account has no policy row to hold yet.
		var locked string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE id = $1`+s.d.forUpdate, accountID).Scan(&locked); err != nil {
			return rowErr("lock account", err)
		}
		before, err := readKeyPolicy(tx.QueryRowContext(ctx, `SELECT max_key_lifetime_days, require_allowed_ips, updated_at
			FROM key_policies WHERE account_id = $1`, accountID))
		if err != nil {
			return err
		}
		out = before
		if before.Same(p) {
			return nil
		}
		maxDays := sql.NullInt64{Int64: int64(p.MaxKeyLifetimeDays), Valid: p.MaxKeyLifetimeDays > 0}
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_policies (account_id, max_key_lifetime_days, require_allowed_ips, updated_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (account_id) DO UPDATE SET max_key_lifetime_days = $2,
			require_allowed_ips = $3, updated_at = $4`, accountID, maxDays, p.RequireAllowedIPs, toMS(p.UpdatedAt)); err != nil {
			return fmt.Errorf("set key policy: %w", err)
		}
		if err := insertAuditEvents(ctx, tx, audit(before, p)); err != nil {
			return err
		}
		if err := recordKeyPolicy(ctx, tx, accountID, before, p, actor); err != nil {
			return err
		}
		out, changed = p, true
		return nil
	})
	return out, changed, err
}

// recordKeyPolicy records the key_policy.updated event of before becoming
// after.
func recordKeyPolicy(ctx context.Context, tx *Tx, accountID string, before, after domain.KeyPolicy, actor *domain.EventActor) error {
	b, a := wire.KeyPolicyOf(before), wire.KeyPolicyOf(after)
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	b.UpdatedAt, a.UpdatedAt = nil, nil
	prev, _, err := diffObjects(b, a)
	if err != nil {
		return err
	}
	tx.record(domain.Event{AccountID: accountID, Type: domain.EventKeyPolicyUpdated, Data: data, Previous: prev,
		RequestID: domain.RequestIDFrom(ctx), Actor: actor})
	return nil
}
