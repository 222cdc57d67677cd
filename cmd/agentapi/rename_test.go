package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// TestAccountRenameBinary: the built program renames an account by its id
// or its current name, prints the id and the new name, records the rename
// in the account's audit trail (actor support), and refuses a name the
// name rule refuses (exit 1, one line on stderr, nothing changed) and a
// missing argument (usage, exit 2).
func TestAccountRenameBinary(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rename.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(binary(t), append([]string{"account", "rename", "--db", db}, args...)...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	if out, errs, code := run(acct, "Acme & Co"); code != 0 || out != acct+` renamed "Acme & Co"`+"\n" {
		t.Fatalf("rename by id: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run("acme & co", "Globex"); code != 0 || !strings.HasPrefix(out, acct+" renamed") {
		t.Fatalf("rename by name: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run(acct, "   "); code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "account name") {
		t.Fatalf("a blank name: exit %d, %q, %q", code, out, errs)
	}
	if _, errs, code := run(acct); code != 2 || !strings.Contains(errs, "NEW_NAME") {
		t.Fatalf("no new name: exit %d, %q", code, errs)
	}
	if out := mustCLI(t, db, "", "account", "show", acct); !strings.Contains(out, `"name":"Globex"`) {
		t.Fatalf("account show after the renames: %s", out)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	items, _, err := st.AuditPage(context.Background(), store.AuditPageQuery{AccountID: acct, Limit: 10})
	if err != nil || len(items) != 2 {
		t.Fatalf("audit trail: %v, %+v", err, items)
	}
	if it := items[0]; it.Action != domain.AuditAccountRenamed || it.Actor != "support" || it.Detail != `"Acme & Co" → "Globex"` {
		t.Fatalf("newest audit event: %+v", it)
	}
}
