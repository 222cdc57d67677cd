package store

import (
	"context"
	"database/sql"
	"fmt"
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

// KeyBucketCount is how many requests of one class a key made in the
// bucket starting at Start.
type KeyBucketCount struct {
	KeyID, Class string
	Start        time.Time
	Count        int64
}

// AccountKeyBuckets returns, per key of the account, bucket of width and
// class, its requests in [from, to): the keys list's sparklines, one
// query for the whole page (docs/console.md, API keys).
func (s *Store) AccountKeyBuckets(ctx context.Context, accountID string, from, to time.Time, width time.Duration) ([]KeyBucketCount, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT key_id, b, class, SUM(n)`+accountUsageFrom+` GROUP BY key_id, b, class`,
		accountID, toMS(from), toMS(to), width.Milliseconds())
	return collect("account key usage", rows, err, func(r *sql.Rows) (c KeyBucketCount, err error) {
		var ms int64
		err = r.Scan(&c.KeyID, &ms, &c.Class, &c.Count)
		c.Start = fromMS(ms)
		return
	})
}

// KeyRequestsSince counts the key's requests from since on, by the
// minute: in since's own minute only those not answered 2xx (a key
// revoked or expired at since is refused from then on), every one after
// it. Within the minute grain's 48 hours.
func (s *Store) KeyRequestsSince(ctx context.Context, keyID string, since time.Time, okClass string) (int64, error) {
	if !storable(keyID, okClass) {
		return 0, nil
	}
	m := toMS(since.Truncate(time.Minute))
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(count), 0) FROM usage_minute WHERE key_id = $1 AND (minute > $2 OR (minute = $2 AND class <> $3))`,
		keyID, m, okClass).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count key requests: %w", err)
	}
	return n, nil
}
