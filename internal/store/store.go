// Package store owns every SQL statement of agentapi: one database/sql store
// that runs on SQLite (the embedded default) and PostgreSQL, with embedded
// migrations applied on open.
//
// Both engines share the SQL text ($N placeholders) and one representation:
// times are BIGINT Unix milliseconds in UTC, booleans are BOOLEAN, lists read
// whole with their row are space-separated TEXT. The dialect type holds the
// few places where the engines differ.
//
// On SQLite the store keeps two pools on the one file: a writer of a single
// connection that runs every transaction (BEGIN IMMEDIATE), so concurrent
// writers queue in Go rather than fail with SQLITE_BUSY, and a small pool of
// read-only connections for plain reads, which WAL lets run alongside the
// writer. Other processes (the operator CLI) writing the same file wait on
// busy_timeout. On PostgreSQL one pool serves both roles.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The two database/sql drivers: "pgx" and "sqlite".
	_ "github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotSQLite is Open's error for a path whose file is not a SQLite
// database (a text file given as --db, say).
var ErrNotSQLite = errors.New("not a SQLite database")

// Store is safe for concurrent use by many goroutines and, through the
// database, by many processes.
type Store struct {
	engine string
	d      dialect
	// w runs every transaction; r serves plain reads. They are the same
	// pool on PostgreSQL.
	w, r *sql.DB
	// keyByPrefix is the authentication hot path's statement, prepared once.
	keyByPrefix *sql.Stmt
	// epochStmt reads the key epoch (PostgreSQL); watchDB is SQLite's pool
	// of one connection for PRAGMA data_version (WatchConn).
	epochStmt *sql.Stmt
	watchDB   *sql.DB
	// observers are told what each commit changed (epoch.go).
	observers []Observer
	// closed is set by Close (Closed).
	closed atomic.Bool
	// stmts holds prepared reads by query text (queryRead).
	stmtsMu sync.Mutex
	stmts   map[string]*sql.Stmt
	// wake is told of commits that wrote webhook deliveries (webhooks.go).
	wake deliveryWake
	// mail is whether mailed events get a mail row (SetMail), and
	// mailWake is told of commits that wrote one (mail.go).
	mail     atomic.Bool
	mailWake deliveryWake
	// spikes is what this instance knows of keys' busy buckets
	// (anomalies.go).
	spikes spikeCache
	// nets is the key networks this instance wrote lately (anomalies.go).
	nets netCache
}

// Engine names.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
)

// SQLite connection settings. busy_timeout covers another process holding
// the write lock; the writer begins every transaction IMMEDIATE so that a
// transaction that reads before it writes cannot fail to upgrade its lock.
// The journal mode is not among them: WAL is a property of the file, set
// once by useWAL, and setting it on every new connection fails with
// SQLITE_BUSY, busy_timeout or not, while another process converts the file.
var (
	sqliteWriterParams = []string{
		busyTimeoutParam,
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(NORMAL)",
		"_txlock=immediate",
	}
	sqliteReaderParams = []string{
		busyTimeoutParam,
		"_pragma=foreign_keys(1)",
		"_pragma=query_only(1)",
	}
)

var busyTimeoutParam = "_pragma=busy_timeout(" + strconv.FormatInt(sqliteBusyTimeout.Milliseconds(), 10) + ")"

const (
	sqliteBusyTimeout = 10 * time.Second
	sqliteReaders     = 4
	postgresMaxConns  = 20
)

// Open opens dsn: a PostgreSQL URL (IsPostgres) selects PostgreSQL,
// anything else is a SQLite file path. Migrations run before it returns.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if IsPostgres(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

// IsPostgres reports whether Open takes dsn for PostgreSQL: a postgres://
// or postgresql:// URL.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// As many idle as open: with fewer, every burst above the idle count
	// ended by closing connections that the next burst opened again (a
	// backend started and the statements prepared anew, each time).
	db.SetMaxOpenConns(postgresMaxConns)
	db.SetMaxIdleConns(postgresMaxConns)
	db.SetConnMaxIdleTime(time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute)
	if err := migratePostgres(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	s := &Store{engine: EnginePostgres, d: postgresDialect, w: db, r: db}
	if err := s.prepare(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func openSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty database path")
	}
	w, err := sql.Open("sqlite", sqliteDSN(path, sqliteWriterParams))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	err = refuseForeign(ctx, w)
	if err == nil {
		err = useWAL(ctx, w)
	}
	if err != nil {
		w.Close()
		if sqErr := (*sqlite.Error)(nil); errors.As(err, &sqErr) && sqErr.Code()&0xff == sqlite3.SQLITE_NOTADB {
			err = ErrNotSQLite
		}
		if errors.Is(err, ErrNotSQLite) || errors.Is(err, ErrNotAgentapi) {
			return nil, fmt.Errorf("%s is %w", path, err)
		}
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := migrate(ctx, w, EngineSQLite); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", sqliteDSN(path, sqliteReaderParams))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(sqliteReaders)
	r.SetMaxIdleConns(sqliteReaders)
	// The key epoch's watches get a pool of their own (WatchConn): each
	// holds one connection for as long as it lives, since PRAGMA
	// data_version is per connection. Serve has one; a process with more
	// (tests, two API handlers on one store) must not wait for another's,
	// so the pool is not bounded.
	wdb, err := sql.Open("sqlite", sqliteDSN(path, sqliteReaderParams))
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	wdb.SetMaxIdleConns(1)
	s := &Store{engine: EngineSQLite, d: sqliteDialect, w: w, r: r, watchDB: wdb}
	if err := s.prepare(ctx); err != nil {
		wdb.Close()
		r.Close()
		w.Close()
		return nil, err
	}
	return s, nil
}

// useWAL switches the file to write-ahead logging, so that readers and the
// writer do not block each other. The mode persists in the file; switching
// needs a moment of exclusive access, which SQLite does not wait for, so a
// process that finds another one holding the file retries for as long as
// busy_timeout would have waited.
func useWAL(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil && strings.EqualFold(mode, "wal") {
			return nil
		}
		if err != nil && !isBusy(err) {
			return fmt.Errorf("set journal mode: %w", err)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("journal mode is %q", mode)
			}
			return fmt.Errorf("set journal mode to WAL: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("set journal mode to WAL: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

// sqliteDSN is the modernc.org/sqlite DSN of the file at path: a file: URI
// (so that any path survives, escaped) whose query the driver reads for its
// own parameters and SQLite ignores.
func sqliteDSN(path string, params []string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + strings.Join(params, "&")
}

func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.keyByPrefix, err = s.r.PrepareContext(ctx, keyByPrefixSQL); err != nil {
		return fmt.Errorf("prepare key by prefix: %w", err)
	}
	if s.engine == EnginePostgres {
		if s.epochStmt, err = s.r.PrepareContext(ctx, KeyEpochQuery); err != nil {
			return fmt.Errorf("prepare key epoch: %w", err)
		}
	}
	return nil
}

// maxReadStmts bounds queryRead's statements; the texts come from a few
// shapes in this package, so the bound is never reached in practice.
const maxReadStmts = 64

// queryRead runs a read on the reader pool through a statement prepared
// once per query text (and per connection, by database/sql), instead of
// parsing and planning the text on every call: on SQLite that parse was a
// quarter of a list request. Only for texts this package builds from a
// fixed set of shapes, never from input.
func (s *Store) queryRead(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s.stmtsMu.Lock()
	st, ok := s.stmts[query]
	if !ok && len(s.stmts) < maxReadStmts {
		var err error
		if st, err = s.r.PrepareContext(ctx, query); err != nil {
			s.stmtsMu.Unlock()
			return nil, err
		}
		if s.stmts == nil {
			s.stmts = map[string]*sql.Stmt{}
		}
		s.stmts[query] = st
	}
	s.stmtsMu.Unlock()
	if st == nil {
		return s.r.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// Checkpoint copies SQLite's write-ahead log into the database file and
// empties it (PRAGMA wal_checkpoint(TRUNCATE)), so that work written in bulk
// (an import, a benchmark's seeding) is not paid for by the requests that
// happen to come next. It does nothing on PostgreSQL.
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.engine != EngineSQLite {
		return nil
	}
	var busy, logged, done int
	if err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint: the database was busy (%d of %d pages copied)", done, logged)
	}
	return nil
}

// ErrClosed is the error of a use of a store after Close.
var ErrClosed = errors.New("store closed")

// Closed reports that Close was called: a holder of a connection of its
// own (the SQLite watch, WatchConn) stops using it.
func (s *Store) Closed() bool { return s.closed.Load() }

// Close flushes nothing (callers flush first) and closes the pools.
func (s *Store) Close() error {
	s.closed.Store(true)
	var errs []error
	s.stmtsMu.Lock()
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	s.stmtsMu.Unlock()
	if s.keyByPrefix != nil {
		errs = append(errs, s.keyByPrefix.Close())
	}
	if s.epochStmt != nil {
		errs = append(errs, s.epochStmt.Close())
	}
	if s.watchDB != nil {
		errs = append(errs, s.watchDB.Close())
	}
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// Ping reports whether the database answers (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if s.w != s.r {
		if err := s.w.PingContext(ctx); err != nil {
			return fmt.Errorf("ping writer: %w", err)
		}
	}
	return nil
}

// Engine is "sqlite" or "postgres".
func (s *Store) Engine() string { return s.engine }

// Secret returns the named 32-byte server secret, creating it at random on
// first use; every instance sharing the database gets the same bytes.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	if err := s.r.QueryRowContext(ctx, `SELECT value FROM server_secrets WHERE name = $1`, name).Scan(&v); err == nil {
		return v, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get secret %s: %w", name, err)
	}
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // crypto/rand.Read never fails (Go 1.24+)
	err := s.inTx(ctx, func(tx *Tx) error {
		// Of instances racing here, the first insert wins and everyone
		// reads its bytes.
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO server_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
			name, fresh); err != nil {
			return fmt.Errorf("insert secret %s: %w", name, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT value FROM server_secrets WHERE name = $1`, name).Scan(&v); err != nil {
			return fmt.Errorf("get secret %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Claim reports whether this caller is the first, of every instance sharing
// the database, to claim the one-time job name; later claims get false.
func (s *Store) Claim(ctx context.Context, name string) (bool, error) {
	var won bool
	err := s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO claims (name, claimed_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
			name, toMS(time.Now()))
		if err != nil {
			return fmt.Errorf("insert claim %s: %w", name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("rows affected: %w", err)
		}
		won = n == 1
		return nil
	})
	return won, err
}
