package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// What the console needs beyond the plain session rows: a session is only
// worth anything while its user and their account are active, and
// deactivating a user or changing a password ends sessions in the same
// transaction, so no instance can serve a stale one.

// SessionUser returns the session with that token hash and its user, provided
// the session has not expired at now and both the user and their account are
// active; ErrNotFound otherwise. It is one statement, read on every console
// request, so a deactivation is seen by the very next request on any instance.
func (s *Store) SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (domain.Session, domain.User, error) {
	var (
		sess             domain.Session
		u                domain.User
		role             string
		created, expires int64
		userCreated      int64
	)
	err := s.r.QueryRowContext(ctx,
		`SELECT s.token_hash, s.user_id, s.csrf, s.created_at, s.expires_at,
			u.id, u.account_id, u.email, u.role, u.password_hash, u.must_change_password, u.active, u.created_at
		FROM console_sessions s
		JOIN users u ON u.id = s.user_id
		JOIN accounts a ON a.id = u.account_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND u.active = $3 AND a.active = $3`,
		tokenHash, toMS(now), true,
	).Scan(&sess.TokenHash, &sess.UserID, &sess.CSRF, &created, &expires,
		&u.ID, &u.AccountID, &u.Email, &role, &u.PasswordHash, &u.MustChangePassword, &u.Active, &userCreated)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Session{}, domain.User{}, domain.ErrNotFound
	}
	if err != nil {
		return domain.Session{}, domain.User{}, fmt.Errorf("get session user: %w", err)
	}
	sess.CreatedAt, sess.ExpiresAt = fromMS(created), fromMS(expires)
	u.Role = domain.Role(role)
	u.CreatedAt = fromMS(userCreated)
	return sess, u, nil
}

// DeactivateUser marks a user of accountID inactive and deletes every
// session of theirs in one transaction. ErrNotFound unless the user exists in
// that account.
func (s *Store) DeactivateUser(ctx context.Context, accountID, id string) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET active = $1 WHERE id = $2 AND account_id = $3`,
			false, id, accountID)
		if err != nil {
			return fmt.Errorf("deactivate user: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE user_id = $1`, id); err != nil {
			return fmt.Errorf("delete user sessions: %w", err)
		}
		return nil
	})
}

// ChangePassword stores a password the user chose (so must_change_password
// is cleared) and ends every other session of theirs: whoever knew the old
// password is signed out. keep is the token hash of the session that made
// the change. ErrNotFound for an unknown user.
func (s *Store) ChangePassword(ctx context.Context, userID, hash string, keep []byte) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE users SET password_hash = $1, must_change_password = $2 WHERE id = $3`, hash, false, userID)
		if err != nil {
			return fmt.Errorf("update user password: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM console_sessions WHERE user_id = $1 AND token_hash <> $2`, userID, keep); err != nil {
			return fmt.Errorf("delete other sessions: %w", err)
		}
		return nil
	})
}

// DeleteExpiredSessions removes sessions that expired before now and
// reports how many; expired rows are never served, this only bounds the table.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE expires_at <= $1`, toMS(now))
		if err != nil {
			return fmt.Errorf("delete expired sessions: %w", err)
		}
		n, err = res.RowsAffected()
		if err != nil {
			return fmt.Errorf("rows affected: %w", err)
		}
		return nil
	})
	return n, err
}

// RestrictedAgentNames maps the id of every agent of the account that some
// key is restricted to onto its name: what a list of keys needs to name
// their restrictions, bounded by the restrictions rather than by the
// account's number of agents.
func (s *Store) RestrictedAgentNames(ctx context.Context, accountID string) (map[string]string, error) {
	// From the account's keys (api_keys_account), to their restrictions (by
	// primary key), to the agents (by primary key).
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT a.id, a.name
		FROM api_keys k
		JOIN api_key_agents ka ON ka.key_id = k.id
		JOIN agents a ON a.id = ka.agent_id
		WHERE k.account_id = $1`, accountID)
	if err != nil {
		return nil, fmt.Errorf("restricted agent names: %w", err)
	}
	defer rows.Close()
	names := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("scan agent name: %w", err)
		}
		names[id] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("restricted agent names: %w", err)
	}
	return names, nil
}
