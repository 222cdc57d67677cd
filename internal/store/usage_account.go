package store

import (
	"context"
	"database/sql"
	"time"
)

// The account overview's reads (docs/console.md): the counts of all of an
// account's keys. The minute grain is read by its account index, the hour
// grain (which has none) key by key through its primary key.
const accountUsageFrom = ` FROM (
	SELECT key_id, (minute / $4) * $4 AS b, class, count AS n FROM usage_minute WHERE account_id = $1 AND minute >= $2 AND minute < $3
	UNION ALL
	SELECT key_id, (hour / $4) * $4 AS b, class, count AS n FROM usage_hour
		WHERE key_id IN (SELECT id FROM api_keys WHERE account_id = $1) AND hour >= $2 AND hour < $3
) u`

// AccountUsage is KeyUsage for all of an account's keys together.
func (s *Store) AccountUsage(ctx context.Context, accountID string, from, to time.Time, width time.Duration) ([]UsageBucket, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT b, class, SUM(n)`+accountUsageFrom+` GROUP BY b, class ORDER BY b, class`,
		accountID, toMS(from), toMS(to), width.Milliseconds())
	return collect("account usage", rows, err, scanUsageBucket)
}

// KeyClassCount is how many requests of one class a key made.
type KeyClassCount struct {
	KeyID, Class string
	Count        int64
}

// AccountKeyUsage returns, per key of the account and class, its requests
// in [from, to) (to the minute within the minute grain's 48 hours, to the
// hour before).
func (s *Store) AccountKeyUsage(ctx context.Context, accountID string, from, to time.Time) ([]KeyClassCount, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT key_id, class, SUM(n)`+accountUsageFrom+` GROUP BY key_id, class`,
		accountID, toMS(from), toMS(to), time.Minute.Milliseconds())
	return collect("account usage", rows, err, func(r *sql.Rows) (c KeyClassCount, err error) {
		err = r.Scan(&c.KeyID, &c.Class, &c.Count)
		return
	})
}
