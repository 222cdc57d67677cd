package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
)

// TestOpenRefusesAnotherProgramsDatabase: a SQLite file that has tables but
// no schema_migrations is another program's; Open refuses it, naming it,
// and leaves it as it was (its journal mode too), where an empty one is
// migrated.
func TestOpenRefusesAnotherProgramsDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, path)
	if err == nil {
		st.Close()
	}
	if !errors.Is(err, store.ErrNotAgentapi) || !strings.HasPrefix(err.Error(), path+" is not an agentapi database") {
		t.Fatalf("open: %v; want %s refused", err, path)
	}
	var tables []string
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "delete" || !slices.Equal(tables, []string{"t"}) {
		t.Fatalf("after the refusal: tables %v, journal mode %q (%v)", tables, mode, err)
	}
}

// TestOpenRefusesAFileThatIsNotSQLite names the file rather than passing
// on the driver's "file is not a database (26)".
func TestOpenRefusesAFileThatIsNotSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("not a database, but long enough to be read as a header by SQLite\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), path)
	if err == nil {
		st.Close()
	}
	if !errors.Is(err, store.ErrNotSQLite) || err.Error() != path+" is not a SQLite database" {
		t.Fatalf("open: %v", err)
	}
}
