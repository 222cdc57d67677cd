package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"time"
)

// migrations holds the schema, one file per version, applied in name order.
// A file, once released, never changes: a change is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the PostgreSQL advisory lock key ("agentapi" in ASCII)
// that serializes instances migrating one database at the same time.
const migrationLock int64 = 0x6167656e74617069

type migration struct {
	version string
	sql     string
	// run, when set, is a migration SQL cannot express (such as one that
	// needs Unicode tables, or DDL that differs by engine); it runs in the
	// migrating transaction instead of sql, told the engine (EngineSQLite
	// or EnginePostgres), and is recorded like a file.
	run func(ctx context.Context, tx *sql.Tx, engine string) error
}

// codeMigrations are applied in version order together with the files.
// Like a file, a released one never changes.
var codeMigrations = []migration{
	{version: "0005_refold_agent_names.go", run: refoldAgentNames},
	{version: "0010_cluster_request_logs.go", run: clusterRequestLogs},       // usage.go
	{version: "0011_key_request_logs_by_time.go", run: keyRequestLogsByTime}, // requestlogs_key.go
	{version: "0012_batch_request_logs.go", run: batchRequestLogs},           // requestlogs.go
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := make([]migration, 0, len(names))
	for _, n := range names {
		b, err := migrations.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, migration{version: n[len("migrations/"):], sql: string(b)})
	}
	out = append(out, codeMigrations...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    TEXT PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`

// migrate applies the pending migrations in one transaction begun on db.
// On SQLite db is the writer, whose BEGIN IMMEDIATE makes another process
// opening the same file wait (busy_timeout) rather than migrate alongside.
func migrate(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, engine string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := applyMigrations(ctx, tx, engine); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// migratePostgres applies the pending migrations under a session advisory
// lock held on one dedicated connection, so that instances starting together
// migrate one after the other; the later ones find nothing left to do.
func migratePostgres(ctx context.Context, db *sql.DB) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.ExecContext(uctx, `SELECT pg_advisory_unlock($1)`, migrationLock); uerr != nil {
			// A session still holding the lock must not go back to the
			// pool: reporting the connection bad makes database/sql close it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = fmt.Errorf("release migration lock: %w", uerr)
			}
		}
	}()
	return migrate(ctx, conn, EnginePostgres)
}

// applyMigrations runs, inside tx on engine, every migration
// schema_migrations does not list yet, and records it.
func applyMigrations(ctx context.Context, tx *sql.Tx, engine string) error {
	all, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	applied, err := collect("read schema_migrations", rows, err, func(r *sql.Rows) (v string, err error) {
		err = r.Scan(&v)
		return
	})
	if err != nil {
		return err
	}
	for _, m := range all {
		if slices.Contains(applied, m.version) {
			continue
		}
		if m.run != nil {
			if err := m.run(ctx, tx, engine); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.version, err)
			}
		} else if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			// No arguments: both drivers then run the whole
			// multi-statement file (pgx through the simple protocol).
			return fmt.Errorf("apply migration %s: %w", m.version, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
			m.version, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("record migration %s: %w", m.version, err)
		}
	}
	return nil
}

// ErrNotAgentapi is Open's error for a SQLite file that has tables but no
// schema_migrations: another program's database (a mistyped --db), which
// migrating would fill with agentapi's tables. A PostgreSQL URL names its
// database on purpose, and may share it with other tables.
var ErrNotAgentapi = errors.New("not an agentapi database (it has tables of its own, and no schema_migrations)")

// refuseForeign returns ErrNotAgentapi for a SQLite database that has
// tables and none of them schema_migrations; an empty one is agentapi's to
// migrate. Open asks before it changes anything (the journal mode
// included); a process migrating alongside does so in a transaction, so
// the tables it creates come with schema_migrations.
func refuseForeign(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'`)
	tables, err := collect("list tables", rows, err, func(r *sql.Rows) (n string, err error) {
		err = r.Scan(&n)
		return
	})
	if err != nil {
		return err
	}
	if len(tables) > 0 && !slices.Contains(tables, "schema_migrations") {
		return ErrNotAgentapi
	}
	return nil
}
