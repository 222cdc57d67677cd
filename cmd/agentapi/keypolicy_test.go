package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// The built binary's key create under the account's key policy (a 30-day
// maximum, allowed addresses required): a key without an expiry, with one
// beyond 30 days or without addresses is refused with exit 1 and one line
// naming the flag at fault (both when both are), and no key is made; a key
// within the policy is made.
func TestKeyCreateRefusedByPolicy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "policy.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	setPolicyIn(t, db, acct, "ann@example.com", domain.KeyPolicy{MaxKeyLifetimeDays: 30, RequireAllowedIPs: true})
	soon := time.Now().Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339)
	late := time.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	run := func(extra ...string) (string, string, int) {
		args := append([]string{"key", "create", "--db", db, "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "aiagent-read"}, extra...)
		cmd := exec.Command(binary(t), args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"--allowed-ips", "203.0.113.0/24"}, []string{"--expires-at: a key needs an expiry within 30 days (the account's key policy)"}},
		{[]string{"--allowed-ips", "203.0.113.0/24", "--expires-at", late}, []string{"--expires-at: a key must expire within 30 days"}},
		{[]string{"--expires-at", soon}, []string{"--allowed-ips: a key needs allowed addresses (the account's key policy)"}},
		{nil, []string{"--expires-at:", "; --allowed-ips:"}},
	} {
		out, errs, code := run(tc.args...)
		if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "agentapi: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and one line", tc.args, code, out, errs)
		}
		for _, s := range tc.says {
			if !strings.Contains(errs, s) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, errs, s)
			}
		}
	}
	if out, _, _ := cli(t, db, "", "key", "list", "--account", acct); strings.TrimSpace(out) != "" {
		t.Fatalf("a refused create made a key: %s", out)
	}
	if out, errs, code := run("--allowed-ips", "203.0.113.0/24", "--expires-at", soon); code != 0 || !strings.HasPrefix(out, "agk_live_") {
		t.Fatalf("within the policy: exit %d, stderr %q", code, errs)
	}
}

// setPolicyIn sets the account's key policy in the database db as the
// Owner email (the console is where Owners set it).
func setPolicyIn(t *testing.T, db, acct, email string, p domain.KeyPolicy) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := keys.New(st, nil)
	u, err := svc.Manager(ctx, acct, email)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetPolicy(ctx, keys.Actor{User: &u}, acct, p); err != nil {
		t.Fatal(err)
	}
}
