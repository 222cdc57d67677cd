package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
)

// TestUserResetPassword: support gives a user who lost their password a
// one-time one, printed alone on one line; the user must replace it at
// next sign-in, and the reset is in the account's audit trail. A user of
// another account, or none, is exit 1; a command line without the account
// or email is exit 2; each with one line on stderr.
func TestUserResetPassword(t *testing.T) {
	db := filepath.Join(t.TempDir(), "reset.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	other := mustCLI(t, db, "", "account", "create", "--name", "Other")
	ann := mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", other, "--email", "sam@example.com", "--role", "owner")

	pw := mustCLI(t, db, "", "user", "reset-password", "--account", acct, "--email", " ANN@example.com")
	if pw == "" || strings.ContainsAny(pw, " \n") {
		t.Fatalf("printed %q", pw)
	}
	st, err := (env{}).openExisting(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.GetUser(context.Background(), ann)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := password.Verify(u.PasswordHash, pw); !ok || err != nil || !u.MustChangePassword {
		t.Fatalf("after reset: %+v (verify %v, %v)", u, ok, err)
	}
	evs, err := st.ListAuditEvents(context.Background(), acct, 1)
	if err != nil || len(evs) != 1 || evs[0].Action != domain.AuditUserPasswordReset || evs[0].Actor != "support" {
		t.Fatalf("audit: %+v, %v", evs, err)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"user", "reset-password", "--account", acct, "--email", "sam@example.com"}, 1, "no user sam@example.com in account"},
		{[]string{"user", "reset-password", "--account", acct, "--email", "zed@example.com"}, 1, "no user zed@example.com"},
		{[]string{"user", "reset-password", "--account", acct, "--email", "Zed <zed@example.com>"}, 1, "is not an email address"},
		{[]string{"user", "reset-password", "--account", acct}, 2, "needs --email"},
		{[]string{"user", "reset-password", "--email", "ann@example.com"}, 2, "needs --account"},
		{[]string{"user", "rename"}, 2, "create, reset-password"},
	} {
		out, errs, code := cli(t, db, "", tc.args...)
		if code != tc.code || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}
