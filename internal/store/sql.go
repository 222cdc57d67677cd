package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is where the engines' SQL really differs; everything else is
// shared text with $N placeholders.
type dialect struct {
	// forUpdate locks the rows a transaction reads before writing them. On
	// PostgreSQL it is NO KEY UPDATE, which still lets other transactions
	// insert rows that reference the locked one (questions of an agent,
	// keys of an account). On SQLite the writer's BEGIN IMMEDIATE already
	// holds the database's write lock, so it is empty there.
	forUpdate string
	// skipLocked claims rows no other transaction holds, passing over
	// those another holds (webhook deliveries); SQLite's one writer never
	// meets such rows.
	skipLocked string
}

var (
	sqliteDialect   = dialect{forUpdate: ""}
	postgresDialect = dialect{forUpdate: " FOR NO KEY UPDATE", skipLocked: " FOR UPDATE SKIP LOCKED"}
)

// Tx is a transaction on the writer, with what its Observers are told once
// it commits: the keys and agent lists it changed (epoch.go).
type Tx struct {
	*sql.Tx
	change Commit
	// events are what the transaction records, written just before it
	// commits (events.go).
	events []domain.Event
	// mail: mailed events get a mail row; mailed: one was written.
	mail, mailed bool
}

// agentsChanged notes that tx changes what the account's agent list
// shows: once it commits, the Observers are told (epoch.go).
func (tx *Tx) agentsChanged(accountID string) {
	if !slices.Contains(tx.change.AgentAccounts, accountID) {
		tx.change.AgentAccounts = append(tx.change.AgentAccounts, accountID)
	}
}

// inTx runs fn in a transaction on the writer and commits it when fn
// returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback()
	tx := &Tx{Tx: sqlTx, mail: s.mail.Load()}
	if err := fn(tx); err != nil {
		return err
	}
	deliveries := false
	if len(tx.events) > 0 {
		if deliveries, err = writeEvents(ctx, tx, time.Now()); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if deliveries {
		s.deliveriesDue()
	}
	if tx.mailed {
		s.mailDue()
	}
	if tx.change.KeyEpoch != 0 || len(tx.change.AgentAccounts) > 0 {
		for _, o := range s.observers {
			o.Committed(ctx, tx.change)
		}
	}
	return nil
}

// isUnique reports whether err is a unique (or primary key) violation, by
// the engine's error code.
func isUnique(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		c := sqErr.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// isBusy reports whether err is SQLite's SQLITE_BUSY, in any of its forms.
func isBusy(err error) bool {
	var sqErr *sqlite.Error
	return errors.As(err, &sqErr) && sqErr.Code()&0xff == sqlite3.SQLITE_BUSY
}

// storable reports whether every s is text both engines hold alike: valid
// UTF-8 without NUL. PostgreSQL refuses anything else outright (SQLSTATE
// 22021), SQLite would compare it as bytes; neither can have such an id,
// email or prefix on a row, since none is ever written. So a lookup by one
// is ErrNotFound (or an empty list) on both engines, without a query, and
// never a failure.
func storable(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// checkAffected turns an UPDATE that matched no row into ErrNotFound.
func checkAffected(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("rows affected: %w", err)
	}
	if n == 0 {
		return domain.ErrNotFound
	}
	return nil
}

// Times are stored as BIGINT Unix milliseconds and read back in UTC.

func toMS(t time.Time) int64 { return t.UnixMilli() }

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func toNullMS(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// msTime is t as it reads back from the database.
func msTime(t time.Time) time.Time { return fromMS(toMS(t)) }

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// joinList and splitList store a list of words (scopes, features, ids) in
// one TEXT column.
func joinList[T ~string](list []T) string {
	words := make([]string, len(list))
	for i, v := range list {
		words[i] = string(v)
	}
	return strings.Join(words, " ")
}

func splitList[T ~string](s string) []T {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil
	}
	out := make([]T, len(f))
	for i, v := range f {
		out[i] = T(v)
	}
	return out
}

// collect reads every row of a query through scan, then closes rows; rows
// and err are the query's results, and what names the query in errors.
func collect[T any](what string, rows *sql.Rows, err error, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// rowErr is the error of a read of one row: ErrNotFound when there was
// none, else err (nil or not) wrapped with what.
func rowErr(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return domain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
