package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The key epoch numbers the changes that can make a held copy of a key
// wrong: a key's revocation, expiry, rate limit or edit, an account's
// active flag. The transaction that makes such a change raises it and
// records it against the key's account (Tx.keysChanged), so no writer has
// to remember to; the same holds for the changes of an account's agent
// list (Tx.agentsChanged). Once the transaction commits, the store tells
// its Observers what changed. Keeping held copies fresh by this is
// internal/fresh's work (docs/production.md, "Key epochs"); here is only
// the SQL.
const (
	// KeyEpochQuery reads the key epoch and, second, the highest epoch
	// raised by a writer that records no account (an instance of 1.2
	// during a rolling upgrade): the epoch itself when the last change was
	// such a writer's, else the last such change.
	KeyEpochQuery = `SELECT epoch, CASE WHEN per_account = epoch THEN legacy ELSE epoch END
		FROM key_epoch WHERE id = 1`
	bumpKeyEpochSQL = `UPDATE key_epoch SET epoch = epoch + 1,
		legacy = CASE WHEN per_account = epoch THEN legacy ELSE epoch END,
		per_account = epoch + 1
		WHERE id = 1 RETURNING epoch`
	accountKeyEpochSQL = `INSERT INTO account_key_epochs (account_id, epoch) VALUES ($1, $2)
		ON CONFLICT (account_id) DO UPDATE SET epoch = excluded.epoch`
	keyChangesSQL = `SELECT account_id, epoch FROM account_key_epochs WHERE epoch > $1`
)

// Commit is what a committed transaction changed that copies held in
// memory depend on.
type Commit struct {
	// KeyAccounts are the accounts whose keys changed, each with the key
	// epoch of its change (the account's epoch from then on).
	KeyAccounts map[string]int64
	// KeyEpoch is the highest of them (0: no key changed).
	KeyEpoch int64
	// AgentAccounts are the accounts whose agent lists changed.
	AgentAccounts []string
}

// An Observer is told what each commit changed (Commit), once it
// committed and before the write returns. Its failures cannot undo the
// commit; it reports them itself.
type Observer interface {
	Committed(ctx context.Context, c Commit)
}

// Observe makes every commit that changed keys or agent lists tell o.
// Call it before the store is used.
func (s *Store) Observe(o Observer) { s.observers = append(s.observers, o) }

// keysChanged raises the key epoch and records it against accountID, in
// tx: every instance then drops the keys it holds of that account. Each
// write that can change what a held key says runs through it (changeKey,
// an account's active flag). The database's key epoch moves too: it
// numbers the changes, and an instance of 1.2 (a rolling upgrade) drops
// every key it holds when it moves, as it always did.
func (tx *Tx) keysChanged(ctx context.Context, accountID string) error {
	var epoch int64
	if err := tx.QueryRowContext(ctx, bumpKeyEpochSQL).Scan(&epoch); err != nil {
		return fmt.Errorf("bump key epoch: %w", err)
	}
	if _, err := tx.ExecContext(ctx, accountKeyEpochSQL, accountID, epoch); err != nil {
		return fmt.Errorf("bump account key epoch: %w", err)
	}
	if tx.change.KeyAccounts == nil {
		tx.change.KeyAccounts = map[string]int64{}
	}
	tx.change.KeyAccounts[accountID] = epoch
	tx.change.KeyEpoch = max(tx.change.KeyEpoch, epoch)
	return nil
}

// ReadKeyEpoch reads the key epoch and the highest epoch raised by a
// writer that records no account (KeyEpochQuery). On PostgreSQL the read
// is bounded by AuthReadTimeout.
func (s *Store) ReadKeyEpoch(ctx context.Context) (epoch, legacy int64, err error) {
	if s.epochStmt == nil {
		err = s.r.QueryRowContext(ctx, KeyEpochQuery).Scan(&epoch, &legacy)
		return epoch, legacy, err
	}
	ctx, cancel := s.authRead(ctx)
	defer cancel()
	if err := s.epochStmt.QueryRowContext(ctx).Scan(&epoch, &legacy); err != nil {
		return 0, 0, fmt.Errorf("read key epoch: %w", hung(ctx, err))
	}
	return epoch, legacy, nil
}

// WatchConn is a connection of the SQLite watch's own pool (one
// connection), for PRAGMA data_version, which is per connection; nil on
// PostgreSQL.
func (s *Store) WatchConn(ctx context.Context) (*sql.Conn, error) {
	if s.watchDB == nil {
		return nil, nil
	}
	return s.watchDB.Conn(ctx)
}

// KeyChanges is what KeyChangesSince read: the accounts whose keys changed
// after its since, each with the key epoch of its last change.
type KeyChanges map[string]int64

// KeyChangesSince reads the accounts whose keys changed at a key epoch
// above since.
func (s *Store) KeyChangesSince(ctx context.Context, since int64) (KeyChanges, error) {
	ctx, cancel := s.authRead(ctx)
	defer cancel()
	rows, err := s.r.QueryContext(ctx, keyChangesSQL, since)
	if err != nil {
		return nil, fmt.Errorf("read key changes: %w", hung(ctx, err))
	}
	defer rows.Close()
	ch := KeyChanges{}
	for rows.Next() {
		var acct string
		var epoch int64
		if err := rows.Scan(&acct, &epoch); err != nil {
			return nil, fmt.Errorf("read key changes: %w", err)
		}
		ch[acct] = epoch
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read key changes: %w", hung(ctx, err))
	}
	return ch, nil
}

// AuthReadTimeout bounds each PostgreSQL read that authentication makes
// (the key epoch, a key): a server that stops answering without closing
// its connections (a stopped process, a hung host) then costs a request a
// 500 after this long, rather than the request's whole bound; a healthy
// one answers these reads in milliseconds. SQLite, a local file, does not
// hang so; its waits are bounded by busy_timeout, and its hot path
// allocates no timer.
const AuthReadTimeout = 2 * time.Second

// ErrStoreHung is the cause of a read given up on after AuthReadTimeout.
var ErrStoreHung = errors.New("the store did not answer in time")

// authRead is ctx bounded by AuthReadTimeout on PostgreSQL, and ctx
// itself on SQLite, for one read that authentication makes.
func (s *Store) authRead(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.engine != EnginePostgres {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, AuthReadTimeout, ErrStoreHung)
}

// hung returns err, or ErrStoreHung wrapping it when ctx's own bound
// (AuthReadTimeout) ended the read.
func hung(ctx context.Context, err error) error {
	if context.Cause(ctx) == ErrStoreHung {
		return fmt.Errorf("%w: %w", ErrStoreHung, err)
	}
	return err
}
