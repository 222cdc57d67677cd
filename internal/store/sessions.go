package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// Console sessions. A session is only worth anything while its user and
// their account are active, and deactivating a user or changing a password
// (accounts.go) ends sessions in the same transaction, so no instance can
// serve a stale one.

// CreateSession stores a new session; a token hash already stored is a
// *domain.DuplicateError.
func (s *Store) CreateSession(ctx context.Context, sess domain.Session) error {
	return s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO console_sessions (token_hash, user_id, csrf, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			sess.TokenHash, sess.UserID, sess.CSRF, toMS(sess.CreatedAt), toMS(sess.ExpiresAt))
		if isUnique(err) {
			return &domain.DuplicateError{}
		}
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		return nil
	})
}

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
		features         string
	)
	err := s.r.QueryRowContext(ctx,
		`SELECT s.token_hash, s.user_id, s.csrf, s.created_at, s.expires_at,
			u.id, u.account_id, u.email, u.role, u.password_hash, u.must_change_password, u.active, u.created_at, a.name, a.features
		FROM console_sessions s
		JOIN users u ON u.id = s.user_id
		JOIN accounts a ON a.id = u.account_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND u.active = $3 AND a.active = $3`,
		tokenHash, toMS(now), true,
	).Scan(&sess.TokenHash, &sess.UserID, &sess.CSRF, &created, &expires,
		&u.ID, &u.AccountID, &u.Email, &role, &u.PasswordHash, &u.MustChangePassword, &u.Active, &userCreated, &sess.AccountName, &features)
	if err != nil {
		return domain.Session{}, domain.User{}, rowErr("get session user", err)
	}
	sess.CreatedAt, sess.ExpiresAt = fromMS(created), fromMS(expires)
	sess.AccountFeatures = splitList[domain.Feature](features)
	u.Role = domain.Role(role)
	u.CreatedAt = fromMS(userCreated)
	return sess, u, nil
}

// DeleteSession ends the session with that token hash (sign-out); deleting
// one that is gone is not an error.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	return s.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, tokenHash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

// DeleteExpiredSessions removes sessions that expired before now and
// reports how many; expired rows are never served, this only bounds the table.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *Tx) error {
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
