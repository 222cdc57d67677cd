package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestHeldKeysFollowTheCLI: serve holds keys in memory between requests;
// the CLI, a separate process on the same SQLite file, changes a key's rate
// limit, deactivates and activates its account, and revokes it, and each
// change applies to the very next request.
func TestHeldKeysFollowTheCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "held.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Held")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "held@example.com", "--role", "owner")
	s := startServer(t, nil, "--db", db)
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(cliProc(t, db, "key", "create", "--account", acct, "--as", "held@example.com",
		"--name", "held", "--preset", "aiagent-read", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	me := func(wantCode int, wantLimit string) {
		t.Helper()
		code, body, hdr := call(t, "GET", s.base+"/v1/me", k.Credential, "")
		if code != wantCode {
			t.Fatalf("GET /v1/me: %d %v, want %d", code, body, wantCode)
		}
		if wantLimit != "" && hdr.Get("X-RateLimit-Limit") != wantLimit {
			t.Fatalf("X-RateLimit-Limit %q, want %s", hdr.Get("X-RateLimit-Limit"), wantLimit)
		}
	}
	for range 3 { // read once, then served from memory
		me(200, "120")
	}
	cliProc(t, db, "key", "set-rate-limit", k.ID, "33")
	me(200, "33")
	me(200, "33")
	cliProc(t, db, "account", "deactivate", acct)
	me(401, "")
	cliProc(t, db, "account", "activate", acct)
	me(200, "33")
	me(200, "33")
	cliProc(t, db, "key", "revoke", "--account", acct, "--as", "held@example.com", k.ID)
	me(401, "")
}
