// Package storetest opens fresh, isolated stores for tests, on SQLite and on
// PostgreSQL. PostgreSQL comes from AGENTAPI_TEST_POSTGRES_URL (default
// DefaultPostgresURL); each test gets a database of its own, created for it
// and dropped after it. When PostgreSQL cannot be reached the test fails
// when CI is "true" (or "1") and is skipped, with the reason, elsewhere
// (see testenv.Require).
package storetest

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/testenv"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvPostgresURL names the environment variable holding the PostgreSQL
// server tests may use. Its role must be allowed to create databases.
const EnvPostgresURL = "AGENTAPI_TEST_POSTGRES_URL"

// DefaultPostgresURL is used when AGENTAPI_TEST_POSTGRES_URL is unset or empty.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Engines lists the engines tests should run against; PostgresURL (and so
// Open) decides per test whether PostgreSQL is there.
func Engines() []string { return []string{store.EngineSQLite, store.EnginePostgres} }

// Open returns a store on a fresh database of engine ("sqlite" or
// "postgres"), closed when the test ends.
func Open(t testing.TB, engine string) *store.Store {
	t.Helper()
	return OpenDSN(t, engine, freshDSN(t, engine))
}

// OpenTwo returns two stores on one fresh database of engine: two
// processes (or two instances) sharing it, as far as each store can tell.
func OpenTwo(t testing.TB, engine string) (*store.Store, *store.Store) {
	t.Helper()
	dsn := freshDSN(t, engine)
	return OpenDSN(t, engine, dsn), OpenDSN(t, engine, dsn)
}

func freshDSN(t testing.TB, engine string) string {
	t.Helper()
	switch engine {
	case store.EngineSQLite:
		return filepath.Join(t.TempDir(), "agentapi.db")
	case store.EnginePostgres:
		return PostgresURL(t)
	}
	t.Fatalf("storetest: unknown engine %q", engine)
	return ""
}

// OpenDSN opens a store of engine on dsn (another process's view of a
// database a test already opened), closed when the test ends.
func OpenDSN(t testing.TB, engine, dsn string) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s store: %v", engine, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close %s store: %v", engine, err)
		}
	})
	return st
}

// PostgresURL creates a fresh, empty database on the test server and
// returns its URL; the database is dropped (connections and all) when the
// test ends. When the server cannot be reached the test fails in CI and is
// skipped elsewhere.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := cmp.Or(strings.TrimSpace(os.Getenv(EnvPostgresURL)), DefaultPostgresURL)
	u, err := url.Parse(base)
	if err != nil {
		// A configuration mistake, not a missing service.
		t.Fatalf("%s must be a postgres:// URL: %q", EnvPostgresURL, "(unparsable)")
		return ""
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		t.Fatalf("%s must be a postgres:// URL: %q", EnvPostgresURL, u.Redacted())
		return ""
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgresURL, err)
		return ""
	}
	// Kept for the drop when the test ends, holding no connection meanwhile.
	admin.SetMaxIdleConns(0)
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pingCtx, pingCancel := context.WithTimeout(ctx, 3*time.Second)
	defer pingCancel()
	if err := admin.PingContext(pingCtx); err != nil {
		testenv.Require(t, "postgresql", fmt.Sprintf("%s: %v (set %s)", u.Redacted(), err, EnvPostgresURL))
		return ""
	}
	name := "agentapi_test_" + strings.ToLower(rand.Text()[:16])
	// name is made of [a-z0-9_] only, so quoting it is safe.
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("create test database on %s: %v", u.Redacted(), err)
		return ""
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
