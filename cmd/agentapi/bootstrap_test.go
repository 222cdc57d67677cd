package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestFirstStartPerEngine: on SQLite the first start creates an account
// and prints the banner with its one-time password; on PostgreSQL
// (production) it creates nothing, prints nothing and logs how to create an
// account with the CLI, so no password reaches the logs.
func TestFirstStartPerEngine(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			var out, logs bytes.Buffer
			st := storetest.Open(t, engine)
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			if err := bootstrap(ctx, env{stdout: &out, stderr: &out}, log, st, "http://127.0.0.1:8080", "db"); err != nil {
				t.Fatal(err)
			}
			n, err := st.CountAccounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if engine == store.EngineSQLite {
				if n != 1 || !strings.Contains(out.String(), "Password:") || logs.Len() != 0 {
					t.Fatalf("SQLite first start: %d accounts, stdout %q, logs %q", n, out.String(), logs.String())
				}
				return
			}
			if n != 0 || out.Len() != 0 || strings.Contains(logs.String(), "Password") ||
				!strings.Contains(logs.String(), "agentapi account create") || !strings.Contains(logs.String(), "agentapi user create") {
				t.Fatalf("PostgreSQL first start: %d accounts, stdout %q, logs %q", n, out.String(), logs.String())
			}
		})
	}
}

// TestServeOnEmptyPostgres: the real serve process on an empty PostgreSQL
// database prints no banner and no password, and its JSON log says how to
// create an account.
func TestServeOnEmptyPostgres(t *testing.T) {
	db := storetest.PostgresURL(t)
	s := startServer(t, nil, "--db", db)
	if out := s.stdout.String(); strings.Contains(out, "Password") || strings.Contains(out, "owner@localhost") {
		t.Fatalf("stdout: %q", out)
	}
	// The log is buffered up to 100 ms (logbuf.go): wait for the line.
	logs := s.stderr.String()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs, "agentapi account create") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		logs = s.stderr.String()
	}
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, "agentapi account create") || strings.Contains(logs, "Password") {
		t.Fatalf("log: %s", logs)
	}
	st, err := (env{}).openExisting(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.CountAccounts(context.Background()); n != 0 || err != nil {
		t.Fatalf("accounts: %d, %v", n, err)
	}
}
