package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
)

// --- accounts ---

func (s *Store) CreateAccount(ctx context.Context, a domain.Account) error {
	return s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO accounts (id, name, active, features, created_at) VALUES ($1, $2, $3, $4, $5)`,
			a.ID, a.Name, a.Active, joinList(normalizeFeatures(a.Features)), toMS(a.CreatedAt))
		if isUnique(err) {
			return &domain.DuplicateError{ExistingID: a.ID}
		}
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		return nil
	})
}

// GetAccount returns domain.ErrNotFound for an unknown id.
func (s *Store) GetAccount(ctx context.Context, id string) (domain.Account, error) {
	if !storable(id) {
		return domain.Account{}, domain.ErrNotFound
	}
	var (
		a        domain.Account
		features string
		created  int64
	)
	err := s.r.QueryRowContext(ctx,
		`SELECT id, name, active, features, created_at FROM accounts WHERE id = $1`, id,
	).Scan(&a.ID, &a.Name, &a.Active, &features, &created)
	if err != nil {
		return domain.Account{}, rowErr("get account", err)
	}
	a.Features = splitList[domain.Feature](features)
	a.CreatedAt = fromMS(created)
	return a, nil
}

func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count accounts: %w", err)
	}
	return n, nil
}

// SetAccountActive returns domain.ErrNotFound for an unknown id.
// Deactivating deletes the console sessions of the account's users.
func (s *Store) SetAccountActive(ctx context.Context, id string, active bool) error {
	if !storable(id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE accounts SET active = $1 WHERE id = $2`, active, id)
		if err != nil {
			return fmt.Errorf("update account: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		if !active {
			// Its console sessions end here, as a deactivated user's do:
			// activating the account again must not bring them back.
			if _, err := tx.ExecContext(ctx,
				`DELETE FROM console_sessions WHERE user_id IN (SELECT id FROM users WHERE account_id = $1)`, id); err != nil {
				return fmt.Errorf("delete account sessions: %w", err)
			}
		}
		// Every key of the account changes with it.
		return tx.keysChanged(ctx, id)
	})
}

// SetAccountFeature switches f on or off; ErrNotFound for an unknown account.
func (s *Store) SetAccountFeature(ctx context.Context, id string, f domain.Feature, on bool) error {
	if !storable(id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		var features string
		err := tx.QueryRowContext(ctx, `SELECT features FROM accounts WHERE id = $1`+s.d.forUpdate, id).Scan(&features)
		if err != nil {
			return rowErr("get account features", err)
		}
		list := splitList[domain.Feature](features)
		if on {
			list = append(list, f)
		} else {
			list = slices.DeleteFunc(list, func(g domain.Feature) bool { return g == f })
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET features = $1 WHERE id = $2`,
			joinList(normalizeFeatures(list)), id); err != nil {
			return fmt.Errorf("update account features: %w", err)
		}
		return nil
	})
}

// RenameAccount gives the account id the name name (checked by the
// caller) and stores the audit event event makes of its old name, in one
// transaction; it returns the old name. A name that is already the
// account's changes nothing and records nothing. ErrNotFound for an
// unknown account.
func (s *Store) RenameAccount(ctx context.Context, id, name string, event func(old string) domain.AuditEvent) (string, error) {
	if !storable(id, name) {
		return "", domain.ErrNotFound
	}
	var old string
	err := s.inTx(ctx, func(tx *Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT name FROM accounts WHERE id = $1`+s.d.forUpdate, id).Scan(&old); err != nil {
			return rowErr("get account name", err)
		}
		if old == name {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET name = $1 WHERE id = $2`, name, id); err != nil {
			return fmt.Errorf("rename account: %w", err)
		}
		return insertAuditEvents(ctx, tx, event(old))
	})
	return old, err
}

// normalizeFeatures drops repeats and puts known features first, in
// domain.Features order, then unknown ones in their given order.
func normalizeFeatures(list []domain.Feature) []domain.Feature {
	var out []domain.Feature
	for _, f := range domain.Features {
		if slices.Contains(list, f) {
			out = append(out, f)
		}
	}
	for _, f := range list {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// --- users ---

const userColumns = `id, account_id, email, role, password_hash, must_change_password, active, created_at`

func scanUser(row interface{ Scan(...any) error }) (domain.User, error) {
	var (
		u       domain.User
		role    string
		created int64
	)
	if err := row.Scan(&u.ID, &u.AccountID, &u.Email, &role, &u.PasswordHash, &u.MustChangePassword, &u.Active, &created); err != nil {
		return domain.User{}, err
	}
	u.Role = domain.Role(role)
	u.CreatedAt = fromMS(created)
	return u, nil
}

// CreateUser returns *domain.DuplicateError (with the existing user's id) when
// the normalized email is taken. evs (an invitation's) are stored with it.
func (s *Store) CreateUser(ctx context.Context, u domain.User, evs ...domain.AuditEvent) error {
	email := domain.NormalizeEmail(u.Email)
	err := s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO users (`+userColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			u.ID, u.AccountID, email, string(u.Role), u.PasswordHash, u.MustChangePassword, u.Active, toMS(u.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		return insertAuditEvents(ctx, tx, evs...)
	})
	if isUnique(err) {
		// After the rollback: the holder of the email has committed.
		existing, gerr := s.GetUserByEmail(ctx, email)
		if gerr != nil {
			existing.ID = u.ID // the id itself collided
		}
		return &domain.DuplicateError{ExistingID: existing.ID}
	}
	return err
}

func (s *Store) GetUser(ctx context.Context, id string) (domain.User, error) {
	if !storable(id) {
		return domain.User{}, domain.ErrNotFound
	}
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	return u, rowErr("get user", err)
}

func (s *Store) GetUserByEmail(ctx context.Context, email string) (domain.User, error) {
	if !storable(email) {
		return domain.User{}, domain.ErrNotFound
	}
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`,
		domain.NormalizeEmail(email)))
	return u, rowErr("get user by email", err)
}

// ListUsers returns the account's users in creation order.
func (s *Store) ListUsers(ctx context.Context, accountID string) ([]domain.User, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx,
		`SELECT `+userColumns+` FROM users WHERE account_id = $1 ORDER BY created_at, id`, accountID)
	return collect("list users", rows, err, scanUserRow)
}

func scanUserRow(rows *sql.Rows) (domain.User, error) { return scanUser(rows) }

// DeactivateUser marks a user of accountID inactive and deletes every
// session of theirs in one transaction, unrecorded (UpdateUser with an
// event records it). ErrNotFound unless the user exists in that account;
// ErrLastOwner for the account's last active Owner.
func (s *Store) DeactivateUser(ctx context.Context, accountID, id string) error {
	off := false
	_, err := s.UpdateUser(ctx, accountID, id, UserChange{Active: &off}, nil)
	return err
}

// ErrLastOwner is a change UpdateUser refused: it would leave the account
// without an active Owner.
var ErrLastOwner = errors.New("store: the account's last active owner")

// UserChange is what UpdateUser changes; a zero field keeps its value.
type UserChange struct {
	Role domain.Role
	// Active activates or deactivates the user; deactivating ends every
	// session of theirs.
	Active *bool
	// PasswordHash is a new one-time password's: the user must choose
	// their own at next sign-in, and every session of theirs ends.
	PasswordHash string
}

// UpdateUser changes a user of accountID in one transaction: it locks the
// account's row (changes to one account's users run one after another on
// both engines), reads the user, applies ch, refuses with ErrLastOwner a
// change that leaves the account no active Owner, and stores the audit
// event that event (when not nil) makes of the user as they were. A change
// that changes nothing writes nothing. It returns the user as they were;
// ErrNotFound unless the user is in the account.
func (s *Store) UpdateUser(ctx context.Context, accountID, id string, ch UserChange, event func(before domain.User) domain.AuditEvent) (domain.User, error) {
	if !storable(accountID, id) {
		return domain.User{}, domain.ErrNotFound
	}
	var before domain.User
	err := s.inTx(ctx, func(tx *Tx) error {
		var err error
		if before, err = lockUser(ctx, s.d, tx, accountID, id); err != nil {
			return err
		}
		set, args := userChangeSet(before, ch)
		if len(set) == 0 {
			return nil
		}
		args = append(args, id)
		if _, err := tx.ExecContext(ctx, `UPDATE users SET `+strings.Join(set, ", ")+
			fmt.Sprintf(` WHERE id = $%d`, len(args)), args...); err != nil {
			return fmt.Errorf("update user: %w", err)
		}
		if err := keepAnOwner(ctx, tx, before, ch); err != nil {
			return err
		}
		if ch.PasswordHash != "" || (ch.Active != nil && !*ch.Active) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE user_id = $1`, id); err != nil {
				return fmt.Errorf("delete user sessions: %w", err)
			}
		}
		if event == nil {
			return nil
		}
		return insertAuditEvents(ctx, tx, event(before))
	})
	return before, err
}

// lockUser locks the account's row, then reads its user id.
func lockUser(ctx context.Context, d dialect, tx *Tx, accountID, id string) (domain.User, error) {
	var locked string
	err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE id = $1`+d.forUpdate, accountID).Scan(&locked)
	if err != nil {
		return domain.User{}, rowErr("lock account", err)
	}
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 AND account_id = $2`, id, accountID))
	return u, rowErr("get user", err)
}

// userChangeSet is the SET list and its arguments for what ch changes of u.
func userChangeSet(u domain.User, ch UserChange) ([]string, []any) {
	var (
		set  []string
		args []any
	)
	add := func(col string, v any) {
		args = append(args, v)
		set = append(set, fmt.Sprintf("%s = $%d", col, len(args)))
	}
	if ch.Role != "" && ch.Role != u.Role {
		add("role", string(ch.Role))
	}
	if ch.Active != nil && *ch.Active != u.Active {
		add("active", *ch.Active)
	}
	if ch.PasswordHash != "" {
		add("password_hash", ch.PasswordHash)
		add("must_change_password", true)
	}
	return set, args
}

// keepAnOwner refuses, with ErrLastOwner, a change that took the Owner
// role or activity from u when no other active Owner remains.
func keepAnOwner(ctx context.Context, tx *Tx, u domain.User, ch UserChange) error {
	wasOwner := u.Active && u.Role == domain.RoleOwner
	stillOwner := (ch.Role == "" || ch.Role == domain.RoleOwner) && (ch.Active == nil || *ch.Active)
	if !wasOwner || stillOwner {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE account_id = $1 AND role = $2 AND active = $3`,
		u.AccountID, string(domain.RoleOwner), true).Scan(&n); err != nil {
		return fmt.Errorf("count owners: %w", err)
	}
	if n == 0 {
		return ErrLastOwner
	}
	return nil
}

// ChangePassword stores a password the user chose (so must_change_password
// is cleared) and ends every other session of theirs: whoever knew the old
// password is signed out. keep is the token hash of the session that made
// the change. ErrNotFound for an unknown user.
func (s *Store) ChangePassword(ctx context.Context, userID, hash string, keep []byte) error {
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE users SET password_hash = $1, must_change_password = $2 WHERE id = $3`, hash, false, userID)
		if err != nil {
			return fmt.Errorf("update user password: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		// With nothing to keep, every session ends ("<> NULL" would match no row).
		del, args := `DELETE FROM console_sessions WHERE user_id = $1`, []any{userID}
		if len(keep) > 0 {
			del, args = del+` AND token_hash <> $2`, append(args, keep)
		}
		if _, err := tx.ExecContext(ctx, del, args...); err != nil {
			return fmt.Errorf("delete other sessions: %w", err)
		}
		return nil
	})
}
