package store

import (
	"context"
	"database/sql"
	"time"
)

// AccountSummary is an account as `agentapi account list` shows it: Users
// counts its active users, Keys its keys not revoked.
type AccountSummary struct {
	ID        string
	Name      string
	Active    bool
	CreatedAt time.Time
	Users     int
	Keys      int
}

// ListAccounts returns every account, oldest first.
func (s *Store) ListAccounts(ctx context.Context) ([]AccountSummary, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT a.id, a.name, a.active, a.created_at,
		(SELECT count(*) FROM users u WHERE u.account_id = a.id AND u.active),
		(SELECT count(*) FROM api_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL)
		FROM accounts a ORDER BY a.created_at, a.id`)
	return collect("list accounts", rows, err, func(r *sql.Rows) (AccountSummary, error) {
		var a AccountSummary
		var created int64
		err := r.Scan(&a.ID, &a.Name, &a.Active, &created, &a.Users, &a.Keys)
		a.CreatedAt = fromMS(created)
		return a, err
	})
}
