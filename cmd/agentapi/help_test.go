package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHelpNamesEveryFlag: `agentapi help` shows every flag that a command's
// own -h prints, so that nobody has to guess a flag exists (it once left out
// key create's --allowed-ips and api ask's --stream). Flags that every
// command of a kind takes are described once below the list instead.
func TestHelpNamesEveryFlag(t *testing.T) {
	shared := map[string]bool{"db": true, "redis": true, "url": true, "insecure-http": true, "json": true, "table": true}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for _, cmd := range [][]string{
		{"account", "create"}, {"account", "show"}, {"account", "deactivate"}, {"account", "activate"},
		{"account", "feature"}, {"account", "rename"}, {"user", "create"}, {"user", "reset-password"},
		{"key", "create"}, {"key", "revoke"}, {"key", "set-rate-limit"}, {"key", "list"}, {"key", "show"}, {"user", "list"},
		{"api", "me"}, {"api", "agents", "list"}, {"api", "agents", "get"}, {"api", "agents", "create"},
		{"api", "agents", "update"}, {"api", "ask"},
		{"api", "events", "list"}, {"api", "events", "get"}, {"api", "webhooks", "create"},
		{"api", "webhooks", "rotate-secret"}, {"api", "webhooks", "deliveries"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(cmd, "-h"), func(string) string { return "" },
			strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%v -h: exit %d, %s", cmd, code, stderr.String())
		}
		flags := flagLine.FindAllStringSubmatch(stdout.String()+stderr.String(), -1)
		if len(flags) == 0 {
			t.Fatalf("%v -h printed no flags:\n%s%s", cmd, stdout.String(), stderr.String())
		}
		for _, f := range flags {
			shown := regexp.MustCompile(`--` + f[1] + `([^a-z-]|$)`).MatchString(usage)
			if !shared[f[1]] && !shown {
				t.Errorf("agentapi help does not show %v's --%s", cmd, f[1])
			}
		}
	}
}

// TestHelpOfHelpEnds: "help" after "help" asks for help again, which the
// built binary answers at once (exit 0, the usage of the level the other
// words name, or exit 2 for an unknown one); "help help" once recursed
// until the stack overflowed (5 s, 1 GB). Each run has 10 s.
func TestHelpOfHelpEnds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "help.db") // a flag's help shows it
	for _, c := range []struct {
		args []string
		code int
		same []string // prints what this prints
	}{
		{[]string{"help", "help"}, 0, []string{"help"}},
		{[]string{"help", "help", "help"}, 0, []string{"help"}},
		{[]string{"key", "help", "help"}, 0, []string{"key", "help"}},
		{[]string{"help", "key", "help"}, 0, []string{"key", "help"}},
		{[]string{"help", "help", "key"}, 0, []string{"key", "help"}},
		{[]string{"help", "key", "create", "help"}, 0, []string{"key", "create", "-h"}},
		{[]string{"key", "create", "help", "help"}, 0, []string{"key", "create", "-h"}},
		{[]string{"api", "agents", "help", "help"}, 0, []string{"api", "agents", "help"}},
		{[]string{"help", "help", "frobnicate"}, 2, []string{"frobnicate"}},
		{[]string{"key", "help", "help", "frobnicate"}, 2, []string{"key", "frobnicate"}},
	} {
		code, out := runBinary(t, db, c.args...)
		wantCode, want := runBinary(t, db, c.same...)
		if code != c.code || wantCode != c.code || out != want {
			t.Errorf("%v: exit %d, printed:\n%s\nwant exit %d and what %v prints (exit %d):\n%s", c.args, code, out, c.code, c.same, wantCode, want)
		}
	}
}

// runBinary runs the built agentapi with args and AGENTAPI_DB=db, for at
// most 10 s, and returns its exit code and what it printed (stdout, then
// stderr).
func runBinary(t *testing.T, db string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), "AGENTAPI_DB="+db)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agentapi %s: still running after 10 s", strings.Join(args, " "))
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("agentapi %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String() + stderr.String()
}
